#pragma once
// One proxied request (/proxy/{port}/{path}): the client's connection, taken over after its
// head, and a TCP connection to the loopback of the caller's box. Owns both sockets, one fixed
// buffer per direction (bodies of any size pass through them piece by piece, so a session's
// memory is bounded whatever it relays), the parsers and the deadlines; runs on the client
// connection's strand and stays alive through shared_from_this.
//
//   open socket in the box → connect (127.0.0.1, then ::1 if refused) → send head
//     ├→ request body, piece by piece → request sent (the response deadline starts)
//     └→ response head (1xx relayed) → client head → response body, piece by piece → linger
//   a 101 to a WebSocket upgrade: tunnel, both directions relayed raw until both have ended
//
// Before the response head reaches the client an error is an answer: 502 (nothing listens, no
// box, a bad response), 504 (connect or response deadline, no progress). After it, the
// connection is cut, so the client sees a truncated body. Hop-by-hop fields and Authorization
// are not forwarded. The client connection closes after one response (Connection: close).
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/response.hpp"
#include "http/router.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct ProxyOptions {
  std::chrono::milliseconds connect_timeout{10'000};       // socket in the box + connect; then 504
  std::chrono::milliseconds response_timeout{60'000};      // request sent → response head; then 504
  std::chrono::milliseconds idle_timeout{300'000};         // no byte moving either way; then cut
  std::chrono::milliseconds tunnel_idle_timeout{3'600'000};  // the same after a WebSocket upgrade
  std::uint32_t header_limit = 64 * 1024;                  // bytes of the box's response head; then 502
  std::size_t buffer_size = 256 * 1024;                    // bytes per direction
  std::string node_name;                                   // a cluster node's X-Agentbox-Node, as on
                                                           // every answer of its own (empty: none)
  std::chrono::milliseconds linger_timeout{2'000};         // draining the client's input before close
};

// Makes a non-blocking TCP socket of `family` from which connecting to the loopback reaches
// the target (in the daemon: the caller's box's network namespace). done may run on any
// thread, with no socket and the reason when there is none.
using OpenUpstream = std::function<void(int family, std::function<void(UniqueFd, std::string why)> done)>;

struct ProxyTarget {
  std::uint16_t port = 0;
  std::string target;  // origin form for the box's server: "/path?query"
  std::string prefix;  // "/proxy/PORT", for X-Forwarded-Prefix
  OpenUpstream open;
};

class ProxySession : public std::enable_shared_from_this<ProxySession> {
 public:
  ProxySession(Takeover conn, ProxyOptions options);
  ~ProxySession();

  const Request& request() const { return conn_.request; }
  // Relays the request to target; call once, on the connection's strand (the takeover
  // handler's thread).
  void start(ProxyTarget target);
  // Answers with response instead (an error found before any box was asked) and closes.
  void reject(Response response);

 private:
  enum class State { connecting, proxying, tunnel, answering, lingering, closed };
  // How a body ends as read from the box (none, length, chunked decoded by the parser, eof),
  // and how it is framed towards the other side (none, length, chunked, eof).
  enum class Framing { none, length, chunked, eof };
  enum class Phase { none, connect, response, linger };
  enum Dir { up = 0, down = 1 };  // client → box, box → client

  // Connecting.
  void do_open(int family);
  void on_open(UniqueFd fd, std::string why);
  void on_connect(boost::system::error_code ec);
  // The request: head, then the body piece by piece.
  void do_send_head();
  void on_send_head(boost::system::error_code ec);
  void do_read_request_body();
  void on_read_request_body(boost::system::error_code ec, std::size_t n);
  void do_write_request_body(std::size_t n, bool last);
  void on_write_request_body(boost::system::error_code ec, bool last);
  void on_request_sent();
  // The response: head (interim ones relayed), then the body piece by piece.
  void do_read_response_head();
  void on_read_response_head(boost::system::error_code ec);
  void do_write_client_head(std::string head, bool interim);
  void on_write_client_head(boost::system::error_code ec, bool interim);
  void do_read_response_body();
  void on_read_response_body(boost::system::error_code ec, std::size_t n);
  void do_write_response_body(std::size_t n, bool last);
  void on_write_response_body(boost::system::error_code ec, bool last);
  // A WebSocket after its 101: each direction relays raw bytes until its end of file.
  void do_tunnel();
  void do_tunnel_read(Dir dir);
  void on_tunnel_read(Dir dir, boost::system::error_code ec, std::size_t n);
  void on_tunnel_write(Dir dir, boost::system::error_code ec);
  // While the response is awaited or streams: notice a client that leaves.
  void do_watch_client();
  void on_watch_client(boost::system::error_code ec);

  // Ending: fail answers when no response has started, else cuts the connection.
  void fail(boost::beast::http::status status, std::string detail);
  void do_answer(Response response);
  void do_linger();
  void on_linger(boost::system::error_code ec, std::size_t n);
  void do_close();

  // Deadlines: one for the phase (connect, response head, linger), one watchdog for progress.
  void arm_phase(Phase phase, std::chrono::milliseconds after);
  void disarm_phase();
  void on_phase_timer(Phase phase, std::uint64_t generation);
  void touch();
  void arm_idle();
  void on_idle_timer();

  std::string upstream_head() const;
  std::string client_head(bool interim) const;

  Takeover conn_;  // the client: head, parser (request body), socket, bytes read past the head
  const ProxyOptions options_;
  const boost::asio::any_io_executor strand_;
  boost::asio::ip::tcp::socket& client_;
  boost::asio::ip::tcp::socket upstream_;
  boost::asio::steady_timer phase_timer_;
  boost::asio::steady_timer idle_timer_;
  ProxyTarget target_;
  const std::chrono::steady_clock::time_point started_;

  State state_ = State::connecting;
  Phase phase_ = Phase::none;
  std::uint64_t phase_generation_ = 0;
  std::chrono::steady_clock::time_point last_activity_;
  int family_ = 0;
  bool upgrade_ = false;  // a WebSocket upgrade was asked for and passed on

  // Request (client → box).
  Framing request_in_ = Framing::none;
  Framing request_out_ = Framing::none;
  std::uint64_t request_left_ = 0;  // Framing::length: body bytes still to relay
  bool request_sent_ = false;
  bool request_failed_ = false;  // the box stopped taking the body: its response may still come
  std::vector<char> up_buffer_;

  // Response (box → client).
  using ResponseParser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
  std::optional<ResponseParser> response_parser_;
  boost::beast::flat_buffer response_head_buffer_;  // the box's bytes read with and past a head
  Framing response_in_ = Framing::none;
  Framing response_out_ = Framing::none;
  std::uint64_t response_left_ = 0;
  bool head_received_ = false;  // a final response head arrived
  bool head_started_ = false;   // a final head is being (or was) written to the client
  bool client_writing_ = false;
  std::vector<char> down_buffer_;

  // Tunnel: which directions have ended.
  std::array<bool, 2> tunnel_ended_{false, false};

  std::array<char, 4096> linger_buffer_{};
  std::uint64_t linger_bytes_ = 0;
  unsigned status_ = 0;
  std::uint64_t body_bytes_ = 0;  // response body bytes relayed to the client
};

}  // namespace agentbox::api
