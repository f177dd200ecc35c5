#pragma once
// Unguessable ids and secrets: `bytes` bytes of the kernel's CSPRNG as 2 × bytes lower-case hex
// digits. getrandom without flags blocks only until the pool is seeded at boot.
#include <cstddef>
#include <string>

namespace agentbox {

std::string random_hex(size_t bytes);

}  // namespace agentbox
