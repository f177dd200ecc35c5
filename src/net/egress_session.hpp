#pragma once
// One connection from a box to its egress proxy (DESIGN §4). The listener it arrived on says
// whose box it is; the policy decides; the proxy resolves the name itself and connects to the
// address it checked.
//
//   read head → parse (400) → check the name (403) → resolve: [hosts], an IP literal, DNS (502)
//     → check each address (403) → a new-connection token of the account's (429, logged)
//     → connect to the first allowed one, on a socket with bounded buffers (502 refused, 504 timeout)
//     ├ CONNECT: 200, the bytes the client sent past its head, then a SpliceRelay to the end
//     └ http://: the request in origin form, hop-by-hop fields dropped, body relayed; the
//       response relayed back; then the next request on the same connection (keep-alive)
//
// Keep-alive to the origin: after a complete answer that leaves the origin's connection open,
// the next request of the same client connection to the same host and port, judged by the same
// policy snapshot and without a body, is sent on it (the name is still checked; the address was
// checked when it was connected). If that connection turns out closed before any byte of an
// answer, the request goes once more on a new connection, resolved and checked again.
//
// Every decision is logged once (store/network_log.hpp): a refusal when it is made, a tunnel or
// a forwarded request when it ends, with the bytes it moved.
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "net/account_listeners.hpp"
#include "net/deadline.hpp"
#include "net/egress_policy.hpp"
#include "net/host_addresses.hpp"
#include "net/name_resolver.hpp"
#include "net/proxy_request.hpp"
#include "store/network_log.hpp"
#include "util/token_bucket.hpp"

