#pragma once
// The YAML front matter of a Markdown file (a skill's SKILL.md): the block between a first line
// "---" and the next line "---" (or "..."). Its top-level `key: value` pairs whose value is a
// scalar are kept (nested values are skipped); the rest of the file is the body. YAML is parsed
// by libyaml (Debian libyaml-dev), so quoting, folded and literal blocks read as YAML says.
// Pure: no I/O.
#include <map>
#include <string>
#include <string_view>

namespace agentbox {

struct FrontMatter {
  bool present = false;                       // the text opens with a closed front matter block
  bool valid = false;                         // present, and a YAML mapping libyaml could parse
  std::map<std::string, std::string> fields;  // top-level scalar values by key
  std::string body;                           // the text after the block (all of it when absent)
};

// Splits `text`. A block that is not closed is no front matter: the whole text is the body.
// Blank lines right after the block are not part of the body. Never throws on bad YAML: the
// block is still cut off, with valid = false and no fields.
FrontMatter split_front_matter(std::string_view text);

}  // namespace agentbox
