#pragma once
// The definitions of Session<Stream> (session.hpp): the request cycle, responses, closing and
// deadlines. Included where a Session is instantiated: session_tcp.cpp for the server's TCP
// sessions, the in-memory session tests for Beast's test::stream.
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "http/authorize.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "http/session.hpp"
#include "http/session_responses.hpp"
#include "util/log.hpp"

namespace agentbox::http {

namespace session_detail {

inline constexpr std::size_t kReadChunk = 16 * 1024;  // first read of a request
inline constexpr std::uint64_t kMaxLingerBytes = 64ull * 1024 * 1024;
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// A spooled body that the account's volume has no room for (no inode for the file, no block).
inline constexpr std::string_view kBodyDoesNotFit =
    "Disk quota exceeded: the request body does not fit in your storage";

// The client went away or the operation was cancelled: nothing to answer.
inline bool is_disconnect(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor;
}

}  // namespace session_detail

using namespace session_detail;

template <class Stream>
Session<Stream>::Session(Stream socket, std::shared_ptr<ServerContext> ctx, std::string listener_tag,
                         ConnectionSlot slot)
    : ctx_(std::move(ctx)),
      registration_(ctx_->sessions, this),
      socket_(std::move(socket)),
      strand_(socket_.get_executor()),
      timer_(strand_),
      slot_(std::move(slot)),
      listener_tag_(std::move(listener_tag)),
      accepted_at_(Clock::now()),
      // The buffer only ever holds headers and read-ahead; bodies go to the body parser.
      buffer_(ctx_->options.header_limit + kReadChunk) {
  Io::prepare(socket_, remote_, local_);
}

template <class Stream>
Session<Stream>::~Session() = default;  // registration_ leaves the registry after the socket and timer

template <class Stream>
void Session<Stream>::start() {
  ctx_->sessions.add(this, weak_from_this());
  slot_.on_evict([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->evict();
  });
  asio::dispatch(strand_, [self = shared_from_this()] { self->do_wait_request(); });
}

template <class Stream>
void Session<Stream>::begin_shutdown() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ == State::waiting) self->do_close();
  });
}

template <class Stream>
void Session<Stream>::force_close() {
  asio::post(strand_, [self = shared_from_this()] { self->do_close(); });
}

template <class Stream>
void Session<Stream>::evict() {
  asio::post(strand_, [self = shared_from_this()] {
    self->evicted_ = true;
    if (self->state_ != State::waiting && self->state_ != State::reading_header) return;
    count(self->ctx_->counters.connections_evicted);
    self->do_close();
  });
}

// ---------------------------------------------------------------- request cycle

template <class Stream>
void Session<Stream>::do_wait_request() {
  if (ctx_->stopping.load()) return do_close();
  state_ = State::waiting;
  close_after_ = false;
  if (evicted_) return do_close();
  // Idle (a new connection has been since accept): its place may go to a new connection.
  if (!first_request_) slot_.idle();
  if (buffer_.size() > 0) return do_read_header();
  // A new connection gets header_timeout from accept for all of its header; a kept-alive one
  // may stay idle for idle_timeout, and its header deadline starts at the first byte.
  if (first_request_)
    arm(Timeout::header, accepted_at_ + ctx_->options.header_timeout);
  else
    arm(Timeout::idle, Clock::now() + ctx_->options.idle_timeout);
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](error_code ec, std::size_t n) { self->on_wait_request(ec, n); });
}

template <class Stream>
void Session<Stream>::on_wait_request(error_code ec, std::size_t n) {
  if (state_ == State::closed) return;
  if (ec) {
    if (timed_out_ == Timeout::header) count(ctx_->counters.header_timeouts);
    if (timed_out_ == Timeout::idle) count(ctx_->counters.idle_timeouts);
    return do_close();
  }
  buffer_.commit(n);
  do_read_header();
}

template <class Stream>
void Session<Stream>::do_read_header() {
  state_ = State::reading_header;
  header_parser_.emplace();
  header_parser_->header_limit(ctx_->options.header_limit);
  header_parser_->body_limit(boost::none);  // the route's limit is applied once it is known
  arm(Timeout::header,
      first_request_ ? accepted_at_ + ctx_->options.header_timeout : Clock::now() + ctx_->options.header_timeout);
  http::async_read_header(socket_, buffer_, *header_parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) { self->on_read_header(ec); });
}

