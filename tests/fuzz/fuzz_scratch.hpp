#pragma once
// A scratch directory for the fuzzers that need real files, made once under $TMPDIR
// (scripts/fuzz.sh points it into its own scratch space) or /tmp, and removed at a normal exit.
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

inline const std::string& fuzz_scratch_dir(const char* what) {
  // Never destroyed: the exit handler below runs after static destructors would have.
  static const std::string* dir = [what] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/agentbox-fuzz-" + what + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    auto* made = new std::string(std::filesystem::canonical(tmpl).string());
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*dir, ignored);
    });
    return made;
  }();
  return *dir;
}
