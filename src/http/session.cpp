#include "http/session.hpp"

#include <sys/sendfile.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "http/access_log.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "http/authorize.hpp"

namespace agentbox::http {

namespace beast = boost::beast;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kReadChunk = 16 * 1024;     // first read of a request
constexpr std::size_t kIoBufferSize = 64 * 1024;  // lingering reads
constexpr std::size_t kSendfilePiece = 4 * 1024 * 1024;  // most bytes one sendfile call moves
constexpr std::uint64_t kMaxLingerBytes = 64ull * 1024 * 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// "10.0.0.5:8000", "[2001:db8::1]:8000"; an IPv4 address reached through an IPv6 socket as IPv4.
std::string url_authority(const tcp::endpoint& endpoint) {
  auto address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

// The client went away or the operation was cancelled: nothing to answer.
bool is_disconnect(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::operation_aborted ||
         ec == asio::error::bad_descriptor;
}

}  // namespace

HttpSession::HttpSession(tcp::socket socket, std::shared_ptr<ServerContext> ctx, std::string listener_tag,
                         ConnectionSlot slot)
    : socket_(std::move(socket)),
      strand_(socket_.get_executor()),
      timer_(strand_),
      ctx_(std::move(ctx)),
      slot_(std::move(slot)),
      listener_tag_(std::move(listener_tag)),
      accepted_at_(Clock::now()),
      // The buffer only ever holds headers and read-ahead; bodies go to the body parser.
      buffer_(ctx_->options.header_limit + kReadChunk) {
  error_code ec;
  auto peer = socket_.remote_endpoint(ec);
  if (!ec) remote_ = peer.address().to_string() + ":" + std::to_string(peer.port());
  if (auto local = socket_.local_endpoint(ec); !ec) local_ = url_authority(local);
  socket_.set_option(tcp::no_delay(true), ec);  // small JSON answers: no Nagle delay
}

HttpSession::~HttpSession() { ctx_->sessions.remove(this); }

void HttpSession::start() {
  ctx_->sessions.add(this, weak_from_this());
  slot_.on_evict([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->evict();
  });
  asio::dispatch(strand_, [self = shared_from_this()] { self->do_wait_request(); });
}

void HttpSession::begin_shutdown() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ == State::waiting) self->do_close();
  });
}

void HttpSession::force_close() {
  asio::post(strand_, [self = shared_from_this()] { self->do_close(); });
}

void HttpSession::evict() {
  asio::post(strand_, [self = shared_from_this()] {
    self->evicted_ = true;
    if (self->state_ != State::waiting && self->state_ != State::reading_header) return;
    count(self->ctx_->counters.connections_evicted);
    self->do_close();
  });
}

// ---------------------------------------------------------------- request cycle

void HttpSession::do_wait_request() {
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
                          [self = shared_from_this()](error_code ec, std::size_t n) {
                            self->on_wait_request(ec, n);
                          });
}

void HttpSession::on_wait_request(error_code ec, std::size_t n) {
  if (state_ == State::closed) return;
  if (ec) {
    if (timed_out_ == Timeout::header) count(ctx_->counters.header_timeouts);
    if (timed_out_ == Timeout::idle) count(ctx_->counters.idle_timeouts);
    return do_close();
  }
  buffer_.commit(n);
  do_read_header();
}

void HttpSession::do_read_header() {
  state_ = State::reading_header;
  header_parser_.emplace();
  header_parser_->header_limit(ctx_->options.header_limit);
  header_parser_->body_limit(boost::none);  // the route's limit is applied once it is known
  arm(Timeout::header, first_request_ ? accepted_at_ + ctx_->options.header_timeout
                                      : Clock::now() + ctx_->options.header_timeout);
  http::async_read_header(socket_, buffer_, *header_parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            self->on_read_header(ec);
                          });
}

void HttpSession::on_read_header(error_code ec) {
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

void HttpSession::route_request() {
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
  if (!auth.allowed()) {
    count(ctx_->counters.unauthorized);
    return respond_early(std::move(*auth.refusal));
  }
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
  const bool expects_continue = beast::iequals(request_.header("Expect").value_or(""), "100-continue");
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
    if (!file) {
      http_logger()->error("{}: open(O_TMPFILE in {}): {}", context(), dir, std::strerror(errno));
      return respond_early(error_response(http::status::internal_server_error, "Internal Server Error"));
    }
    body_parser_->get().body().file = std::move(file);
  }
  if (expects_continue) return do_send_continue();
  do_read_body();
}

void HttpSession::do_send_continue() {
  state_ = State::reading_body;
  arm(Timeout::write, Clock::now() + ctx_->options.write_timeout);
  asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                   [self = shared_from_this()](error_code ec, std::size_t) { self->on_send_continue(ec); });
}

