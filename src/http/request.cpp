#include "http/request.hpp"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace agentbox::http {

namespace urls = boost::urls;

const std::string& Request::param(std::string_view name) const {
  auto it = path_params.find(name);
  if (it == path_params.end()) throw std::out_of_range("no path parameter " + std::string(name));
  return it->second;
}

std::optional<std::string> Request::query_param(std::string_view name) const {
  for (const auto& [key, value] : query)
    if (key == name) return value;
  return std::nullopt;
}

std::vector<std::string> Request::query_params(std::string_view name) const {
  std::vector<std::string> values;
  for (const auto& [key, value] : query)
    if (key == name) values.push_back(value);
  return values;
}

std::optional<std::string_view> Request::header(std::string_view name) const {
  auto it = headers.find(name);
  if (it == headers.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

bool is_null_value(std::string_view value) {
  constexpr std::string_view kNull = "null";
  return value.size() == kNull.size() &&
         std::equal(value.begin(), value.end(), kNull.begin(), [](char a, char b) { return (a | 0x20) == b; });
}

std::optional<ParsedTarget> parse_target(std::string_view target) {
  auto parsed = urls::parse_origin_form(target);
  if (!parsed) return std::nullopt;
  auto has_nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };

  ParsedTarget out;
  out.path = parsed->path();
  if (has_nul(out.path)) return std::nullopt;
  for (std::string segment : parsed->segments()) out.segments.push_back(std::move(segment));
  for (const auto& p : parsed->params()) {
    if (has_nul(p.key) || has_nul(p.value)) return std::nullopt;
    if (p.has_value && is_null_value(p.value)) continue;
    out.query.emplace_back(p.key, p.value);
  }
  return out;
}

std::string percent_encode(std::string_view text, std::string_view keep) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        keep.find(static_cast<char>(c)) != keep.npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace agentbox::http
