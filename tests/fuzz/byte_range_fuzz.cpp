// The Range header of GET /files/serve and /files/view (http/byte_range.*), for a file size
// taken from the input's first 8 bytes (little-endian; the top bits are cleared at times so
// small sizes come up) and the rest as the header's value.
//
// Checks: a partial range lies inside the file (offset < size, 1 <= length <= size - offset) and
// its Content-Range names exactly the bytes served ("bytes FIRST-LAST/SIZE", read back); an
// unsatisfiable one says "bytes */SIZE"; no header at all is the whole file; the result does
// not depend on spaces around the value.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/byte_range.hpp"

namespace {

using agentbox::http::ByteRange;
using agentbox::http::parse_byte_range;

std::uint64_t read_number(std::string_view s) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  FUZZ_CHECK(ec == std::errc() && end == s.data() + s.size());
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::uint64_t file_size = 0;
  std::memcpy(&file_size, data, 8);
  // Mostly small files, at times any size up to 2^64 - 1.
  if ((file_size >> 56) % 4 != 0) file_size &= 0xFFFFF;
  const std::string_view header(reinterpret_cast<const char*>(data) + 8, size - 8);

  FUZZ_CHECK(parse_byte_range(std::nullopt, file_size).kind == ByteRange::Kind::whole);

  const ByteRange r = parse_byte_range(header, file_size);
  const std::string content_range = r.content_range(file_size);
  switch (r.kind) {
    case ByteRange::Kind::partial: {
      FUZZ_CHECK(file_size > 0);
      FUZZ_CHECK(r.offset < file_size);
      FUZZ_CHECK(r.length >= 1 && r.length <= file_size - r.offset);
      // "bytes FIRST-LAST/SIZE" naming exactly those bytes.
      FUZZ_CHECK(content_range.starts_with("bytes "));
      const std::string_view spec = std::string_view(content_range).substr(6);
      const std::size_t dash = spec.find('-');
      const std::size_t slash = spec.find('/');
      FUZZ_CHECK(dash != std::string_view::npos && slash != std::string_view::npos && dash < slash);
      FUZZ_CHECK(read_number(spec.substr(0, dash)) == r.offset);
      FUZZ_CHECK(read_number(spec.substr(dash + 1, slash - dash - 1)) == r.offset + r.length - 1);
      FUZZ_CHECK(read_number(spec.substr(slash + 1)) == file_size);
      break;
    }
    case ByteRange::Kind::unsatisfiable: FUZZ_CHECK(content_range == "bytes */" + std::to_string(file_size)); break;
    case ByteRange::Kind::whole: break;
  }

  // Spaces and tabs around the value are not part of it (RFC 9110 §5.5).
  const std::string padded = " \t" + std::string(header) + "\t ";
  const ByteRange p = parse_byte_range(padded, file_size);
  FUZZ_CHECK(p.kind == r.kind && p.offset == r.offset && p.length == r.length);
  return 0;
}
