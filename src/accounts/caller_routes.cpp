#include "accounts/caller_routes.hpp"

#include "http/offload.hpp"
#include "http/response_writer.hpp"
#include "util/fair_pool.hpp"

namespace agentbox::accounts {

namespace {

Resolved resolve_now(AccountDirectory& callers, const http::Request& req, bool query_user_allowed, HomeUse use) {
  Resolved r;
  try {
    r.caller = callers.resolve(req, query_user_allowed, use);
  } catch (...) {
    r.error = std::current_exception();
  }
  return r;
}

// The pool a request that is not ready waits in; null when it is ready (or there is no pool).
std::shared_ptr<FairPool> pool_for(AccountDirectory& callers, const http::Request& req, bool query_user_allowed) {
  std::shared_ptr<FairPool> pool = callers.pool();
  if (!pool || callers.ready(req, query_user_allowed)) return nullptr;
  return pool;
}

}  // namespace

const Caller& Resolved::get() const {
  if (error) std::rethrow_exception(error);
  return *caller;
}

http::AsyncHandler with_caller(AccountDirectory& callers, CallerHandler handler, bool query_user_allowed, HomeUse use) {
  return with_caller(callers,
                     CallerAsyncHandler([handler = std::move(handler)](const http::Request& req, const Caller& caller,
                                                                       std::shared_ptr<http::ResponseWriter> writer) {
                       writer->send(handler(req, caller));
                     }),
                     query_user_allowed, use);
}

http::AsyncHandler with_caller(AccountDirectory& callers, CallerAsyncHandler handler, bool query_user_allowed,
                               HomeUse use) {
  auto shared = std::make_shared<const CallerAsyncHandler>(std::move(handler));
  return [&callers, shared, query_user_allowed, use](const http::Request& req,
                                                     std::shared_ptr<http::ResponseWriter> writer) {
    std::shared_ptr<FairPool> pool = pool_for(callers, req, query_user_allowed);
    // Ready: an exception is answered by the session, as any handler's.
    if (!pool) return (*shared)(req, callers.resolve(req, query_user_allowed, use), std::move(writer));
    // The copy travels with the job: req is only valid during this call.
    auto owned = std::make_shared<http::Request>(http::copy_request(req));
    pool->post(user_id_of(req, query_user_allowed), [&callers, shared, owned, writer, query_user_allowed, use] {
      if (!writer->is_open()) return;  // the client left while the job waited
      try {
        (*shared)(*owned, callers.resolve(*owned, query_user_allowed, use), writer);
      } catch (...) {
        writer->fail(std::current_exception());
      }
    });
  };
}

void resolve_caller(AccountDirectory& callers, const http::Request& req, bool query_user_allowed, HomeUse use,
                    std::function<void(Resolved)> done) {
  std::shared_ptr<FairPool> pool = pool_for(callers, req, query_user_allowed);
  if (!pool) return done(resolve_now(callers, req, query_user_allowed, use));
  auto head = std::make_shared<http::Request>();
  head->headers = req.headers;
  head->query = req.query;
  head->scope = req.scope;  // the profile: which of the account's boxes
  pool->post(user_id_of(req, query_user_allowed), [&callers, head, query_user_allowed, use, done = std::move(done)] {
    done(resolve_now(callers, *head, query_user_allowed, use));
  });
}

}  // namespace agentbox::accounts
