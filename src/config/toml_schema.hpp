#pragma once
// Reading a TOML file against a fixed schema: a table of known dotted keys, each with a
// function that converts and stores its value. Anything else is an error naming the file,
// the key and the line, so a typo never silently falls back to a default. Shared by the
// `agentbox run` profile and the server config.
#include <toml++/toml.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"

namespace agentbox {

// One known key. apply converts the value and stores it; it throws agentbox::Error with the
// reason ("expected an integer, not a string"), which the walker prefixes with file and key.
template <class Target>
struct TomlField {
  std::string_view key;  // dotted path, e.g. "limits.memory"
  void (*apply)(Target&, const toml::node&);
};

// Parses path. A missing file gives nullopt when missing_ok; any other failure (unreadable,
// invalid TOML) throws "PATH: ...".
std::optional<toml::table> read_toml_file(const std::string& path, bool missing_ok);

// Walks doc: for each key calls visit(dotted_key, value); a table whose dotted key is in
// `sections` is descended into instead ("a.*" in sections: every table directly under a).
// visit returns false for a key it does not know.
// Errors thrown by visit and unknown keys become one-line messages
// `FILE: KEY: reason (line N)` / `FILE: unknown key "KEY" (line N)`, ordered by line.
using TomlVisitor = std::function<bool(std::string_view key, const toml::node& value)>;
std::vector<std::string> walk_toml(const toml::table& doc, std::span<const std::string_view> sections,
                                   std::string_view file, const TomlVisitor& visit);

// walk_toml with a field table: stores every known value into target.
template <class Target>
std::vector<std::string> apply_toml_fields(Target& target, const toml::table& doc,
                                           std::span<const TomlField<Target>> fields,
                                           std::span<const std::string_view> sections, std::string_view file) {
  return walk_toml(doc, sections, file, [&](std::string_view key, const toml::node& value) {
    for (const TomlField<Target>& f : fields) {
      if (f.key == key) {
        f.apply(target, value);
        return true;
      }
    }
    return false;
  });
}

// Throws Error with the messages one per line, if there are any.
void throw_if_errors(const std::vector<std::string>& errors);

// Typed reads of one value; each throws Error saying what was expected.
std::string toml_string(const toml::node& value);
std::vector<std::string> toml_strings(const toml::node& value);  // an array of strings
int64_t toml_integer(const toml::node& value, int64_t min, int64_t max);
uint64_t toml_size(const toml::node& value);                 // "512M" or a number of bytes
uint32_t toml_cpu(const toml::node& value);                  // "1.5", "500m" or a number of cores
std::chrono::seconds toml_seconds(const toml::node& value);  // a positive number of seconds

}  // namespace agentbox
