#pragma once
// One proxied request (/proxy/{port}/{path}): the client's connection, taken over after its
// head, and a TCP connection to the loopback of the caller's box. Owns both sockets, one fixed
// buffer per direction (bodies of any size pass through them piece by piece: net/body_relay.hpp,
// so a session's memory is bounded whatever it relays), the parsers, serializers and the
// deadlines; runs on the client connection's strand and stays alive through shared_from_this.
//
//   open socket in the box → connect (127.0.0.1, then ::1 if refused)
//     ├→ request head and body relayed → request sent (the response deadline starts)
//     └→ response head (1xx relayed) → response head and body relayed → linger
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
#include <boost/beast/http/serializer.hpp>

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
#include "net/body_relay.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct ProxyOptions {
  std::chrono::milliseconds connect_timeout{10'000};         // socket in the box + connect; then 504
  std::chrono::milliseconds response_timeout{60'000};        // request sent → response head; then 504
  std::chrono::milliseconds idle_timeout{300'000};           // no byte moving either way; then cut
  std::chrono::milliseconds tunnel_idle_timeout{3'600'000};  // the same after a WebSocket upgrade
  std::uint32_t header_limit = 64 * 1024;                    // bytes of the box's response head; then 502
  std::size_t buffer_size = 256 * 1024;                      // bytes per direction
  std::string node_name;                                     // a cluster node's X-Agentbox-Node, as on
                                                             // every answer of its own (empty: none)
  std::chrono::milliseconds linger_timeout{2'000};           // draining the client's input before close
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
  enum class Phase { none, connect, response, linger };
  enum Dir { up = 0, down = 1 };  // client → box, box → client

  // Connecting.
  void do_open(int family);
  void on_open(UniqueFd fd, std::string why);
  void on_connect(boost::system::error_code ec);
  // The request: its head made the box server's, then relayed with its body.
  void prepare_request_head();
  void do_relay_request();
  void on_request_relayed(const agentbox::net::RelayEnd& end);
  void on_request_sent();
  // The response: a head (interim ones relayed alone), made the client's, then relayed with
  // its body.
  void do_read_response_head();
  void on_read_response_head(boost::system::error_code ec);
  void prepare_response_head(bool interim);
  void do_relay_response(bool interim);
  void on_response_relayed(const agentbox::net::RelayEnd& end, bool interim);
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

  // Request (client → box): the client's parser and its message, edited for the box.
  using RequestSerializer = boost::beast::http::request_serializer<boost::beast::http::buffer_body>;
  std::optional<RequestSerializer> request_out_;
  std::vector<char> up_buffer_;

  // Response (box → client).
  using ResponseParser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
  using ResponseSerializer = boost::beast::http::response_serializer<boost::beast::http::buffer_body>;
  std::optional<ResponseParser> response_parser_;
  std::optional<ResponseSerializer> response_out_;
  boost::beast::flat_buffer response_head_buffer_;  // the box's bytes read with and past a head
  bool head_received_ = false;                      // a final response head arrived
  bool head_started_ = false;                       // a final head is being (or was) written to the client
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