void HttpSession::on_send_continue(error_code ec) {
  if (state_ == State::closed) return;
  disarm();
  if (ec) {
    if (timed_out_ == Timeout::write) count(ctx_->counters.write_timeouts);
    return do_close();
  }
  do_read_body();
}

void HttpSession::do_read_body() {
  state_ = State::reading_body;
  // A deadline per read, not per body: a large upload may take long, but may not stall.
  arm(Timeout::body, Clock::now() + ctx_->options.body_timeout);
  http::async_read_some(socket_, buffer_, *body_parser_,
                        [self = shared_from_this()](error_code ec, std::size_t) { self->on_read_body(ec); });
}

void HttpSession::on_read_body(error_code ec) {
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
        return respond_early(error_response(http::status::insufficient_storage,
                                            "Disk quota exceeded: the request body does not fit in your storage"));
      http_logger()->error("{}: writing request body to spool file: {}", context(), std::strerror(err));
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

void HttpSession::dispatch() {
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
void HttpSession::hand_over(const TakeoverHandler& handler, bool key_accepted) {
  disarm();
  state_ = State::closed;
  http_logger()->info("{} \"{}\" taken over by its handler", remote_, context());
  slot_.on_evict(nullptr);  // busy from here on; a handler that waits may set its own
  Takeover t{std::move(request_), std::make_unique<Takeover::Parser>(std::move(*header_parser_)),
             std::move(socket_), std::move(buffer_), key_accepted, std::move(slot_)};
  header_parser_.reset();
  auto keep = std::move(hold_);
  try {
    handler(std::move(t));
  } catch (const std::exception& e) {
    http_logger()->error("{}: takeover handler failed: {}", context(), e.what());
  }
}

void HttpSession::dispatch_async(const AsyncHandler& handler) {
  auto writer = std::make_shared<ResponseWriter>(weak_from_this(), context(), ctx_->router.error_map());
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

// ---------------------------------------------------------------- responses

template <class Body>
http::response<Body> HttpSession::make_message(Response& response) {
  http::response<Body> msg{response.status, version_};
  for (const auto& field : response.headers) msg.insert(field.name_string(), field.value());
  ctx_->cors.decorate(request_.headers, msg.base());
  if (!ctx_->options.node_name.empty()) msg.set("X-Agentbox-Node", ctx_->options.node_name);
  keep_alive_ = request_keep_alive_ && !close_after_ && !evicted_ && !ctx_->stopping.load();
  msg.keep_alive(keep_alive_);
  status_ = static_cast<unsigned>(response.status);
  if (status_ == 500) count(ctx_->counters.internal_errors);
  response_started_ = true;
  return msg;
}

void HttpSession::respond(Response response) {
  if (state_ == State::closed || response_started_) return;
  auto msg = make_message<http::string_body>(response);
  if (http::to_status_class(response.status) != http::status_class::informational &&
      response.status != http::status::no_content && response.status != http::status::not_modified)
    msg.body() = std::move(response.body);
  msg.prepare_payload();
  enqueue(FullJob{std::move(msg)});
}

void HttpSession::respond_early(Response response) {
  // Input of this request is still unread: rather than parse it, close after answering.
  if (header_parser_ ? !header_parser_->is_done() : body_parser_.has_value()) close_after_ = true;
  state_ = State::handling;
  respond(std::move(response));
}

void HttpSession::reject(http::status status, std::string_view detail) {
  method_ = "-";
  request_ = Request{};
  version_ = 11;
  request_keep_alive_ = false;
  close_after_ = true;
  started_ = Clock::now();
  state_ = State::handling;
  respond(error_response(status, detail));
}

void HttpSession::post_send(Response response) {
  asio::post(strand_, [self = shared_from_this(), r = std::move(response)]() mutable {
    if (self->state_ == State::handling && self->async_pending_) self->respond(std::move(r));
  });
}

void HttpSession::post_chunked_head(Response head) {
  asio::post(strand_, [self = shared_from_this(), r = std::move(head)]() mutable {
    if (self->state_ != State::handling || !self->async_pending_ || self->response_started_) return;
    auto msg = self->make_message<http::empty_body>(r);
    // HTTP/1.0 has no chunked framing: the body then ends when the connection does.
    self->chunked_ = self->version_ >= 11;
    if (self->chunked_) {
      msg.chunked(true);
    } else {
      self->keep_alive_ = false;
      msg.keep_alive(false);
    }
    self->enqueue(HeadJob{std::move(msg)});
  });
}

void HttpSession::post_chunk(std::string data) {
  asio::post(strand_, [self = shared_from_this(), d = std::move(data)]() mutable {
    if (self->state_ != State::handling || !self->response_started_) return;
    self->queued_chunk_bytes_ += d.size();
    if (self->queued_chunk_bytes_ > self->ctx_->options.stream_queue_limit) {
      count(self->ctx_->counters.stream_overflows);
      http_logger()->warn("{}: client reads too slowly, dropping the stream", self->context());
      return self->do_close();
    }
    self->enqueue(ChunkJob{std::move(d)});
  });
}

void HttpSession::post_chunked_end() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ != State::handling || !self->response_started_) return;
    self->enqueue(LastChunkJob{});
  });
}

