#pragma once
// Pieces of Markdown (CommonMark, as GitHub and Open WebUI render it) that hold text of unknown
// content without letting it change the document around them: a tool's output with ``` in it
// stays inside its fenced block, a path with a backtick inside its code span, an answer that
// opens a fence (or an HTML comment) and never closes it does not swallow the rest.
// Pure functions on strings (agent/transcript_markdown uses them).
#include <cstddef>
#include <string>
#include <string_view>

namespace agentbox::agent {

// A fenced code block of body: its fence a run of backticks longer than any in body (at least
// three), so no line of body can close it. info: the language ("sh", "json", ""), ours only.
std::string fenced_block(std::string_view body, std::string_view info);

// An inline code span of text on one line (line breaks become spaces), delimited by more
// backticks than the longest run in text.
std::string inline_code(std::string_view text);

// Escapes & < > " ' and turns line breaks into spaces: text for inside an HTML element such as
// <summary>, where Markdown is not parsed.
std::string html_text(std::string_view text);

// markdown followed by what ends the block it leaves open, if it does: the fence of a fenced
// code block, or the end marker of an HTML block that only a marker ends (<!--, <pre>,
// <script>, <style>, <textarea>, <?, <!X, <![CDATA[), which would otherwise take in the rest.
std::string close_open_blocks(std::string_view markdown);

// Every line of text prefixed with "> ": a blockquote, which also ends any HTML the text opens.
std::string blockquote(std::string_view text);

// The first max_lines lines and at most max_bytes of text, cut at a character boundary.
struct CutText {
  std::string_view kept;
  size_t cut_bytes = 0;  // how many bytes were left out (0: all of it is kept)
};
CutText cut_text(std::string_view text, size_t max_bytes, size_t max_lines);

}  // namespace agentbox::agent
