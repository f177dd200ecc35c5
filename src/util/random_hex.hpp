#pragma once
// Hex text. Unguessable ids and secrets: `bytes` bytes of the kernel's CSPRNG as 2 × bytes lower-case hex
// digits. getrandom without flags blocks only until the pool is seeded at boot.
#include <cstddef>
#include <string>

namespace agentbox {

std::string random_hex(size_t bytes);

// size bytes at data as 2 × size lower-case hex digits (digests, MACs).
std::string hex_of(const void* data, size_t size);

}  // namespace agentbox
