#pragma once
// Session<Stream>'s responses (session.hpp): the message made from a handler's Response, the
// output queue (a whole answer, or a head then chunks or a file), its writes and the end of a
// response. Part of the definitions in session_impl.hpp, which includes it.
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/write.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "http/access_log.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "http/session.hpp"
#include "util/log.hpp"

namespace agentbox::http {

namespace session_detail {
inline constexpr std::size_t kSendfilePiece = 4 * 1024 * 1024;  // most bytes one sendfile call moves
}  // namespace session_detail

template <class Stream>
template <class Body>
http::response<Body> Session<Stream>::make_message(Response& response) {
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

template <class Stream>
void Session<Stream>::respond(Response response) {
  if (state_ == State::closed || response_started_) return;
  if (response.error && !request_.path.empty())
    if (ErrorShape shape = ctx_->router.error_shape(request_.path)) shape(response);
  auto msg = make_message<http::string_body>(response);
  if (http::to_status_class(response.status) != http::status_class::informational &&
      response.status != http::status::no_content && response.status != http::status::not_modified)
    msg.body() = std::move(response.body);
  msg.prepare_payload();
  enqueue(FullJob{std::move(msg)});
}

template <class Stream>
void Session<Stream>::respond_early(Response response) {
  // Input of this request is still unread: rather than parse it, close after answering.
  if (header_parser_ ? !header_parser_->is_done() : body_parser_.has_value()) close_after_ = true;
  state_ = State::handling;
  respond(std::move(response));
}

template <class Stream>
void Session<Stream>::reject(http::status status, std::string_view detail) {
  method_ = "-";
  request_ = Request{};
  version_ = 11;
  request_keep_alive_ = false;
  close_after_ = true;
  started_ = Clock::now();
  state_ = State::handling;
  respond(error_response(status, detail));
}

template <class Stream>
void Session<Stream>::post_send(Response response) {
  asio::post(strand_, [self = shared_from_this(), r = std::move(response)]() mutable {
    if (self->state_ == State::handling && self->async_pending_) self->respond(std::move(r));
  });
}

template <class Stream>
void Session<Stream>::post_chunked_head(Response head) {
  asio::post(strand_, [self = shared_from_this(), r = std::move(head)]() mutable {
    if (self->state_ != State::handling || !self->async_pending_ || self->response_started_) return;
    auto msg = self->template make_message<http::empty_body>(r);
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

template <class Stream>
void Session<Stream>::post_chunk(std::string data) {
  asio::post(strand_, [self = shared_from_this(), d = std::move(data)]() mutable {
    if (self->state_ != State::handling || !self->response_started_) return;
    self->queued_chunk_bytes_ += d.size();
    if (self->queued_chunk_bytes_ > self->ctx_->options.stream_queue_limit) {
      count(self->ctx_->counters.stream_overflows);
      log::warn("http", "{}: client reads too slowly, dropping the stream", self->context());
      return self->do_close();
    }
    self->enqueue(ChunkJob{std::move(d)});
  });
}

template <class Stream>
void Session<Stream>::post_chunked_end() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ != State::handling || !self->response_started_) return;
    self->enqueue(LastChunkJob{});
  });
}

template <class Stream>
void Session<Stream>::post_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) {
  asio::post(strand_, [self = shared_from_this(), r = std::move(head), fd = std::move(fd), offset, length]() mutable {
    if (self->state_ != State::handling || !self->async_pending_ || self->response_started_) return;
    auto msg = self->template make_message<http::empty_body>(r);
    msg.content_length(length);
    self->enqueue(HeadJob{std::move(msg)});
    self->enqueue(FileJob{std::move(fd), offset, length});
  });
}

template <class Stream>
void Session<Stream>::post_abort() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ == State::handling && self->async_pending_) self->do_close();
  });
}

template <class Stream>
void Session<Stream>::enqueue(OutJob job) {
  out_.push_back(std::move(job));
  if (!writing_) do_write();
}

template <class Stream>
void Session<Stream>::do_write() {
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

template <class Stream>
void Session<Stream>::do_write_file_piece() {
  auto& job = std::get<FileJob>(*current_);
  if (job.remaining == 0)  // an empty body: complete through the usual path
    return asio::post(strand_, [self = shared_from_this()] { self->on_write({}, 0); });
  if constexpr (!Io::has_sendfile) {  // a piece read here, then written
    if (io_buffer_.size() < kIoBufferSize) io_buffer_.resize(kIoBufferSize);
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(job.remaining, io_buffer_.size()));
    const ssize_t n = ::pread(job.fd.get(), io_buffer_.data(), want, static_cast<off_t>(job.offset));
    if (n <= 0) {
      log::error("http", "{}: reading response body at {}: {}", context(), job.offset,
                 n == 0 ? "file shorter than announced" : std::strerror(errno));
      return do_close();
    }
    arm(Timeout::write, Clock::now() + ctx_->options.write_timeout);
    return asio::async_write(socket_, asio::buffer(io_buffer_.data(), static_cast<std::size_t>(n)),
                             [self = shared_from_this()](error_code ec, std::size_t m) { self->on_write(ec, m); });
  } else {
    // sendfile: the kernel moves page-cache pages to the socket; the bytes never pass through
    // this process. The socket is non-blocking, so a full send buffer answers EAGAIN and we
    // wait for it to drain on the event loop.
    off_t offset = static_cast<off_t>(job.offset);
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(job.remaining, session_detail::kSendfilePiece));
    const ssize_t n = Io::sendfile(socket_, job.fd.get(), offset, want);
    if (n > 0)  // account through on_write, posted so other work on this strand gets a turn
      return asio::post(strand_, [self = shared_from_this(), n] { self->on_write({}, static_cast<std::size_t>(n)); });
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      arm(Timeout::write, Clock::now() + ctx_->options.write_timeout);
      Io::async_wait_writable(socket_, [self = shared_from_this()](error_code ec) {
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
    log::error("http", "{}: sendfile of response body at {}: {}", context(), job.offset,
               n == 0 ? "file shorter than announced" : std::strerror(errno));
    return do_close();
  }
}

template <class Stream>
void Session<Stream>::on_write(error_code ec, std::size_t n) {
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

template <class Stream>
void Session<Stream>::on_response_complete() {
  const auto took = Clock::now() - started_;
  log_access({method_, request_.target, status_, body_bytes_, took, remote_});
  if (ctx_->options.on_request) {
    const auto& table = ctx_->router.routes();
    const size_t index = route_ ? static_cast<size_t>(route_ - table.data()) : CompletedRequest::kNoRoute;
    ctx_->options.on_request({index, method_, status_, took, credential_, refused_credential_, &request_});
  }
  if (async_pending_) {
    async_pending_ = false;
    Io::cancel(socket_);  // ends the disconnect watch; nothing else is pending now
    if (auto writer = writer_.lock()) writer->notify_closed();
    writer_.reset();
  }
  // Reset the per-request state before the next request.
  auto keep = std::move(hold_);  // released when this handler returns
  route_ = nullptr;
  credential_ = CompletedRequest::Credential::nothing;
  refused_credential_ = false;
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

}  // namespace agentbox::http