namespace agentbox::net {

struct EgressLimits {
  std::chrono::milliseconds header_timeout{10'000};   // to send a request head
  std::chrono::milliseconds connect_timeout{10'000};  // resolving and connecting; then 504
  std::chrono::milliseconds idle_timeout{300'000};    // a forwarded request with no byte moving
  std::chrono::milliseconds tunnel_idle_timeout{3'600'000};
  uint32_t header_limit = 32 * 1024;    // bytes of a request head; then 431
  size_t connections_per_account = 64;  // open at once; then 429
  // New connections to origins per account a second, after a burst of as many as it may hold
  // open (connections_per_account, or the rate if that is more); then 429. Each one the daemon
  // closes first stays in TIME_WAIT for a minute on a port of the host's toward its destination,
  // which every account shares. 0: no limit.
  uint32_t connect_rate = 20;
  // Each socket's receive buffer (its send buffer is half of it: net/socket_buffers.hpp), and
  // each direction of a tunnel's splice pipe: a reader that stops holds at most 1.5 times this
  // in the daemon's sockets before the writer behind it is stopped. 0: the kernel's autotuning
  // and a 1 MiB pipe.
  size_t socket_buffer = 512 * 1024;
};

// Where decisions go: the daemon's store (NetworkLog), or `agentbox run`'s stderr notice.
using DecisionSink = std::function<void(NetworkDecision)>;

// What every session shares: the policy (swapped whole on reload), the limits, the sink.
class EgressContext {
 public:
  // sink may be empty (nothing kept); it is called on the proxy's io threads, at once each.
  // resolver may be shared with the daemon's other services; null: one of its own.
  EgressContext(std::shared_ptr<const EgressConfig> config, EgressLimits limits, DecisionSink sink,
                std::shared_ptr<NameResolver> resolver = nullptr)
      : config_(std::move(config)),
        limits_(limits),
        sink_(std::move(sink)),
        resolver_(resolver ? std::move(resolver) : std::make_shared<NameResolver>()) {}
  // The daemon's form: log may be null. Inline, so net/ itself needs nothing of the store's
  // (the static `agentbox run` links the proxy without SQLite).
  EgressContext(std::shared_ptr<const EgressConfig> config, EgressLimits limits, std::shared_ptr<NetworkLog> log,
                std::shared_ptr<NameResolver> resolver = nullptr)
      : EgressContext(std::move(config), limits,
                      log ? DecisionSink([log](NetworkDecision d) { log->record(std::move(d)); }) : DecisionSink(),
                      std::move(resolver)) {}

  std::shared_ptr<const EgressConfig> config() const {
    std::lock_guard lock(mu_);
    return config_;
  }
  // A new policy applies to requests judged from now on; open tunnels keep theirs.
  void set_config(std::shared_ptr<const EgressConfig> config) {
    std::lock_guard lock(mu_);
    config_ = std::move(config);
  }
  const EgressLimits& limits() const { return limits_; }
  NameResolver& resolver() const { return *resolver_; }
  void record(NetworkDecision decision) const {
    if (sink_) sink_(std::move(decision));
  }
  // The addresses of the namespace connections are made from, which the address stage refuses
  // (EgressProxy follows them from before it serves); none until then.
  void set_host_addresses(std::shared_ptr<const HostAddresses> addresses) {
    std::lock_guard lock(mu_);
    host_addresses_ = std::move(addresses);
  }
  std::shared_ptr<const HostAddresses::Set> host_addresses() const;
  // Spends one of the account's new-connection tokens (limits().connect_rate); false when none
  // is left this moment.
  bool take_connect_token(const std::string& account) const;

 private:
  mutable std::mutex mu_;  // guards config_ and host_addresses_
  std::shared_ptr<const EgressConfig> config_;
  std::shared_ptr<const HostAddresses> host_addresses_;
  mutable std::mutex tokens_mu_;                                         // guards connect_tokens_
  mutable std::unordered_map<std::string, TokenBucket> connect_tokens_;  // by account; full ones forgotten
  const EgressLimits limits_;
  const DecisionSink sink_;
  const std::shared_ptr<NameResolver> resolver_;
};

// The box a listener serves.
using EgressAccount = BoxAccount;

class EgressSession : public std::enable_shared_from_this<EgressSession> {
 public:
  EgressSession(boost::asio::ip::tcp::socket client, std::shared_ptr<EgressAccount> who,
                std::shared_ptr<const EgressContext> context);
  ~EgressSession();
  void start();

 private:
  using RequestParser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;
  using ResponseParser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;

  void do_read_head();
  void on_read_head(boost::system::error_code ec);
  void do_resolve();
  void on_resolve(boost::system::error_code ec, std::vector<boost::asio::ip::tcp::endpoint> found);
  void do_connect(std::vector<boost::asio::ip::tcp::endpoint> allowed);
  void do_connect_next();  // the next of connect_to_, on a socket opened and bounded for it
  void on_connect(boost::system::error_code ec, boost::asio::ip::tcp::endpoint to);
  bool can_reuse_upstream() const;
  void drop_upstream();
  // A reused origin connection found closed before any byte of the answer: true when the
  // request was sent again on a new one.
  bool retried_on_new_connection(const boost::system::error_code& ec);
  // CONNECT
  void do_tunnel();
  // http://: request out, response back
  void do_forward();  // after a connection: Expect: 100-continue, then the request
  void do_send_request();
  void do_relay_request();  // head and body
  void on_request_sent();
  void do_read_response_head();
  void on_response_head(boost::system::error_code ec);
  void do_relay_response();  // head and body
  void on_response_sent();

  // Answers the client with a one-line text body; then closes, or reads the next request.
  void answer(boost::beast::http::status status, const std::string& text, bool keep_alive = false,
              int retry_after_seconds = 0);
  void refuse(const std::string& reason);  // 403, logged
  void record(bool allowed, std::string reason, uint64_t up = 0, uint64_t down = 0);
  void close();
  void release_slot();

  boost::asio::ip::tcp::socket client_;
  boost::asio::ip::tcp::socket upstream_;
  Deadline client_deadline_, upstream_deadline_;  // each closes its socket when it passes
  std::shared_ptr<EgressAccount> who_;
  bool holds_slot_ = true;  // counted in who_->open until release_slot()
  std::shared_ptr<const EgressContext> context_;
  std::shared_ptr<const EgressConfig> config_;  // the snapshot this request is judged by
  EgressPolicy policy_;

  boost::beast::flat_buffer client_buffer_;
  boost::beast::flat_buffer upstream_buffer_;
  std::optional<RequestParser> request_;
  std::optional<ResponseParser> response_;
  std::optional<boost::beast::http::request_serializer<boost::beast::http::buffer_body>> request_out_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::buffer_body>> response_out_;
  // Bodies pass through here, a piece at a time; made at the first body (a tunnel never needs it).
  static constexpr size_t kBodyBufferSize = 64 * 1024;
  std::unique_ptr<char[]> body_buffer_;
  std::span<char> body_buffer();

  ProxyRequest target_;
  std::vector<boost::asio::ip::tcp::endpoint> connect_to_;  // the allowed addresses, tried in order
  size_t connect_next_ = 0;
  std::string connected_to_;  // the address connected to, for the log
  std::string allowed_by_;
  bool client_keep_alive_ = false;
  // The origin connection kept after an answer: where it leads and the policy it was judged by.
  bool upstream_kept_ = false;
  bool upstream_reused_ = false;  // this request went on a kept connection
  std::string upstream_host_;
  uint16_t upstream_port_ = 0;
  std::string upstream_address_;
  std::shared_ptr<const EgressConfig> upstream_config_;
  uint64_t bytes_up_ = 0, bytes_down_ = 0;
};

}  // namespace agentbox::net
