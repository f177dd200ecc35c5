#include "metrics/exposition.hpp"

#include <fmt/format.h>

#include <cmath>

namespace agentbox::metrics {

namespace {

// Backslash, double quote and line feed are the three characters a label value escapes.
void append_escaped(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

void append_value(std::string& out, double value) {
  if (std::isnan(value))
    out += "NaN";
  else if (std::isinf(value))
    out += value > 0 ? "+Inf" : "-Inf";
  else
    fmt::format_to(std::back_inserter(out), "{}", value);
}

}  // namespace

void Exposition::family(std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void Exposition::sample(std::string_view name, double value, std::initializer_list<Label> labels) {
  write_sample(name, value, labels.begin(), labels.size());
}

void Exposition::sample(std::string_view name, double value, const std::vector<Label>& labels) {
  write_sample(name, value, labels.data(), labels.size());
}

void Exposition::write_sample(std::string_view name, double value, const Label* labels, size_t count) {
  out_ += name;
  if (count > 0) {
    out_ += '{';
    for (size_t i = 0; i < count; ++i) {
      if (i > 0) out_ += ',';
      out_ += labels[i].name;
      out_ += "=\"";
      append_escaped(out_, labels[i].value);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  append_value(out_, value);
  out_ += '\n';
}

}  // namespace agentbox::metrics
