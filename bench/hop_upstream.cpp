// The floor of an HTTP answer made off the I/O thread, for bench/cluster_bench.sh: a keep-alive
// HTTP/1.1 server whose I/O thread reads each request head and hands it to a worker thread,
// which makes the answer and hands it back for the I/O thread to write. agentbox answers file
// routes that way (its io threads never wait on a disk: http/offload.hpp); this does
// that hop and nothing else (no parsing past the head's end, no auth, no JSON library).
//
//   hop_upstream PORT [--inline | --busy MICROSECONDS]
//     127.0.0.1:PORT; --inline: answered on the I/O thread; --busy: the worker computes that long
//     before answering (an upstream as slow as agentbox's answer, doing nothing else)
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// One worker thread and its queue: what a blocking pool is at its smallest.
class Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::thread thread_;
};

int busy_us = 0;

// Spins for busy_us: time spent on the CPU, as real work would, not asleep.
void busy() {
  if (busy_us <= 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(busy_us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

std::string answer() {
  static const std::string body = R"({"cwd":"/home/bench","home":"/home/bench"})";
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, asio::io_context& io, Worker* worker)
      : socket_(std::move(socket)), io_(io), worker_(worker) {
    socket_.set_option(tcp::no_delay(true));
  }
  void read() {
    asio::async_read_until(socket_, in_, "\r\n\r\n", [self = shared_from_this()](auto ec, size_t n) {
      if (ec) return;
      self->in_.consume(n);
      if (!self->worker_) return self->write(answer());
      self->worker_->post([self] {
        busy();
        std::string out = answer();
        asio::post(self->io_, [self, out = std::move(out)]() mutable { self->write(std::move(out)); });
      });
    });
  }

 private:
  void write(std::string out) {
    out_ = std::move(out);
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](auto ec, size_t) {
      if (!ec) self->read();
    });
  }
  tcp::socket socket_;
  asio::io_context& io_;
  Worker* worker_;
  asio::streambuf in_;
  std::string out_;
};

void accept(tcp::acceptor& acceptor, asio::io_context& io, Worker* worker) {
  acceptor.async_accept([&acceptor, &io, worker](auto ec, tcp::socket socket) {
    if (!ec) std::make_shared<Connection>(std::move(socket), io, worker)->read();
    accept(acceptor, io, worker);
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hop_upstream PORT [--inline | --busy MICROSECONDS]\n");
    return 2;
  }
  const bool inline_answers = argc > 2 && std::strcmp(argv[2], "--inline") == 0;
  if (argc > 3 && std::strcmp(argv[2], "--busy") == 0) busy_us = std::atoi(argv[3]);
  asio::io_context io(1);
  tcp::acceptor acceptor(
      io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::atoi(argv[1]))));
  Worker worker;
  accept(acceptor, io, inline_answers ? nullptr : &worker);
  io.run();
}
