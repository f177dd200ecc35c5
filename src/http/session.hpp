#pragma once
// One HTTP/1.1 connection of the API: owns its socket, read buffer, parser, deadline timer and
// output queue, runs on its own strand and stays alive through shared_from_this. The request
// cycle reads as do_x/on_x pairs:
//
//   wait_request → read_header → (route, auth, CORS, limits) → [send_continue] → read_body
//     → dispatch → write … → response_complete → wait_request (keep-alive) | linger | close
//
// Limits are applied where the bytes are read: header size and deadline (431, 408), body size
// (413, before reading it when Content-Length says so), body silence (408), idle keep-alive,
// write deadline. Rejections before the body was read close the connection after draining
// the client's pending input for a moment (linger), so the client sees the answer, not a reset.
//
// A Session runs on a Stream: the server's is a TCP socket (HttpSession); the tests' is Beast's
// in-memory test::stream (tests/unit/http_session_test.cpp), which injects a failure at each
// step. What differs between them is session_stream.hpp; the definitions are session_impl.hpp,
// compiled for the socket in session_tcp.cpp.
//
// Runs on: its strand (the socket's executor), every do_x/on_x; the post_* calls and
// begin_shutdown/force_close/evict come from any thread and post onto it.
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "http/request.hpp"
#include "http/request_body.hpp"
#include "http/response.hpp"
#include "http/server_context.hpp"
#include "http/session_stream.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::beast::error_code;

class ResponseWriter;

// What the server (shutdown: session_registry.hpp) and an async handler's ResponseWriter hold
// of a session, whatever its stream. Each call posts onto the session's strand.
class AnySession {
 public:
  virtual ~AnySession() = default;
  // Graceful: an idle connection closes now, a busy one after its current response.
  virtual void begin_shutdown() = 0;
  // After the grace period: closes whatever state the connection is in.
  virtual void force_close() = 0;

  // From ResponseWriter.
  virtual void post_send(Response response) = 0;
  virtual void post_chunked_head(Response head) = 0;
  virtual void post_chunk(std::string data) = 0;
  virtual void post_chunked_end() = 0;
  virtual void post_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) = 0;
  virtual void post_abort() = 0;
};

template <class Stream>
class Session final : public AnySession, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // stream's executor must be a strand of its own; slot: its place in ctx->connections.
  Session(Stream stream, std::shared_ptr<ServerContext> ctx, std::string listener_tag, ConnectionSlot slot = {});
  ~Session() override;

  void start();
  void begin_shutdown() override;
  void force_close() override;
  // Its place went to a new connection: closes now if it waits for a request, else after the
  // response in progress.
  void evict();

  void post_send(Response response) override;
  void post_chunked_head(Response head) override;
  void post_chunk(std::string data) override;
  void post_chunked_end() override;
  void post_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) override;
  void post_abort() override;

 private:
  using Io = SessionStream<Stream>;
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kIoBufferSize = 64 * 1024;  // lingering reads; file pieces without sendfile
  using std::enable_shared_from_this<Session>::shared_from_this;
  using std::enable_shared_from_this<Session>::weak_from_this;

  enum class State { waiting, reading_header, reading_body, handling, lingering, closed };
  enum class Timeout { none, idle, header, body, write, linger };

  // Output: one response is a Full job, or a Head job followed by chunks or a file.
  struct FullJob {
    http::response<http::string_body> msg;
  };
  struct HeadJob {
    http::response<http::empty_body> msg;
  };
  struct ChunkJob {
    std::string data;
  };
  struct LastChunkJob {};
  struct FileJob {
    UniqueFd fd;
    std::uint64_t offset;
    std::uint64_t remaining;
  };
  using OutJob = std::variant<FullJob, HeadJob, ChunkJob, LastChunkJob, FileJob>;

  // The request cycle.
  void do_wait_request();
  void on_wait_request(error_code ec, std::size_t n);
  void do_read_header();
  void on_read_header(error_code ec);
  void route_request();
  void do_send_continue();
  void on_send_continue(error_code ec);
  void do_read_body();
  void on_read_body(error_code ec);
  void dispatch();
  void dispatch_async(const AsyncHandler& handler);
  void hand_over(const TakeoverHandler& handler, bool key_accepted);

  // Responses.
  void respond(Response response);
  // A response before the body was read: the connection closes after it.
  void respond_early(Response response);
  // A response to input that never became a request (bad syntax, header limit or deadline).
  void reject(http::status status, std::string_view detail);
  template <class Body>
  http::response<Body> make_message(Response& response);
  void enqueue(OutJob job);
  void do_write();
  void do_write_file_piece();
  void on_write(error_code ec, std::size_t n);
  void on_response_complete();

  // Async handlers: notice a client that leaves while nothing is being written.
  void do_watch_disconnect();
  void on_watch_disconnect(error_code ec, std::uint64_t request_seq);

  // Closing.
  void do_linger();
  void on_linger(error_code ec, std::size_t n);
  void do_close();

  // The one deadline timer: arm before an operation, disarm in its handler.
  void arm(Timeout kind, std::chrono::steady_clock::time_point deadline);
  void disarm();
  void on_timer(std::uint64_t generation);

  std::string context() const;  // "GET /path" for logs

  // Destroyed in reverse: the socket and timer first, then the registration (so shutdown, which
  // waits for the registry to empty, never sees them alive), the server's context last.
  std::shared_ptr<ServerContext> ctx_;
  SessionRegistration registration_;
  Stream socket_;
  const asio::any_io_executor strand_;
  asio::steady_timer timer_;
  ConnectionSlot slot_;  // idle while a request is awaited; goes to a takeover with the socket
  const std::string listener_tag_;
  std::string remote_;
  std::string local_;  // Request::local_address
  const std::chrono::steady_clock::time_point accepted_at_;

  State state_ = State::waiting;
  Timeout timer_kind_ = Timeout::none;
  Timeout timed_out_ = Timeout::none;
  std::uint64_t timer_generation_ = 0;
  bool first_request_ = true;
  bool evicted_ = false;  // closes after the response in progress

  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> header_parser_;
  std::optional<http::request_parser<RequestBody>> body_parser_;

  // The current request.
  std::uint64_t request_seq_ = 0;
  Request request_;
  const Route* route_ = nullptr;
  CompletedRequest::Credential credential_ = CompletedRequest::Credential::nothing;  // for on_request
  bool refused_credential_ = false;
  std::string method_ = "-";
  unsigned version_ = 11;
  bool request_keep_alive_ = false;
  std::chrono::steady_clock::time_point started_{};

  // The current response.
  bool response_started_ = false;
  bool keep_alive_ = false;
  bool close_after_ = false;  // input left unread: close after this response
  bool chunked_ = false;      // streamed body with chunked framing (HTTP/1.1)
  unsigned status_ = 0;
  std::uint64_t body_bytes_ = 0;
  std::deque<OutJob> out_;
  std::size_t queued_chunk_bytes_ = 0;
  std::optional<OutJob> current_;
  std::optional<http::response_serializer<http::empty_body>> head_serializer_;
  bool writing_ = false;
  std::vector<char> io_buffer_;  // lingering reads; file bodies on a stream without sendfile

  // An async handler's response in progress: the session keeps itself alive until it is done.
  bool async_pending_ = false;
  std::shared_ptr<Session> hold_;
  std::weak_ptr<ResponseWriter> writer_;

  std::uint64_t linger_bytes_ = 0;
};

// The server's.
using HttpSession = Session<tcp::socket>;
extern template class Session<tcp::socket>;

}  // namespace agentbox::http
