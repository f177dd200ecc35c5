#pragma once
// A route handler called without a socket, as the session would call it after its own checks
// (key, CORS, body limits: those are the session's and are not repeated here). A synchronous
// handler is called at once, an exception it lets escape answered through the table's
// ErrorMap; an asynchronous one gets a ResponseWriter whose session is an InMemorySession,
// which collects what the writer posts (a whole response, a file's bytes, chunks) and hands the
// complete response on once. Used where one route drives another in memory (mcp/route_call: a
// tool call is the REST request it mirrors) and by the tests' RouteCaller.
//
// Runs on: route_in_memory and call_in_memory on the caller's thread; InMemorySession's post_*
// on whatever thread the handler answers from; `done` once, on the thread that completes the
// response (the caller's, before call_in_memory returns, for a synchronous handler).
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "http/request.hpp"
#include "http/response.hpp"
#include "http/response_writer.hpp"
#include "http/router.hpp"
#include "http/session.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::http {

struct InMemoryReply {
  Response response;     // status, headers, and the whole body: a sent one, a file's bytes, the chunks
  bool chunked = false;  // the body came as chunks (a stream)
  bool aborted = false;  // cut mid-stream, or the caller hung up: the body is what had arrived
};
using InMemoryDone = std::function<void(InMemoryReply)>;

// The session an in-memory ResponseWriter posts to.
class InMemorySession : public AnySession {
 public:
  explicit InMemorySession(InMemoryDone done) : done_(std::move(done)) {}

  void begin_shutdown() override {}
  void force_close() override {}
  void post_send(Response response) override;
  void post_chunked_head(Response head) override;
  void post_chunk(std::string data) override;
  void post_chunked_end() override;
  void post_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) override;
  void post_abort() override;

  // Ends the reply as it stands (aborted) unless it is complete; done runs now if it has not.
  void hang_up();

  // The writer's handle is weak: self keeps this alive until done has run. writer is told the
  // connection is gone once the response is complete, as a session tells it (which lets a
  // handler that still waits on it stop).
  void hold(std::shared_ptr<InMemorySession> self, std::weak_ptr<ResponseWriter> writer);

 private:
  void finish(bool aborted);

  std::mutex mu_;
  InMemoryReply reply_;
  InMemoryDone done_;
  std::shared_ptr<InMemorySession> self_;
  std::weak_ptr<ResponseWriter> writer_;
};

// The route req.target names for req.method; fills in req.path, req.query and
// req.path_params. nullptr (and why) where the session would refuse the request before any
// handler: an invalid target, no such route, another method.
const Route* route_in_memory(const Router& router, Request& req, std::string* why = nullptr);

// What the caller keeps of a call in progress.
struct InMemoryCall {
  std::weak_ptr<ResponseWriter> writer;  // empty for a synchronous handler
  std::weak_ptr<InMemorySession> session;
  // The caller gives up, as a client hanging up: the handler's on_close runs and done gets what
  // had arrived (aborted). Nothing happens once the response is complete.
  void hang_up() const;
};

// Calls route's handler with req (complete: path, query, path_params as route_in_memory fills
// them). context names the call in logs and errors ("GET /path"). A takeover route cannot be
// called without a connection: done gets a 404 at once.
InMemoryCall call_in_memory(const Router& router, const Route& route, const Request& req, const std::string& context,
                            InMemoryDone done);

}  // namespace agentbox::http
