#pragma once
// One error type for every failed system step: it carries errno, the operation and its
// operands ("mount(/usr, /newroot/usr): Operation not permitted"), and gains context on the
// way up with wrap(). Thrown, never returned as a bare -1.
#include <cerrno>
#include <stdexcept>
#include <string>
#include <string_view>

namespace agentbox {

class Error : public std::runtime_error {
 public:
  // A failure that is not a syscall's (bad input, protocol violation): errno is 0.
  explicit Error(std::string message, int err = 0) : std::runtime_error(std::move(message)), errno_(err) {}

  int code() const noexcept { return errno_; }

  // The same error with "context: " in front, errno kept.
  Error wrap(std::string_view context) const { return Error(std::string(context) + ": " + what(), errno_); }

 private:
  int errno_;
};

// Bad input from the person at the command line or in a config file: a one-line message and
// exit status 2 (the CLI's entry points catch it). An Error (errno 0), so a handler of Error sees
// it too: one that turns Errors into UsageErrors with context rethrows it first as it is.
struct UsageError : Error {
  explicit UsageError(std::string message) : Error(std::move(message)) {}
};

// Builds "op: strerror(err)" and keeps err.
Error sys_error(std::string_view op, int err = errno);

// Throws sys_error(op) when rc is -1; returns rc otherwise. For syscalls that set errno.
inline long check(long rc, std::string_view op) {
  if (rc == -1) throw sys_error(op);
  return rc;
}

}  // namespace agentbox
