#include "util/error.hpp"

#include <cstring>

namespace agentbox {

Error sys_error(std::string_view op, int err) {
  std::string msg(op);
  msg += ": ";
  msg += std::strerror(err);
  return Error(std::move(msg), err);
}

}  // namespace agentbox