template <class Stream>
void Session<Stream>::on_read_header(error_code ec) {
  if (state_ == State::closed) return;
  disarm();
  if (ec) {
    if (timed_out_ == Timeout::header) {
      count(ctx_->counters.header_timeouts);
      return reject(http::status::request_timeout, "Request header timeout");
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      count(ctx_->counters.header_too_large);
      return reject(http::status::request_header_fields_too_large, "Request header fields too large");
    }
    if (is_disconnect(ec)) return do_close();
    count(ctx_->counters.bad_requests);
    return reject(http::status::bad_request, "Malformed HTTP request: " + ec.message());
  }
  first_request_ = false;
  slot_.busy();
  ++request_seq_;
  count(ctx_->counters.requests);
  started_ = Clock::now();
  route_request();
}

template <class Stream>
void Session<Stream>::route_request() {
  auto& header = header_parser_->get();
  method_ = std::string(header.method_string());
  version_ = header.version();
  request_keep_alive_ = header.keep_alive();
  request_ = Request{};
  request_.method = header.method();
  request_.target = std::string(header.target());
  request_.headers = static_cast<const http::fields&>(header);
  request_.listener_tag = listener_tag_;
  request_.remote_address = remote_;
  request_.local_address = local_;
  request_.scope = ctx_->router.take_scope(request_.target);  // /p/{profile}/...: routed as /...
  const bool body_pending = !header_parser_->is_done();

  auto target = parse_target(request_.target);
  if (!target) {
    count(ctx_->counters.bad_requests);
    return respond_early(error_response(http::status::bad_request, "Invalid request target"));
  }
  request_.path = std::move(target->path);
  if (CorsPolicy::is_preflight(request_.headers, request_.method))
    return respond_early(ctx_->cors.preflight(request_.headers));

  auto match = ctx_->router.match(request_.method, target->segments);
  if (match.kind == RouteMatch::Kind::not_found) {
    count(ctx_->counters.not_found);
    return respond_early(error_response(http::status::not_found, "Not Found"));
  }
  if (match.kind == RouteMatch::Kind::method_not_allowed) {
    count(ctx_->counters.method_not_allowed);
    auto r = error_response(http::status::method_not_allowed, "Method Not Allowed");
    r.headers.set(http::field::allow, allow_header(match.allowed));
    return respond_early(std::move(r));
  }
  route_ = match.route;
  request_.query = std::move(target->query);
  AuthDecision auth = authorize(route_->options, request_, ctx_->credentials, std::time(nullptr));
  if (auth.authenticated()) slot_.authenticated();
  credential_ = static_cast<CompletedRequest::Credential>(auth.by);
  if (!auth.allowed()) {
    refused_credential_ = true;
    count(ctx_->counters.unauthorized);
    return respond_early(std::move(*auth.refusal));
  }
  if (auto refusal = ctx_->router.check_scope(request_, route_->options, auth.authenticated()))
    return respond_early(std::move(*refusal));
  request_.path_params = std::move(match.params);
  if (const auto* takeover = std::get_if<TakeoverHandler>(&route_->handler))
    return hand_over(*takeover, auth.key_accepted());
  if (!body_pending) return dispatch();

  const std::uint64_t limit = route_->options.body_limit.value_or(ctx_->options.body_limit);
  if (auto length = header_parser_->content_length(); length && *length > limit) {
    count(ctx_->counters.body_too_large);
    return respond_early(error_response(http::status::payload_too_large,
                                        "Request body too large (limit " + std::to_string(limit) + " bytes)"));
  }
  const bool expects_continue = boost::beast::iequals(request_.header("Expect").value_or(""), "100-continue");
  body_parser_.emplace(std::move(*header_parser_));
  header_parser_.reset();
  body_parser_->body_limit(limit);  // chunked bodies have no length to check up front
  if (route_->options.spool_body) {
    std::string dir = ctx_->options.spool_dir;
    if (ctx_->options.spool_dir_for) {
      try {
        dir = ctx_->options.spool_dir_for(request_);
      } catch (...) {
        return respond_early(ctx_->router.error_map()(std::current_exception(), context()));
      }
    }
    UniqueFd file(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!file && (errno == ENOSPC || errno == EDQUOT)) {
      // The account's volume has no inode left (or no block) for the spool file: its quota, as
      // when a write of the body fails below, not the server.
      return respond_early(error_response(http::status::insufficient_storage, kBodyDoesNotFit));
    }
    if (!file) {
      log::error("http", "{}: open(O_TMPFILE in {}): {}", context(), dir, std::strerror(errno));
      return respond_early(error_response(http::status::internal_server_error, "Internal Server Error"));
    }
    body_parser_->get().body().file = std::move(file);
  }
  if (expects_continue) return do_send_continue();
  do_read_body();
}

