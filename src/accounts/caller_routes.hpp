#pragma once
// Route handlers that are given their caller, resolved where that costs the API's io thread
// nothing. Resolving a caller the daemon has in memory costs memory only; any other means SQL,
// and for a new user making and mounting a volume (mkfs, a loop device, an fsck after a crash):
// tens of milliseconds to seconds, during which the io thread would serve nobody. So:
//
//   the caller is ready (AccountDirectory::ready)  the handler runs at once, on the calling
//                                                   thread (the io thread), as before
//   it is not                                       the request waits in the directory's pool
//                                                   (fair per account: util/fair_pool.hpp), where
//                                                   the caller is resolved; the handler runs there
//
// A new user's first request waits for its own volume; nobody else's does. An error resolving
// (a 400 naming no user, the admission's 503/421/409, a volume that cannot be made) is the
// request's answer, as it was when handlers resolved their caller in their first line.
//
// Handlers run on the io thread or on a pool thread: they must be safe on any thread (the
// rooms they call, exec's table, boxes and terminals, are).
#include <exception>
#include <functional>
#include <memory>
#include <optional>

#include "accounts/directory.hpp"
#include "http/request.hpp"
#include "http/response.hpp"
#include "http/router.hpp"

namespace agentbox::http {
class ResponseWriter;
}

namespace agentbox::accounts {

using CallerHandler = std::function<http::Response(const http::Request&, const Caller&)>;
using CallerAsyncHandler =
    std::function<void(const http::Request&, const Caller&, std::shared_ptr<http::ResponseWriter>)>;

// The route's handler, given the caller of each request (user_id_of with query_user_allowed).
// A route that only reads says HomeUse::read: its callers with no volume get none made.
http::AsyncHandler with_caller(AccountDirectory& callers, CallerHandler handler, bool query_user_allowed = false,
                               HomeUse use = HomeUse::write);
http::AsyncHandler with_caller(AccountDirectory& callers, CallerAsyncHandler handler, bool query_user_allowed = false,
                               HomeUse use = HomeUse::write);
// with_caller for a route that only reads (HomeUse::read): its callers with no volume get none.
template <class Handler>
http::AsyncHandler with_reader(AccountDirectory& callers, Handler handler) {
  return with_caller(callers, std::move(handler), false, HomeUse::read);
}

// A caller resolved, or what resolving it threw.
struct Resolved {
  std::optional<Caller> caller;
  std::exception_ptr error;
  // The caller, or the error rethrown.
  const Caller& get() const;
};

// For handlers that own their connection (takeovers, WebSockets) and so cannot wait in a
// route: resolves req's caller and calls done with it, at once on this thread when it is ready,
// else later on a pool thread (done then moves back to its connection's own executor). Only the
// request's head is read (its fields, query and scope). done must not throw.
void resolve_caller(AccountDirectory& callers, const http::Request& req, bool query_user_allowed, HomeUse use,
                    std::function<void(Resolved)> done);

}  // namespace agentbox::accounts
