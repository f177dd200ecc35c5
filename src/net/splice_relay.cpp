#include "net/splice_relay.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <cstring>

#include "util/error.hpp"

namespace agentbox::net {
namespace {

// Bytes one direction moves per turn before it yields the thread to other tunnels.
constexpr uint64_t kTurnBytes = 4 << 20;
constexpr unsigned kSpliceFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;

}  // namespace

std::shared_ptr<SpliceRelay> SpliceRelay::start(boost::asio::ip::tcp::socket a, boost::asio::ip::tcp::socket b,
                                                Options options, Done done) {
  auto relay = std::make_shared<SpliceRelay>(std::move(a), std::move(b), options, std::move(done));
  boost::asio::dispatch(relay->strand_, [relay] { relay->begin(); });
  return relay;
}

SpliceRelay::SpliceRelay(boost::asio::ip::tcp::socket a, boost::asio::ip::tcp::socket b, Options options, Done done)
    : strand_(boost::asio::make_strand(a.get_executor())),
      a_(std::move(a)),
      b_(std::move(b)),
      options_(options),
      done_(std::move(done)),
      idle_timer_(strand_) {
  dirs_[0].src = &a_, dirs_[0].dst = &b_;
  dirs_[1].src = &b_, dirs_[1].dst = &a_;
  for (Direction& d : dirs_) {
    int fds[2];
    check(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), "pipe2");
    d.pipe_read.reset(fds[0]);
    d.pipe_write.reset(fds[1]);
    // Best effort: a bigger pipe moves more per splice; the default works, only slower.
    if (options_.pipe_size) ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(options_.pipe_size));
  }
  a_.non_blocking(true);
  b_.non_blocking(true);
}

void SpliceRelay::stop() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->finish("stopped"); });
}

void SpliceRelay::begin() {
  last_activity_ = std::chrono::steady_clock::now();
  arm_idle();
  pump(dirs_[0]);
  pump(dirs_[1]);
}

void SpliceRelay::pump(Direction& d) {
  if (finished_ || d.done) return;
  const int src = d.src->native_handle();
  const int dst = d.dst->native_handle();
  uint64_t moved = 0;
  auto wait = [&](boost::asio::socket_base::wait_type what) {
    boost::asio::ip::tcp::socket& sock = what == boost::asio::socket_base::wait_read ? *d.src : *d.dst;
    sock.async_wait(
        what, boost::asio::bind_executor(
                  strand_, [self = shared_from_this(), &d](boost::system::error_code ec) { self->on_ready(d, ec); }));
  };
  for (;;) {
    while (d.in_pipe > 0) {
      ssize_t n = ::splice(d.pipe_read.get(), nullptr, dst, nullptr, d.in_pipe, kSpliceFlags);
      if (n > 0) {
        d.in_pipe -= static_cast<size_t>(n);
        d.bytes += static_cast<uint64_t>(n);
        moved += static_cast<uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return wait(boost::asio::socket_base::wait_write);
      return finish(std::string("splice to the peer: ") + std::strerror(errno));
    }
    if (moved) last_activity_ = std::chrono::steady_clock::now();
    if (d.src_ended) {
      ::shutdown(dst, SHUT_WR);  // the peer sees our source's end of file
      d.done = true;
      if (dirs_[0].done && dirs_[1].done) finish("closed");
      return;
    }
    if (moved >= kTurnBytes) {
      boost::asio::post(strand_, [self = shared_from_this(), &d] { self->pump(d); });
      return;
    }
    ssize_t n = ::splice(src, nullptr, d.pipe_write.get(), nullptr, options_.pipe_size ? options_.pipe_size : 1 << 20,
                         kSpliceFlags);
    if (n > 0) {
      d.in_pipe += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      d.src_ended = true;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return wait(boost::asio::socket_base::wait_read);
    return finish(std::string("splice from the peer: ") + std::strerror(errno));
  }
}

void SpliceRelay::on_ready(Direction& d, boost::system::error_code ec) {
  if (finished_) return;
  if (ec) return finish(ec.message());
  pump(d);
}

void SpliceRelay::arm_idle() {
  auto deadline = last_activity_ + options_.idle_timeout;
  idle_timer_.expires_at(deadline);
  idle_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->finished_) return;
    if (std::chrono::steady_clock::now() - self->last_activity_ >= self->options_.idle_timeout)
      return self->finish("idle");
    self->arm_idle();
  });
}

void SpliceRelay::finish(std::string why) {
  if (finished_) return;
  finished_ = true;
  idle_timer_.cancel();
  boost::system::error_code ignored;
  a_.close(ignored);
  b_.close(ignored);
  Result result{dirs_[0].bytes, dirs_[1].bytes, std::move(why)};
  if (Done done = std::move(done_)) done(result);
}

}  // namespace agentbox::net
