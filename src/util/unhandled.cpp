#include "util/unhandled.hpp"

#include <string>

#include "util/log.hpp"

namespace agentbox {

void report_unhandled(std::string_view where, std::exception_ptr error) noexcept {
  std::string message;
  std::string_view what = "an exception of unknown type";
  try {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();  // copied: the object caught may be a copy that dies with this handler
      what = message;
    }
  } catch (...) {  // not a std::exception, or no memory to copy its message
  }
  log::error(where, "unhandled exception: {}", what);  // never throws, whatever the sink does
}

}  // namespace agentbox
