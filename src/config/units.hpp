#pragma once
// Human-written quantities in config files and flags: sizes ("512M", "1.5G"), CPU shares
// ("1.5", "500m") and plain counts. Every parser throws agentbox::Error naming the bad value:
// `invalid size "12Q": unknown unit "Q" (use K, M, G or T)`.
#include <cstdint>
#include <string>
#include <string_view>

namespace agentbox {

// Bytes from "123", "100k", "512M", "1.5G", "2GiB", "2GB", "1T". Units are case-insensitive
// powers of 1024 with an optional "i", "iB" or "B" after them ("B" alone means bytes).
// A fraction needs a unit and is rounded down to whole bytes.
uint64_t parse_size(std::string_view text);

// Millicores from "2" (2000), "1.5" (1500), "0.25" (250) or "500m" (500). Zero is refused:
// a box with no CPU cannot run anything.
uint32_t parse_cpu(std::string_view text);

// A non-negative integer ("512").
uint64_t parse_count(std::string_view text);

// Two box limits with bounds of their own (Limits in box/box_spec.hpp); each throws Error.
// ptys: 1 to 1048576, what devpts takes as max=. tcp_memory: 0 (no separate bound) or at least
// 1M, below which a box's TCP would crawl from its first few connections.
uint32_t checked_ptys(uint64_t count);
uint64_t checked_tcp_memory(uint64_t bytes);

// Short form for messages: "123B", "512M", "1.5G" (one decimal, rounded down).
std::string format_size(uint64_t bytes);

}  // namespace agentbox
