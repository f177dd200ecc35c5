#include "agent/markdown_text.hpp"

#include <algorithm>
#include <cctype>

#include "util/utf8.hpp"

namespace agentbox::agent {

namespace {

size_t longest_run(std::string_view text, char c) {
  size_t longest = 0;
  size_t run = 0;
  for (char x : text) {
    run = x == c ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest;
}

// A fence line as CommonMark reads one: up to three spaces, then three or more ` or ~.
struct Fence {
  char c = 0;
  size_t length = 0;
  std::string_view rest;  // after the run: the info string, or what must be blank to close
};

Fence fence_of(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (i == line.size() || (line[i] != '`' && line[i] != '~')) return {};
  const char c = line[i];
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return {};
  return {c, n, line.substr(i + n)};
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r") == std::string_view::npos; }

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// The HTML blocks CommonMark ends at a marker rather than at a blank line (its kinds 1 to 5):
// left open, they would take in the rest of the document. Kind 1 (<pre>, <script>, <style>,
// <textarea>) ends at the end tag of any of the four.
constexpr std::string_view kRawTags[] = {"pre", "script", "style", "textarea"};

struct HtmlBlock {
  std::string closer;  // what ends it ("-->", "</pre>"); empty: none open
  bool raw = false;    // kind 1
};

bool ends_raw(std::string_view text) {
  for (size_t at = text.find("</"); at != std::string_view::npos; at = text.find("</", at + 1))
    for (std::string_view tag : kRawTags)
      if (starts_with_nocase(text.substr(at + 2), tag) && text.substr(at + 2 + tag.size()).starts_with('>'))
        return true;
  return false;
}

bool ends(const HtmlBlock& b, std::string_view text) {
  return b.raw ? ends_raw(text) : text.find(b.closer) != std::string_view::npos;
}

// The block line starts (up to three spaces, then the opener); none when it starts none or the
// line itself ends it.
HtmlBlock html_opened_by(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  const std::string_view s = line.substr(i);
  if (!s.starts_with('<')) return {};
  struct Kind {
    std::string_view opener, closer;
  };
  static constexpr Kind kMarked[] = {{"<!--", "-->"}, {"<![CDATA[", "]]>"}, {"<?", "?>"}};
  HtmlBlock b;
  size_t opener = 0;  // bytes of the opener, which cannot be part of its end
  for (std::string_view tag : kRawTags) {
    const size_t after = 1 + tag.size();
    if (starts_with_nocase(s.substr(1), tag) &&
        (after == s.size() || s[after] == ' ' || s[after] == '\t' || s[after] == '>' || s[after] == '\r')) {
      b = {"</" + std::string(tag) + ">", true};
      opener = after;
    }
  }
  for (const Kind& k : kMarked)
    if (b.closer.empty() && s.starts_with(k.opener)) {
      b = {std::string(k.closer), false};
      opener = k.opener == "<!--" ? 2 : k.opener.size();  // "<!-->" is a whole comment
    }
  if (b.closer.empty() && s.size() > 2 && s[1] == '!' && std::isalpha(static_cast<unsigned char>(s[2]))) {
    b = {">", false};
    opener = 2;
  }
  if (b.closer.empty() || ends(b, s.substr(opener))) return {};
  return b;
}

}  // namespace

std::string fenced_block(std::string_view body, std::string_view info) {
  const std::string fence(std::max<size_t>(3, longest_run(body, '`') + 1), '`');
  std::string out = fence;
  out += info;
  out += '\n';
  out += body;
  if (!body.empty() && body.back() != '\n') out += '\n';
  out += fence;
  out += '\n';
  return out;
}

std::string inline_code(std::string_view text) {
  std::string one_line(text);
  std::replace(one_line.begin(), one_line.end(), '\n', ' ');
  std::replace(one_line.begin(), one_line.end(), '\r', ' ');
  const std::string ticks(longest_run(one_line, '`') + 1, '`');
  // A span that starts or ends with a backtick needs a space there (stripped when rendered).
  const bool pad = !one_line.empty() && (one_line.front() == '`' || one_line.back() == '`');
  return ticks + (pad ? " " : "") + one_line + (pad ? " " : "") + ticks;
}

std::string html_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\n':
      case '\r': out += ' '; break;
      default: out += c;
    }
  }
  return out;
}

std::string close_open_blocks(std::string_view markdown) {
  Fence fence;     // the fenced block open, if any
  HtmlBlock html;  // the HTML block open, if any
  std::string_view rest = markdown;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    if (!html.closer.empty()) {
      if (ends(html, line)) html = {};
      continue;
    }
    const Fence f = fence_of(line);
    if (fence.c != 0) {
      if (f.c == fence.c && f.length >= fence.length && blank(f.rest)) fence = {};
      continue;
    }
    if (f.c != 0 && !(f.c == '`' && f.rest.find('`') != std::string_view::npos)) {  // else inline code
      fence = f;
      continue;
    }
    html = html_opened_by(line);
  }
  std::string out(markdown);
  if (fence.c == 0 && html.closer.empty()) return out;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += fence.c != 0 ? std::string(fence.length, fence.c) : html.closer;
  out += '\n';
  return out;
}

std::string blockquote(std::string_view text) {
  std::string out;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    out += line.empty() ? ">" : "> ";
    out += line;
    out += '\n';
  }
  return out;
}

CutText cut_text(std::string_view text, size_t max_bytes, size_t max_lines) {
  size_t end = 0;
  for (size_t lines = 0; end < text.size() && lines < max_lines; ++lines) {
    const size_t nl = text.find('\n', end);
    end = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  if (end > max_bytes) end = utf8_cut(text, max_bytes);
  return {text.substr(0, end), text.size() - end};
}

}  // namespace agentbox::agent
