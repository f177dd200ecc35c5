#include "util/unhandled.hpp"

#include <cstdio>
#include <string>

namespace agentbox {

void report_unhandled(std::string_view where, std::exception_ptr error) noexcept {
  std::string what = "an exception of unknown type";
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  // One write, so lines of two threads never interleave.
  std::fprintf(stderr, "agentbox: %.*s: unhandled exception: %s\n", static_cast<int>(where.size()), where.data(),
               what.c_str());
}

}  // namespace agentbox
