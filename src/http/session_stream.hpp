#pragma once
// What a Session (session.hpp) does with its stream besides Beast's reads and writes, for each
// kind of stream it runs on: here a TCP socket, the server's; Beast's in-memory test::stream in
// tests/support/test_stream_session.hpp. Everything the session needs of the kernel's socket
// (its addresses, a half close, a peek, sendfile) is in this one place.
#include <boost/asio/ip/tcp.hpp>

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <string>
#include <utility>

namespace agentbox::http {

template <class Stream>
struct SessionStream;  // specialised for each stream a Session may run on

template <>
struct SessionStream<boost::asio::ip::tcp::socket> {
  using tcp = boost::asio::ip::tcp;

  static constexpr bool can_take_over = true;  // Takeover holds a tcp::socket
  static constexpr bool has_sendfile = true;   // file bodies go from the page cache to the socket
  static constexpr bool can_watch_reads = true;

  // At the start: the peer ("203.0.113.7:51234", for logs), where the connection arrived (a URL
  // authority, Request::local_address), and no Nagle delay (small JSON answers).
  static void prepare(tcp::socket& s, std::string& remote, std::string& local) {
    boost::system::error_code ec;
    if (auto peer = s.remote_endpoint(ec); !ec) remote = peer.address().to_string() + ":" + std::to_string(peer.port());
    if (auto at = s.local_endpoint(ec); !ec) local = url_authority(at);
    s.set_option(tcp::no_delay(true), ec);
  }

  // Pending operations end with operation_aborted.
  static void cancel(tcp::socket& s) {
    boost::system::error_code ignored;
    s.cancel(ignored);
  }
  // The next read (or write) ends at once, even one a composed operation starts after this.
  static void shutdown_receive(tcp::socket& s) { shutdown(s, tcp::socket::shutdown_receive); }
  static void shutdown_send(tcp::socket& s) { shutdown(s, tcp::socket::shutdown_send); }
  static void close(tcp::socket& s) {
    boost::system::error_code ignored;
    s.shutdown(tcp::socket::shutdown_both, ignored);
    s.close(ignored);
  }

  // Readiness, without reading: handler(error_code) once input or the end can be read.
  template <class Handler>
  static void async_wait_readable(tcp::socket& s, Handler&& handler) {
    s.async_wait(tcp::socket::wait_read, std::forward<Handler>(handler));
  }
  template <class Handler>
  static void async_wait_writable(tcp::socket& s, Handler&& handler) {
    s.async_wait(tcp::socket::wait_write, std::forward<Handler>(handler));
  }
  // What a readable socket holds, without taking it: input (a pipelined request), its end (or
  // an error), or nothing yet.
  enum class Peek { input, closed, nothing };
  static Peek peek(tcp::socket& s) {
    char byte;
    const ssize_t n = ::recv(s.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return Peek::input;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Peek::nothing;
    return Peek::closed;
  }

  // At most n bytes of fd from offset (advanced), straight to the socket: sendfile(2) on a
  // non-blocking socket (-1 with EAGAIN when its send buffer is full).
  static ssize_t sendfile(tcp::socket& s, int fd, off_t& offset, std::size_t n) {
    boost::system::error_code ignored;
    s.native_non_blocking(true, ignored);
    ssize_t sent;
    do {
      sent = ::sendfile(s.native_handle(), fd, &offset, n);
    } while (sent < 0 && errno == EINTR);
    return sent;
  }

 private:
  static void shutdown(tcp::socket& s, tcp::socket::shutdown_type what) {
    boost::system::error_code ignored;
    s.shutdown(what, ignored);
  }
  // "10.0.0.5:8000", "[2001:db8::1]:8000"; an IPv4 address reached through an IPv6 socket as IPv4.
  static std::string url_authority(const tcp::endpoint& endpoint) {
    auto address = endpoint.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped())
      address = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6());
    const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
    return host + ":" + std::to_string(endpoint.port());
  }
};

}  // namespace agentbox::http
