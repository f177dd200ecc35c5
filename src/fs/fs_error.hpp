#pragma once
// The error every file operation throws for a problem the caller caused or can act on. Its kind
// says which HTTP status the server answers with (bad_request 400, forbidden 403, not_found 404,
// conflict 409, too_large 413, unsupported_media 415, insufficient_storage 507); the message becomes {"detail": ...} as
// is, so it names the path only as the box sees it, never a host path. Anything else is thrown as a plain
// agentbox::Error and becomes a 500 that reveals nothing.
#include <cerrno>
#include <string>
#include <string_view>

#include "util/error.hpp"

namespace agentbox {

enum class FsErrorKind {
  bad_request,
  forbidden,
  not_found,
  conflict,
  unsupported_media,
  too_large,
  insufficient_storage  // the account's volume is full (ENOSPC, EDQUOT): 507
};

class FsError : public Error {
 public:
  FsError(FsErrorKind kind, std::string message, int err = 0) : Error(std::move(message), err), kind_(kind) {}
  FsErrorKind kind() const noexcept { return kind_; }

 private:
  FsErrorKind kind_;
};

// Throws the FsError for a failed syscall on `shown` (a path as the box sees it), e.g. ENOENT →
// not_found "No such file or directory: /home/alice/x". errnos that say nothing about the
// request (EIO, ENOMEM, EBADF ...) are thrown as a plain Error instead, so they surface as 500.
[[noreturn]] void throw_fs_errno(int err, std::string_view shown);

// Calls throw_fs_errno(errno, shown) when rc is -1; returns rc otherwise.
inline long fs_check(long rc, std::string_view shown) {
  if (rc == -1) throw_fs_errno(errno, shown);
  return rc;
}

// Runs fn(); an FsError not_found from it is thrown again as `kind` with the text Open Terminal
// answers in that place ("File not found: /home/alice/x"). Other errors pass unchanged.
template <class Fn>
auto when_missing(FsErrorKind kind, std::string_view text, std::string_view shown, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const FsError& e) {
    if (e.kind() != FsErrorKind::not_found) throw;
    throw FsError(kind, std::string(text) + ": " + std::string(shown), e.code());
  }
}

}  // namespace agentbox
