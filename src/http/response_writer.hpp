#pragma once
// The handle an AsyncHandler completes its response through, later and from any thread. Every
// call posts onto the session's strand, so no thread blocks while a long-poll waits.
//
// One of: send() | fail() | send_file() | begin_chunked() write_chunk()* end_chunked().
// Calls out of that order return false and do nothing. A writer dropped before completing
// answers 500 (or, mid-stream, cuts the connection so the client sees a truncated body).
// Once the client is gone every call returns false; on_close() tells the handler so it can
// stop waiting or producing.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "http/error.hpp"
#include "http/response.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::http {

class AnySession;

class ResponseWriter {
 public:
  // errors: the route table's (Router::error_map), for fail().
  ResponseWriter(std::weak_ptr<AnySession> session, std::string context, ErrorMap errors = &response_for_exception);
  ~ResponseWriter();
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  // A whole response.
  bool send(Response response);
  // The response for an exception, mapped as a synchronous handler's would be.
  bool fail(std::exception_ptr error);
  // Status and headers of head, then a body of exactly length bytes read from fd at offset
  // (pread, in pieces). head.body is ignored. Content-Type should be set in head.
  bool send_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length);
  // Status and headers of head with Transfer-Encoding: chunked; head.body is ignored.
  bool begin_chunked(Response head);
  // One chunk (empty data is skipped: an empty chunk would end the body).
  bool write_chunk(std::string data);
  bool end_chunked();

  // False once the connection is gone or the response is complete.
  bool is_open() const;
  // cb runs once, on the session's strand, if the connection ends before the response is
  // complete (client left, write failed, server forced shutdown). Runs at once if already so.
  void on_close(std::function<void()> cb);

  // Called by the session (on its strand) when the connection is gone.
  void notify_closed();

 private:
  enum class State { fresh, streaming, done };
  // Moves from `from` to `to` when the state is `from` and the connection open.
  bool advance(State from, State to);

  std::weak_ptr<AnySession> session_;
  std::string context_;  // "GET /path" for logs
  ErrorMap errors_;
  mutable std::mutex mu_;
  State state_ = State::fresh;
  bool closed_ = false;
  bool aborted_ = false;  // closed before the handler completed
  std::function<void()> on_close_;
};

}  // namespace agentbox::http
