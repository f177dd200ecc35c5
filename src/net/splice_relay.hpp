#pragma once
// A tunnel's two directions, relayed with splice(2) through one pipe each: bytes go from one
// socket's receive queue to the other's send queue without being copied through user space
// (DESIGN §4: an egress tunnel costs the kernel's work, not ours). Each direction ends at its
// source's end of file, passed on as a half-close, so protocols that shut down one side keep
// working; an error on either socket, the idle timeout or stop() ends both.
//
//   readable(src) → splice src → pipe → splice pipe → dst (until the pipe is empty) → again
//   EOF on src → shutdown(dst, SHUT_WR) → that direction is done → both done: finish
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "util/unique_fd.hpp"

namespace agentbox::net {

class SpliceRelay : public std::enable_shared_from_this<SpliceRelay> {
 public:
  struct Options {
    std::chrono::milliseconds idle_timeout{3'600'000};  // no byte moving either way; then both end
    // Bytes per direction's pipe, and the most one splice moves into it: what waits between
    // the sockets is bounded by it whatever the kernel makes of the pipe's size. 0: the
    // kernel's default pipe, 1 MiB per splice.
    size_t pipe_size = 0;
  };
  struct Result {
    uint64_t a_to_b = 0;  // bytes relayed from a to b
    uint64_t b_to_a = 0;
    std::string ended;  // "closed" (both sides ended their writing), "idle", "stopped", or the error
  };
  using Done = std::function<void(const Result&)>;

  // Takes both connected sockets; done runs once, on the relay's strand, after both are closed.
  // Throws Error when the pipes cannot be made (the sockets are closed then).
  static std::shared_ptr<SpliceRelay> start(boost::asio::ip::tcp::socket a, boost::asio::ip::tcp::socket b,
                                            Options options, Done done);
  // Ends the relay from any thread (shutdown of the daemon, a policy reload that revokes).
  void stop();

  SpliceRelay(boost::asio::ip::tcp::socket a, boost::asio::ip::tcp::socket b, Options options, Done done);

 private:
  struct Direction {
    boost::asio::ip::tcp::socket* src;
    boost::asio::ip::tcp::socket* dst;
    UniqueFd pipe_read, pipe_write;
    size_t in_pipe = 0;  // bytes spliced in and not yet out
    bool src_ended = false;
    bool done = false;
    uint64_t bytes = 0;
  };

  void begin();
  void pump(Direction& d);  // moves what it can without blocking, then waits for what it needs
  void on_ready(Direction& d, boost::system::error_code ec);
  void finish(std::string why);
  void arm_idle();

  boost::asio::strand<boost::asio::any_io_executor> strand_;
  boost::asio::ip::tcp::socket a_, b_;
  Options options_;
  Done done_;
  std::array<Direction, 2> dirs_;
  boost::asio::steady_timer idle_timer_;
  std::chrono::steady_clock::time_point last_activity_;
  bool finished_ = false;
};

}  // namespace agentbox::net