void HttpSession::post_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) {
  asio::post(strand_, [self = shared_from_this(), r = std::move(head), fd = std::move(fd), offset,
                      length]() mutable {
    if (self->state_ != State::handling || !self->async_pending_ || self->response_started_) return;
    auto msg = self->make_message<http::empty_body>(r);
    msg.content_length(length);
    self->enqueue(HeadJob{std::move(msg)});
    self->enqueue(FileJob{std::move(fd), offset, length});
  });
}

void HttpSession::post_abort() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ == State::handling && self->async_pending_) self->do_close();
  });
}

void HttpSession::enqueue(OutJob job) {
  out_.push_back(std::move(job));
  if (!writing_) do_write();
}

void HttpSession::do_write() {
  if (writing_ || out_.empty() || state_ == State::closed) return;
  current_.emplace(std::move(out_.front()));
  out_.pop_front();
  writing_ = true;
  if (std::holds_alternative<FileJob>(*current_)) return do_write_file_piece();
  auto on_done = [self = shared_from_this()](error_code ec, std::size_t n) { self->on_write(ec, n); };
  arm(Timeout::write, Clock::now() + ctx_->options.write_timeout);
  std::visit(
      [&](auto& job) {
        using Job = std::decay_t<decltype(job)>;
        if constexpr (std::is_same_v<Job, FullJob>) {
          http::async_write(socket_, job.msg, std::move(on_done));
        } else if constexpr (std::is_same_v<Job, HeadJob>) {
          head_serializer_.emplace(job.msg);
          http::async_write_header(socket_, *head_serializer_, std::move(on_done));
        } else if constexpr (std::is_same_v<Job, ChunkJob>) {
          if (chunked_)
            asio::async_write(socket_, http::make_chunk(asio::buffer(job.data)), std::move(on_done));
          else
            asio::async_write(socket_, asio::buffer(job.data), std::move(on_done));
        } else if constexpr (std::is_same_v<Job, LastChunkJob>) {
          if (chunked_)
            asio::async_write(socket_, http::make_chunk_last(), std::move(on_done));
          else
            asio::post(strand_, [on_done = std::move(on_done)]() mutable { on_done({}, 0); });
        }
      },
      *current_);
}

void HttpSession::do_write_file_piece() {
  auto& job = std::get<FileJob>(*current_);
  if (job.remaining == 0)  // an empty body: complete through the usual path
    return asio::post(strand_, [self = shared_from_this()] { self->on_write({}, 0); });
  // sendfile: the kernel moves page-cache pages to the socket; the bytes never pass through
  // this process. The socket is non-blocking, so a full send buffer answers EAGAIN and we
  // wait for it to drain on the event loop.
  error_code nb_error;
  socket_.native_non_blocking(true, nb_error);
  const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(job.remaining, kSendfilePiece));
  off_t offset = static_cast<off_t>(job.offset);
  ssize_t n;
  do {
    n = ::sendfile(socket_.native_handle(), job.fd.get(), &offset, want);
  } while (n < 0 && errno == EINTR);
  if (n > 0)  // account through on_write, posted so other work on this strand gets a turn
    return asio::post(strand_, [self = shared_from_this(), n] { self->on_write({}, static_cast<std::size_t>(n)); });
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !nb_error) {
    arm(Timeout::write, Clock::now() + ctx_->options.write_timeout);
    socket_.async_wait(tcp::socket::wait_write, [self = shared_from_this()](error_code ec) {
      if (self->state_ == State::closed) return;
      if (ec) return self->on_write(ec, 0);
      self->disarm();
      self->do_write_file_piece();
    });
    return;
  }
  if (n < 0 && (errno == EPIPE || errno == ECONNRESET))  // the client left
    return do_close();
  // The Content-Length is already on the wire: the only honest end is a cut connection.
  http_logger()->error("{}: sendfile of response body at {}: {}", context(), job.offset,
                       n == 0 ? "file shorter than announced" : std::strerror(errno));
  return do_close();
}

