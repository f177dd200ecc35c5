#pragma once
// The Range request header (RFC 9110 §14) for one file of known size: a single byte range is
// served as 206, one that starts past the end as 416, and anything else (no header, another
// unit, several ranges, a syntax error) as the whole file, 200, which the RFC allows.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentbox::http {

struct ByteRange {
  enum class Kind { whole, partial, unsatisfiable };
  Kind kind = Kind::whole;
  uint64_t offset = 0;  // partial: first byte
  uint64_t length = 0;  // partial: bytes (>= 1)

  // "bytes 0-99/1000" for a partial range, "bytes */1000" for an unsatisfiable one.
  std::string content_range(uint64_t size) const;
};

ByteRange parse_byte_range(std::optional<std::string_view> header, uint64_t size);

}  // namespace agentbox::http
