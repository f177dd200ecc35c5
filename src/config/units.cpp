#include "config/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <limits>

#include "util/error.hpp"

namespace agentbox {
namespace {

struct Unit {
  char letter;  // lower case
  uint64_t bytes;
};
constexpr std::array<Unit, 4> kSizeUnits = {{
    {'k', 1ull << 10},
    {'m', 1ull << 20},
    {'g', 1ull << 30},
    {'t', 1ull << 40},
}};

[[noreturn]] void invalid(std::string_view kind, std::string_view text, std::string_view why) {
  std::string msg = "invalid ";
  msg += kind;
  msg += " \"";
  msg += text;
  msg += "\": ";
  msg += why;
  throw Error(std::move(msg));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A non-negative decimal "12" or "1.25" at the front of text; `rest` is what follows it.
// The fraction is frac / scale, keeping at most 18 digits (finer digits cannot change a
// result that is rounded down to bytes or millicores).
struct Decimal {
  uint64_t whole = 0;
  uint64_t frac = 0;
  uint64_t scale = 1;
  bool has_fraction = false;
  std::string_view rest;
};

Decimal parse_decimal(std::string_view kind, std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) invalid(kind, text, "empty value");
  if (s.front() == '-') invalid(kind, text, "must not be negative");
  Decimal d;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, d.whole);
  if (ec == std::errc::result_out_of_range) invalid(kind, text, "too large");
  if (ec != std::errc()) invalid(kind, text, "not a number");
  if (p != end && *p == '.') {
    ++p;
    d.has_fraction = true;
    int digits = 0;
    while (p != end && std::isdigit(static_cast<unsigned char>(*p))) {
      if (digits < 18) {
        d.frac = d.frac * 10 + static_cast<uint64_t>(*p - '0');
        d.scale *= 10;
        ++digits;
      }
      ++p;
    }
    if (digits == 0) invalid(kind, text, "not a number");
  }
  d.rest = trim(std::string_view(p, static_cast<size_t>(end - p)));
  return d;
}

// whole * unit + frac * unit / scale, rounded down; above max is an error.
uint64_t scale_decimal(std::string_view kind, std::string_view text, const Decimal& d, uint64_t unit, uint64_t max) {
  unsigned __int128 v =
      static_cast<unsigned __int128>(d.whole) * unit + static_cast<unsigned __int128>(d.frac) * unit / d.scale;
  if (v > max) invalid(kind, text, "too large");
  return static_cast<uint64_t>(v);
}

}  // namespace

uint64_t parse_size(std::string_view text) {
  constexpr std::string_view kind = "size";
  Decimal d = parse_decimal(kind, text);
  std::string unit_text = lower(d.rest);
  uint64_t unit = 1;
  if (unit_text.empty() || unit_text == "b") {
    if (d.has_fraction) invalid(kind, text, "a fraction of a byte needs a unit (K, M, G or T)");
  } else {
    const Unit* found = nullptr;
    for (const Unit& u : kSizeUnits)
      if (unit_text.front() == u.letter) found = &u;
    std::string_view suffix = std::string_view(unit_text).substr(1);
    if (!found || !(suffix.empty() || suffix == "i" || suffix == "ib" || suffix == "b"))
      invalid(kind, text, "unknown unit \"" + std::string(d.rest) + "\" (use K, M, G or T)");
    unit = found->bytes;
  }
  return scale_decimal(kind, text, d, unit, std::numeric_limits<uint64_t>::max());
}

uint32_t parse_cpu(std::string_view text) {
  constexpr std::string_view kind = "cpu";
  Decimal d = parse_decimal(kind, text);
  uint64_t millicores = 0;
  if (d.rest.empty()) {
    millicores = scale_decimal(kind, text, d, 1000, std::numeric_limits<uint32_t>::max());
  } else if (d.rest == "m") {
    if (d.has_fraction) invalid(kind, text, "millicores must be a whole number");
    millicores = scale_decimal(kind, text, d, 1, std::numeric_limits<uint32_t>::max());
  } else {
    invalid(kind, text, "expected cores (\"1.5\") or millicores (\"500m\")");
  }
  if (millicores == 0) invalid(kind, text, "must be at least 1m (one thousandth of a core)");
  return static_cast<uint32_t>(millicores);
}

uint64_t parse_count(std::string_view text) {
  constexpr std::string_view kind = "count";
  Decimal d = parse_decimal(kind, text);
  if (d.has_fraction || !d.rest.empty()) invalid(kind, text, "expected a whole number");
  return d.whole;
}

uint32_t checked_ptys(uint64_t count) {
  constexpr uint64_t kMax = 1 << 20;  // NR_UNIX98_PTY_MAX
  if (count < 1 || count > kMax)
    throw Error("must be between 1 and " + std::to_string(kMax) + ", not " + std::to_string(count));
  return static_cast<uint32_t>(count);
}

uint64_t checked_tcp_memory(uint64_t bytes) {
  constexpr uint64_t kMin = 1ull << 20;
  if (bytes != 0 && bytes < kMin) throw Error("must be \"0\" (no separate bound) or at least \"1M\"");
  return bytes;
}

std::string format_size(uint64_t bytes) {
  if (bytes < kSizeUnits.front().bytes) return fmt::format("{}B", bytes);
  const Unit* unit = &kSizeUnits.front();
  for (const Unit& u : kSizeUnits)
    if (bytes >= u.bytes) unit = &u;
  uint64_t tenths = static_cast<uint64_t>(static_cast<unsigned __int128>(bytes) * 10 / unit->bytes);
  // fmt rather than string operator+: GCC 12 at -O3 reports a false -Wrestrict inside the latter.
  const char letter = static_cast<char>(std::toupper(static_cast<unsigned char>(unit->letter)));
  if (tenths % 10 == 0) return fmt::format("{}{}", tenths / 10, letter);
  return fmt::format("{}.{}{}", tenths / 10, tenths % 10, letter);
}

}  // namespace agentbox
