#include "fs/front_matter.hpp"

#include <yaml.h>

namespace agentbox {
namespace {

// The next line of text from pos (without its '\n' or "\r\n"); pos moves past it.
std::string_view next_line(std::string_view text, size_t& pos) {
  const size_t end = text.find('\n', pos);
  std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
  pos = end == std::string_view::npos ? text.size() : end + 1;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool is_fence(std::string_view line, bool closing) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  return line == "---" || (closing && line == "...");
}

// The top-level scalar pairs of one YAML mapping document into out; false when the document
// is not a mapping (an empty one is fine) or libyaml reports an error.
bool parse_mapping(std::string_view yaml, std::map<std::string, std::string>& out) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return false;
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(yaml.data()), yaml.size());
  bool ok = true, in_map = false, done = false, have_key = false;
  int depth = 0;  // collections open below the top-level mapping
  std::string key;
  while (ok && !done) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&parser, &ev)) {
      ok = false;
      break;
    }
    switch (ev.type) {
      case YAML_MAPPING_START_EVENT:
      case YAML_SEQUENCE_START_EVENT:
        if (!in_map) {
          in_map = ev.type == YAML_MAPPING_START_EVENT;
          ok = in_map;  // a top-level list is no front matter
        } else {
          ++depth;
        }
        break;
      case YAML_MAPPING_END_EVENT:
      case YAML_SEQUENCE_END_EVENT:
        if (depth == 0)
          done = true;
        else if (--depth == 0)
          have_key = false;  // that collection was the value of `key`
        break;
      case YAML_SCALAR_EVENT:
        if (!in_map) {
          ok = ev.data.scalar.length == 0;  // an empty document: no fields
          done = true;
        } else if (depth == 0) {
          std::string s(reinterpret_cast<const char*>(ev.data.scalar.value), ev.data.scalar.length);
          if (!have_key) {
            key = std::move(s);
          } else {
            out.emplace(std::move(key), std::move(s));  // the first of a repeated key wins
          }
          have_key = !have_key;
        }
        break;
      case YAML_ALIAS_EVENT:
        if (in_map && depth == 0) have_key = !have_key;  // a key or value we do not resolve
        break;
      case YAML_STREAM_END_EVENT: done = true; break;
      default:  // stream and document starts and ends
        break;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&parser);
  return ok;
}

}  // namespace

FrontMatter split_front_matter(std::string_view text) {
  FrontMatter fm;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  size_t pos = 0;
  if (!is_fence(next_line(text, pos), /*closing=*/false)) {
    fm.body = std::string(text);
    return fm;
  }
  const size_t yaml_start = pos;
  while (pos < text.size()) {
    const size_t line_start = pos;
    if (!is_fence(next_line(text, pos), /*closing=*/true)) continue;
    fm.present = true;
    fm.valid = parse_mapping(text.substr(yaml_start, line_start - yaml_start), fm.fields);
    if (!fm.valid) fm.fields.clear();
    size_t body = pos;
    while (body < text.size()) {  // blank lines after the block
      size_t next = body;
      std::string_view line = next_line(text, next);
      if (line.find_first_not_of(" \t") != std::string_view::npos) break;
      body = next;
    }
    fm.body = std::string(text.substr(body));
    return fm;
  }
  fm.body = std::string(text);  // never closed: not front matter
  return fm;
}

}  // namespace agentbox
