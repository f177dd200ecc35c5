#include "http/byte_range.hpp"

#include <boost/algorithm/string/predicate.hpp>

#include <charconv>

namespace agentbox::http {
namespace {

// Digits only: from_chars alone would accept a sign and leave spaces to us.
std::optional<uint64_t> number(std::string_view s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string ByteRange::content_range(uint64_t size) const {
  if (kind == Kind::partial)
    return "bytes " + std::to_string(offset) + "-" + std::to_string(offset + length - 1) + "/" + std::to_string(size);
  return "bytes */" + std::to_string(size);
}

ByteRange parse_byte_range(std::optional<std::string_view> header, uint64_t size) {
  ByteRange whole;
  if (!header) return whole;
  std::string_view h = trim(*header);
  constexpr std::string_view kUnit = "bytes=";
  if (h.size() < kUnit.size() || !boost::algorithm::iequals(h.substr(0, kUnit.size()), kUnit)) return whole;
  std::string_view spec = trim(h.substr(kUnit.size()));
  if (spec.find(',') != std::string_view::npos) return whole;  // several ranges: send it all
  size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return whole;
  std::string_view first_text = trim(spec.substr(0, dash));
  std::string_view last_text = trim(spec.substr(dash + 1));

  ByteRange r;
  if (first_text.empty()) {  // "-N": the last N bytes
    auto suffix = number(last_text);
    if (!suffix) return whole;
    if (*suffix == 0 || size == 0) return {ByteRange::Kind::unsatisfiable};
    r.length = std::min(*suffix, size);
    r.offset = size - r.length;
  } else {
    auto first = number(first_text);
    if (!first) return whole;
    uint64_t last = size == 0 ? 0 : size - 1;
    if (!last_text.empty()) {
      auto l = number(last_text);
      if (!l || *l < *first) return whole;  // an invalid range-spec is ignored
      last = std::min(*l, last);
    }
    if (*first >= size) return {ByteRange::Kind::unsatisfiable};
    r.offset = *first;
    r.length = last - *first + 1;
  }
  r.kind = ByteRange::Kind::partial;
  return r;
}

}  // namespace agentbox::http
