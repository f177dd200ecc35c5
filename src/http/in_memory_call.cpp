#include "http/in_memory_call.hpp"

#include <unistd.h>

#include <cerrno>
#include <exception>
#include <utility>
#include <variant>

#include "http/error.hpp"

namespace agentbox::http {

void InMemorySession::post_send(Response response) {
  {
    std::lock_guard lock(mu_);
    reply_.response = std::move(response);
  }
  finish(false);
}

void InMemorySession::post_chunked_head(Response head) {
  std::lock_guard lock(mu_);
  reply_.response = std::move(head);
  reply_.response.body.clear();
  reply_.chunked = true;
}

void InMemorySession::post_chunk(std::string data) {
  std::lock_guard lock(mu_);
  reply_.response.body += data;
}

void InMemorySession::post_chunked_end() { finish(false); }

void InMemorySession::post_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) {
  std::string bytes(length, '\0');
  std::uint64_t got = 0;
  while (got < length) {
    ssize_t n = ::pread(fd.get(), bytes.data() + got, length - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::uint64_t>(n);
  }
  bytes.resize(got);  // a file that shrank: what it held (the caller sees the short body)
  {
    std::lock_guard lock(mu_);
    reply_.response = std::move(head);
    reply_.response.body = std::move(bytes);
  }
  finish(false);
}

void InMemorySession::post_abort() { finish(true); }

void InMemorySession::hang_up() { finish(true); }

void InMemorySession::hold(std::shared_ptr<InMemorySession> self, std::weak_ptr<ResponseWriter> writer) {
  std::lock_guard lock(mu_);
  if (!done_) return;  // already complete: nothing to hold
  self_ = std::move(self);
  writer_ = std::move(writer);
}

void InMemorySession::finish(bool aborted) {
  InMemoryDone done;
  InMemoryReply reply;
  std::shared_ptr<InMemorySession> self;  // released as this returns
  std::weak_ptr<ResponseWriter> writer;
  {
    std::lock_guard lock(mu_);
    if (!done_) return;
    done = std::move(done_);
    done_ = nullptr;
    reply_.aborted = aborted;
    reply = std::move(reply_);
    self = std::move(self_);
    writer = std::move(writer_);
  }
  // Outside the lock: the writer's own calls post here. Gone already when the writer's
  // destructor answered.
  if (auto w = writer.lock()) w->notify_closed();
  done(std::move(reply));
}

const Route* route_in_memory(const Router& router, Request& req, std::string* why) {
  auto target = parse_target(req.target);
  if (!target) {
    if (why) *why = "invalid target";
    return nullptr;
  }
  auto match = router.match(req.method, target->segments);
  if (match.kind != RouteMatch::Kind::found) {
    if (why) *why = match.kind == RouteMatch::Kind::method_not_allowed ? "method not allowed" : "no such route";
    return nullptr;
  }
  req.path = std::move(target->path);
  req.query = std::move(target->query);
  req.path_params = std::move(match.params);
  return match.route;
}

void InMemoryCall::hang_up() const {
  if (auto w = writer.lock()) w->notify_closed();
  if (auto s = session.lock()) s->hang_up();
}

InMemoryCall call_in_memory(const Router& router, const Route& route, const Request& req, const std::string& context,
                            InMemoryDone done) {
  if (const auto* sync = std::get_if<Handler>(&route.handler)) {
    Response response;
    try {
      response = (*sync)(req);
    } catch (...) {
      response = router.error_map()(std::current_exception(), context);
    }
    done(InMemoryReply{std::move(response)});
    return {};
  }
  if (const auto* async = std::get_if<AsyncHandler>(&route.handler)) {
    auto session = std::make_shared<InMemorySession>(std::move(done));
    auto writer = std::make_shared<ResponseWriter>(session, context, router.error_map());
    session->hold(session, writer);
    InMemoryCall call{writer, session};
    // Held through the call, as the session holds it: a handler that throws is answered through
    // it; one that drops it unanswered gets its 500 when this reference goes.
    try {
      (*async)(req, writer);
    } catch (...) {
      writer->fail(std::current_exception());
    }
    return call;
  }
  done(InMemoryReply{error_response(status::not_found, "Not callable without a connection: " + context)});
  return {};
}

}  // namespace agentbox::http