template <class Stream>
void Session<Stream>::do_send_continue() {
  state_ = State::reading_body;
  arm(Timeout::write, Clock::now() + ctx_->options.write_timeout);
  asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                    [self = shared_from_this()](error_code ec, std::size_t) { self->on_send_continue(ec); });
}

template <class Stream>
void Session<Stream>::on_send_continue(error_code ec) {
  if (state_ == State::closed) return;
  disarm();
  if (ec) {
    if (timed_out_ == Timeout::write) count(ctx_->counters.write_timeouts);
    return do_close();
  }
  do_read_body();
}

template <class Stream>
void Session<Stream>::do_read_body() {
  state_ = State::reading_body;
  // A deadline per read, not per body: a large upload may take long, but may not stall.
  arm(Timeout::body, Clock::now() + ctx_->options.body_timeout);
  http::async_read_some(socket_, buffer_, *body_parser_,
                        [self = shared_from_this()](error_code ec, std::size_t) { self->on_read_body(ec); });
}

template <class Stream>
void Session<Stream>::on_read_body(error_code ec) {
  if (state_ == State::closed) return;
  disarm();
  if (ec) {
    if (timed_out_ == Timeout::body) {
      count(ctx_->counters.body_timeouts);
      return respond_early(error_response(http::status::request_timeout, "Request body timeout"));
    }
    if (ec == http::error::body_limit) {
      count(ctx_->counters.body_too_large);
      const auto limit = route_->options.body_limit.value_or(ctx_->options.body_limit);
      return respond_early(error_response(http::status::payload_too_large,
                                          "Request body too large (limit " + std::to_string(limit) + " bytes)"));
    }
    if (int err = body_parser_->get().body().write_errno) {
      // The account's volume is full: its quota, not the server, stopped the upload.
      if (err == ENOSPC || err == EDQUOT)
        return respond_early(error_response(http::status::insufficient_storage, kBodyDoesNotFit));
      log::error("http", "{}: writing request body to spool file: {}", context(), std::strerror(err));
      return respond_early(error_response(http::status::internal_server_error, "Internal Server Error"));
    }
    if (is_disconnect(ec)) return do_close();
    count(ctx_->counters.bad_requests);
    return respond_early(error_response(http::status::bad_request, "Malformed request body: " + ec.message()));
  }
  if (!body_parser_->is_done()) return do_read_body();

  auto& body = body_parser_->get().body();
  request_.body = std::move(body.memory);
  request_.body_size = body.size;
  if (body.file) {
    ::lseek(body.file.get(), 0, SEEK_SET);
    request_.body_file = std::move(body.file);
  }
  body_parser_.reset();
  dispatch();
}

template <class Stream>
void Session<Stream>::dispatch() {
  state_ = State::handling;
  header_parser_.reset();
  if (const auto* async = std::get_if<AsyncHandler>(&route_->handler)) return dispatch_async(*async);
  Response response;
  try {
    response = std::get<Handler>(route_->handler)(request_);
  } catch (...) {
    response = ctx_->router.error_map()(std::current_exception(), context());
  }
  respond(std::move(response));
}

// The connection leaves HTTP request-response: its socket, the parsed head and what was read past
// it go to the handler, which serves it from here on. This session is done.
template <class Stream>
void Session<Stream>::hand_over(const TakeoverHandler& handler, bool key_accepted) {
  if constexpr (!Io::can_take_over) {  // a Takeover holds a TCP socket
    log::error("http", "{}: a takeover route needs a TCP connection", context());
    return respond_early(error_response(http::status::internal_server_error, "Internal Server Error"));
  } else {
    disarm();
    state_ = State::closed;
    log::info("http", "{} \"{}\" taken over by its handler", remote_, context());
    slot_.on_evict(nullptr);  // busy from here on; a handler that waits may set its own
    const size_t index = static_cast<size_t>(route_ - ctx_->router.routes().data());
    TakeoverReport report(ctx_->options.on_request, index, method_, credential_, request_, started_);
    Takeover t{std::move(request_), std::make_unique<Takeover::Parser>(std::move(*header_parser_)),
               std::move(socket_),  std::move(buffer_),
               key_accepted,        std::move(slot_),
               std::move(report)};
    header_parser_.reset();
    auto keep = std::move(hold_);
    try {
      handler(std::move(t));
    } catch (const std::exception& e) {
      log::error("http", "{}: takeover handler failed: {}", context(), e.what());
    }
  }
}

