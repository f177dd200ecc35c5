#pragma once
// What a file route does when the caller's volume is full (FsErrorKind::insufficient_storage):
// the oldest trash items make room and the operation is tried once more; if it still does not
// fit, 507 with a detail that says the quota and the usage ("Disk quota exceeded: ... (your
// quota: 1G and 1000000 files; in use: 1023.9M and 1204 files, ...)").
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "accounts/directory.hpp"
#include "fs/fs_error.hpp"
#include "http/request.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

// Deletes the caller's oldest trash items until `wanted` bytes are free or the trash is
// empty; true when something was deleted.
bool make_room_from_trash(accounts::AccountDirectory& callers, const accounts::Caller& caller, uint64_t wanted);

// The FsError again, its detail completed with the caller's quota and usage.
[[noreturn]] void throw_storage_full(accounts::AccountDirectory& callers, const accounts::Caller& caller,
                                     const FsError& e);

// A spooled body is read from its file's offset: back to the start for another try.
inline void rewind_body(const Request& req) {
  if (req.body_file) ::lseek(req.body_file.get(), 0, SEEK_SET);
}

// Runs fn(); on a full volume, makes room from the trash and runs it again once (a spooled body
// is rewound first), then throws as throw_storage_full.
template <class Fn>
auto with_room(accounts::AccountDirectory& callers, const Request& req, Fn&& fn) -> decltype(fn()) {
  for (int attempt = 0;; ++attempt) {
    try {
      return fn();
    } catch (const FsError& e) {
      if (e.kind() != FsErrorKind::insufficient_storage) throw;
      const accounts::Caller caller = callers.resolve(req);
      const uint64_t wanted = std::max<uint64_t>(req.body_size, 1 << 20);
      if (attempt == 0 && make_room_from_trash(callers, caller, wanted)) {
        rewind_body(req);
        continue;
      }
      throw_storage_full(callers, caller, e);
    }
  }
}

}  // namespace agentbox::api
