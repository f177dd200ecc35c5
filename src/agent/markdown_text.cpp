#include "agent/markdown_text.hpp"

#include <algorithm>

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

std::string close_open_fence(std::string_view markdown) {
  Fence open;
  std::string_view rest = markdown;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    const Fence f = fence_of(line);
    if (f.c == 0) continue;
    if (open.c == 0) {
      if (f.c == '`' && f.rest.find('`') != std::string_view::npos) continue;  // inline code, not a fence
      open = f;
    } else if (f.c == open.c && f.length >= open.length && blank(f.rest)) {
      open = {};
    }
  }
  std::string out(markdown);
  if (open.c == 0) return out;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += std::string(open.length, open.c);
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