void HttpSession::on_write(error_code ec, std::size_t n) {
  if (state_ == State::closed) return;
  disarm();
  writing_ = false;
  if (ec) {
    if (timed_out_ == Timeout::write) count(ctx_->counters.write_timeouts);
    return do_close();
  }
  bool complete = false;
  std::visit(
      [&](auto& job) {
        using Job = std::decay_t<decltype(job)>;
        if constexpr (std::is_same_v<Job, FullJob>) {
          body_bytes_ += job.msg.body().size();
          complete = true;
        } else if constexpr (std::is_same_v<Job, ChunkJob>) {
          body_bytes_ += job.data.size();
          queued_chunk_bytes_ -= job.data.size();
        } else if constexpr (std::is_same_v<Job, LastChunkJob>) {
          complete = true;
        } else if constexpr (std::is_same_v<Job, FileJob>) {
          body_bytes_ += n;
          job.offset += n;
          job.remaining -= n;
          complete = job.remaining == 0;
        }
      },
      *current_);
  if (std::holds_alternative<FileJob>(*current_) && !complete) {
    writing_ = true;
    return do_write_file_piece();
  }
  head_serializer_.reset();
  current_.reset();
  if (complete) return on_response_complete();
  do_write();
}

void HttpSession::on_response_complete() {
  log_access({method_, request_.target, status_, body_bytes_, Clock::now() - started_, remote_});
  if (async_pending_) {
    async_pending_ = false;
    error_code ignored;
    socket_.cancel(ignored);  // ends the disconnect watch; nothing else is pending now
    if (auto writer = writer_.lock()) writer->notify_closed();
    writer_.reset();
  }
  // Reset the per-request state before the next request.
  auto keep = std::move(hold_);  // released when this handler returns
  route_ = nullptr;
  request_ = Request{};
  method_ = "-";
  response_started_ = false;
  chunked_ = false;
  status_ = 0;
  body_bytes_ = 0;
  queued_chunk_bytes_ = 0;
  if (!keep_alive_) {
    if (close_after_) return do_linger();
    return do_close();
  }
  do_wait_request();
}

// ---------------------------------------------------------------- async handlers

void HttpSession::do_watch_disconnect() {
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), seq = request_seq_](error_code ec) {
    self->on_watch_disconnect(ec, seq);
  });
}

void HttpSession::on_watch_disconnect(error_code ec, std::uint64_t request_seq) {
  if (ec || request_seq != request_seq_ || !async_pending_ || state_ == State::closed) return;
  char byte;
  ssize_t n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return;  // the next request arrived early: it waits in the socket until we are done
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return do_watch_disconnect();
  count(ctx_->counters.client_aborts);
  do_close();
}

// ---------------------------------------------------------------- closing

void HttpSession::do_linger() {
  state_ = State::lingering;
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  linger_bytes_ = 0;
  if (io_buffer_.size() < kIoBufferSize) io_buffer_.resize(kIoBufferSize);
  arm(Timeout::linger, Clock::now() + ctx_->options.linger_timeout);
  socket_.async_read_some(asio::buffer(io_buffer_), [self = shared_from_this()](error_code ec, std::size_t n) {
    self->on_linger(ec, n);
  });
}

void HttpSession::on_linger(error_code ec, std::size_t n) {
  if (state_ == State::closed) return;
  linger_bytes_ += n;
  if (ec || linger_bytes_ > kMaxLingerBytes) return do_close();
  socket_.async_read_some(asio::buffer(io_buffer_), [self = shared_from_this()](error_code ec2, std::size_t n2) {
    self->on_linger(ec2, n2);
  });
}

void HttpSession::do_close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  disarm();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  out_.clear();
  auto keep = std::move(hold_);  // every caller runs inside a handler that holds the session too
  if (auto writer = writer_.lock()) writer->notify_closed();
  writer_.reset();
}

// ---------------------------------------------------------------- deadlines

void HttpSession::arm(Timeout kind, Clock::time_point deadline) {
  timer_kind_ = kind;
  timed_out_ = Timeout::none;
  timer_.expires_at(deadline);
  timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](error_code ec) {
    if (!ec) self->on_timer(generation);
  });
}

void HttpSession::disarm() {
  ++timer_generation_;  // a handler already queued with success sees a stale generation
  timer_.cancel();
}

void HttpSession::on_timer(std::uint64_t generation) {
  if (generation != timer_generation_ || state_ == State::closed) return;
  // Cancelling (not closing) lets the pending operation's handler decide: 408 or silent close.
  timed_out_ = timer_kind_;
  error_code ignored;
  socket_.cancel(ignored);
  // A composed operation (a whole header, a whole answer) may be between two of its reads or
  // writes, its last one done and queued, so that cancel() finds nothing to stop and the next
  // step would wait unbounded (a client sending a byte a second kept its header read going).
  // Shutting that direction down ends the next step at once.
  socket_.shutdown(timer_kind_ == Timeout::write ? tcp::socket::shutdown_send : tcp::socket::shutdown_receive,
                   ignored);
}

std::string HttpSession::context() const { return method_ + " " + request_.path; }

}  // namespace agentbox::http
