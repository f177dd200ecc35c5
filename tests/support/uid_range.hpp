#pragma once
// A uid range for a daemon a C++ test starts: a running `agentbox serve` holds its range
// exclusively (box/uid_range_guard.hpp), and tests run beside each other and beside the e2e
// suite. Ranges of 65536 uids from 2,000,000 on; the e2e harness (tests/e2e/conftest.py) takes
// slots 0-8191, C++ tests 8192-12287, bench/lib.sh 12288-16383. A start refused with
// kUidRangeInUse tries the next attempt.
#include <unistd.h>

#include <cstdint>

namespace agentbox::testing {

constexpr const char* kUidRangeInUse = "overlaps that of another agentbox serve";

inline uint64_t test_uid_base(int attempt) {
  const uint64_t slot = 8192 + (static_cast<uint64_t>(::getpid()) * 7919 + static_cast<uint64_t>(attempt)) % 4096;
  return 2000000 + slot * 65536;
}

}  // namespace agentbox::testing