template <class Stream>
void Session<Stream>::dispatch_async(const AsyncHandler& handler) {
  std::weak_ptr<AnySession> session = weak_from_this();
  auto writer = std::make_shared<ResponseWriter>(std::move(session), context(), ctx_->router.error_map());
  writer_ = writer;
  hold_ = shared_from_this();
  async_pending_ = true;
  do_watch_disconnect();
  try {
    handler(request_, writer);
  } catch (...) {
    writer->fail(std::current_exception());
  }
}

// ---------------------------------------------------------------- async handlers

template <class Stream>
void Session<Stream>::do_watch_disconnect() {
  if constexpr (Io::can_watch_reads) {
    Io::async_wait_readable(socket_, [self = shared_from_this(), seq = request_seq_](error_code ec) {
      self->on_watch_disconnect(ec, seq);
    });
  }
}

template <class Stream>
void Session<Stream>::on_watch_disconnect(error_code ec, std::uint64_t request_seq) {
  if (ec || request_seq != request_seq_ || !async_pending_ || state_ == State::closed) return;
  const auto peeked = Io::peek(socket_);
  if (peeked == Io::Peek::input) return;  // the next request arrived early: it waits in the socket
  if (peeked == Io::Peek::nothing) return do_watch_disconnect();
  count(ctx_->counters.client_aborts);
  do_close();
}

// ---------------------------------------------------------------- closing

template <class Stream>
void Session<Stream>::do_linger() {
  state_ = State::lingering;
  Io::shutdown_send(socket_);
  linger_bytes_ = 0;
  if (io_buffer_.size() < kIoBufferSize) io_buffer_.resize(kIoBufferSize);
  arm(Timeout::linger, Clock::now() + ctx_->options.linger_timeout);
  socket_.async_read_some(asio::buffer(io_buffer_),
                          [self = shared_from_this()](error_code ec, std::size_t n) { self->on_linger(ec, n); });
}

template <class Stream>
void Session<Stream>::on_linger(error_code ec, std::size_t n) {
  if (state_ == State::closed) return;
  linger_bytes_ += n;
  if (ec || linger_bytes_ > kMaxLingerBytes) return do_close();
  socket_.async_read_some(asio::buffer(io_buffer_),
                          [self = shared_from_this()](error_code ec2, std::size_t n2) { self->on_linger(ec2, n2); });
}

template <class Stream>
void Session<Stream>::do_close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  disarm();
  Io::close(socket_);
  out_.clear();
  auto keep = std::move(hold_);  // every caller runs inside a handler that holds the session too
  if (auto writer = writer_.lock()) writer->notify_closed();
  writer_.reset();
}

// ---------------------------------------------------------------- deadlines

template <class Stream>
void Session<Stream>::arm(Timeout kind, Clock::time_point deadline) {
  timer_kind_ = kind;
  timed_out_ = Timeout::none;
  timer_.expires_at(deadline);
  timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](error_code ec) {
    if (!ec) self->on_timer(generation);
  });
}

template <class Stream>
void Session<Stream>::disarm() {
  ++timer_generation_;  // a handler already queued with success sees a stale generation
  timer_.cancel();
}

template <class Stream>
void Session<Stream>::on_timer(std::uint64_t generation) {
  if (generation != timer_generation_ || state_ == State::closed) return;
  // Cancelling (not closing) lets the pending operation's handler decide: 408 or silent close.
  timed_out_ = timer_kind_;
  Io::cancel(socket_);
  // A composed operation (a whole header, a whole answer) may be between two of its reads or
  // writes, its last one done and queued, so that cancel() finds nothing to stop and the next
  // step would wait unbounded (a client sending a byte a second kept its header read going).
  // Shutting that direction down ends the next step at once.
  if (timer_kind_ == Timeout::write)
    Io::shutdown_send(socket_);
  else
    Io::shutdown_receive(socket_);
}

template <class Stream>
std::string Session<Stream>::context() const {
  return method_ + " " + request_.path;
}

}  // namespace agentbox::http
