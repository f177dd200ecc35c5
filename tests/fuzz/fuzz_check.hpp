#pragma once
// What every fuzzer here shares: FUZZ_CHECK(cond), a property every input must keep. A failure
// prints the property and aborts, which libFuzzer reports as a crash, with the input that
// caused it saved for tests/fuzz/regressions/<name>/ (scripts/fuzz.sh says where).
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: property does not hold: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
