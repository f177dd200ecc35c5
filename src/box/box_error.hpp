#pragma once
// Why an account's box cannot serve a request now, as opposed to the request being wrong: its
// start failed or took too long, it stopped under the request, or the host runs as many boxes
// (or holds as many ptys) as it may. The server answers 503 with Retry-After when retry_after
// is set. BoxLimitReached: the box itself holds all it may of something (its ptys); the server
// answers 429, and the message names the limit.
#include <string>

#include "util/error.hpp"

namespace agentbox {

class BoxUnavailable : public Error {
 public:
  explicit BoxUnavailable(std::string message, int retry_after_seconds = 0)
      : Error(std::move(message), EAGAIN), retry_after_(retry_after_seconds) {}
  int retry_after() const noexcept { return retry_after_; }  // seconds; 0: do not say

 private:
  int retry_after_;
};

class BoxLimitReached : public Error {
 public:
  explicit BoxLimitReached(std::string message) : Error(std::move(message), EAGAIN) {}
};

}  // namespace agentbox
