#include "http/response_writer.hpp"

#include "http/error.hpp"
#include "http/session.hpp"
#include "util/log.hpp"

namespace agentbox::http {

ResponseWriter::ResponseWriter(std::weak_ptr<AnySession> session, std::string context, ErrorMap errors)
    : session_(std::move(session)), context_(std::move(context)), errors_(errors) {}

ResponseWriter::~ResponseWriter() {
  // No lock needed: nobody else holds this object any more.
  if (closed_ || state_ == State::done) return;
  auto session = session_.lock();
  if (!session) return;
  if (state_ == State::fresh) {
    log::error("http", "{}: async handler dropped its response writer without answering", context_);
    session->post_send(error_response(http::status::internal_server_error, "Internal Server Error"));
  } else {
    log::error("http", "{}: async handler dropped its response writer mid-stream", context_);
    session->post_abort();
  }
}

bool ResponseWriter::advance(State from, State to) {
  std::lock_guard lock(mu_);
  if (closed_ || state_ != from) return false;
  state_ = to;
  return true;
}

bool ResponseWriter::send(Response response) {
  if (!advance(State::fresh, State::done)) return false;
  auto session = session_.lock();
  if (!session) return false;
  session->post_send(std::move(response));
  return true;
}

bool ResponseWriter::fail(std::exception_ptr error) { return send(errors_(error, context_)); }

bool ResponseWriter::send_file(Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) {
  if (!advance(State::fresh, State::done)) return false;
  auto session = session_.lock();
  if (!session) return false;
  session->post_file(std::move(head), std::move(fd), offset, length);
  return true;
}

bool ResponseWriter::begin_chunked(Response head) {
  if (!advance(State::fresh, State::streaming)) return false;
  auto session = session_.lock();
  if (!session) return false;
  session->post_chunked_head(std::move(head));
  return true;
}

bool ResponseWriter::write_chunk(std::string data) {
  if (!advance(State::streaming, State::streaming)) return false;
  if (data.empty()) return true;
  auto session = session_.lock();
  if (!session) return false;
  session->post_chunk(std::move(data));
  return true;
}

bool ResponseWriter::end_chunked() {
  if (!advance(State::streaming, State::done)) return false;
  auto session = session_.lock();
  if (!session) return false;
  session->post_chunked_end();
  return true;
}

bool ResponseWriter::is_open() const {
  std::lock_guard lock(mu_);
  return !closed_ && state_ != State::done;
}

void ResponseWriter::on_close(std::function<void()> cb) {
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      on_close_ = std::move(cb);
      return;
    }
    if (!aborted_) return;
  }
  cb();
}

void ResponseWriter::notify_closed() {
  std::function<void()> cb;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    // A completed response is not an early close: no callback then.
    aborted_ = state_ != State::done;
    if (aborted_) cb = std::move(on_close_);
    on_close_ = nullptr;
  }
  if (cb) cb();
}

}  // namespace agentbox::http
