#include "config/toml_schema.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "config/units.hpp"
#include "util/file_io.hpp"

namespace agentbox {
namespace {

// Config files are small; anything bigger is a mistake, not a config.
constexpr size_t kMaxConfigBytes = 1 << 20;

std::string_view type_name(const toml::node& value) {
  switch (value.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

[[noreturn]] void wrong_type(const toml::node& value, std::string_view expected) {
  throw Error("expected " + std::string(expected) + ", not " + std::string(type_name(value)));
}

struct LineError {
  uint32_t line;
  std::string text;
};

class Walker {
 public:
  Walker(std::span<const std::string_view> sections, std::string_view file, const TomlVisitor& visit)
      : sections_(sections), file_(file), visit_(visit) {}

  void walk(const toml::table& table, const std::string& prefix) {
    for (const auto& [k, value] : table) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      uint32_t line = k.source().begin.line;
      bool is_section = std::any_of(sections_.begin(), sections_.end(),
                                    [&](std::string_view section) { return matches(section, key); });
      if (is_section) {
        if (const toml::table* sub = value.as_table())
          walk(*sub, key);
        else
          add(line, key + ": expected a table, not " + std::string(type_name(value)));
        continue;
      }
      try {
        if (!visit_(key, value)) add(line, "unknown key \"" + key + "\"");
      } catch (const Error& e) {
        add(line, key + ": " + e.what());
      }
    }
  }

  std::vector<std::string> take() {
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const LineError& a, const LineError& b) { return a.line < b.line; });
    std::vector<std::string> out;
    for (LineError& e : errors_) out.push_back(std::move(e.text));
    return out;
  }

 private:
  // "a.b" is itself; "a.*" is any one table under a (a name without a dot).
  static bool matches(std::string_view section, std::string_view key) {
    if (!section.ends_with(".*")) return section == key;
    std::string_view parent = section.substr(0, section.size() - 1);  // "a."
    return key.starts_with(parent) && key.size() > parent.size() &&
           key.substr(parent.size()).find('.') == std::string_view::npos;
  }

  void add(uint32_t line, std::string what) {
    errors_.push_back({line, std::string(file_) + ": " + what + " (line " + std::to_string(line) + ")"});
  }

  std::span<const std::string_view> sections_;
  std::string_view file_;
  const TomlVisitor& visit_;
  std::vector<LineError> errors_;
};

}  // namespace

std::optional<toml::table> read_toml_file(const std::string& path, bool missing_ok) {
  std::optional<std::string> read =
      missing_ok ? read_file_if_exists(path, kMaxConfigBytes + 1) : read_file(path, kMaxConfigBytes + 1);
  if (!read) return std::nullopt;
  const std::string& text = *read;
  if (text.size() > kMaxConfigBytes) throw Error(path + ": larger than 1 MiB, not a config file");
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw Error(path + ": invalid TOML: " + std::string(e.description()) + " (line " + std::to_string(at.line) +
                ", column " + std::to_string(at.column) + ")");
  }
}

std::vector<std::string> walk_toml(const toml::table& doc, std::span<const std::string_view> sections,
                                   std::string_view file, const TomlVisitor& visit) {
  Walker walker(sections, file, visit);
  walker.walk(doc, "");
  return walker.take();
}

void throw_if_errors(const std::vector<std::string>& errors) {
  if (errors.empty()) return;
  std::string all;
  for (const std::string& e : errors) {
    if (!all.empty()) all += '\n';
    all += e;
  }
  throw Error(std::move(all));
}

std::string toml_string(const toml::node& value) {
  if (const auto* s = value.as_string()) return s->get();
  wrong_type(value, "a string");
}

std::vector<std::string> toml_strings(const toml::node& value) {
  const toml::array* array = value.as_array();
  if (!array) wrong_type(value, "an array of strings");
  std::vector<std::string> out;
  for (const toml::node& item : *array) {
    const auto* s = item.as_string();
    if (!s) wrong_type(item, "an array of strings, with items that are strings");
    out.push_back(s->get());
  }
  return out;
}

int64_t toml_integer(const toml::node& value, int64_t min, int64_t max) {
  const auto* i = value.as_integer();
  if (!i) wrong_type(value, "an integer");
  int64_t v = i->get();
  if (v < min || v > max)
    throw Error("must be between " + std::to_string(min) + " and " + std::to_string(max) + ", not " +
                std::to_string(v));
  return v;
}

uint64_t toml_size(const toml::node& value) {
  if (const auto* s = value.as_string()) return parse_size(s->get());
  if (value.is_integer()) return static_cast<uint64_t>(toml_integer(value, 0, INT64_MAX));
  wrong_type(value, "a size like \"512M\" or a number of bytes");
}

uint32_t toml_cpu(const toml::node& value) {
  if (const auto* s = value.as_string()) return parse_cpu(s->get());
  // cpu = 2 or cpu = 1.5: the shortest text form parses exactly as the user wrote it.
  char buf[64];
  std::to_chars_result r{};
  if (const auto* i = value.as_integer())
    r = std::to_chars(buf, buf + sizeof buf, i->get());
  else if (const auto* f = value.as_floating_point())
    r = std::to_chars(buf, buf + sizeof buf, f->get());
  else
    wrong_type(value, "a CPU amount like \"1.5\" or \"500m\"");
  if (r.ec != std::errc()) throw Error("cpu value out of range");
  return parse_cpu(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

std::chrono::seconds toml_seconds(const toml::node& value) {
  return std::chrono::seconds(toml_integer(value, 1, INT32_MAX));
}

}  // namespace agentbox
