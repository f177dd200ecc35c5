#pragma once
// One connection from a box to its inference gateway (net/inference_gateway.hpp): requests
// read one after another (keep-alive), each forwarded with the operator's credential over one
// upstream connection kept while both sides allow it.
// The daemon's own requests for an account (net/gateway_call.hpp) arrive the same way, over a
// socketpair: the session cannot tell them from a box's.
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "net/account_listeners.hpp"
#include "net/anthropic_usage.hpp"
#include "net/gateway_routes.hpp"
#include "net/inference_gateway.hpp"
#include "net/request_worst_case.hpp"

namespace agentbox::net {

class GatewaySession : public std::enable_shared_from_this<GatewaySession> {
 public:
  GatewaySession(boost::asio::ip::tcp::socket client, std::shared_ptr<BoxAccount> who,
                 std::shared_ptr<GatewayContext> context);
  ~GatewaySession();
  void start();

 private:
  using RequestParser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;
  using ResponseParser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  void do_read_head();
  void on_read_head(boost::system::error_code ec);
  // With a budget, a request that spends tokens: its body is read whole and held, its worst
  // case read off the loop and reserved, before anything goes upstream.
  void start_held_body();
  void do_read_held_body();
  void on_held_body_read(boost::system::error_code ec);
  void on_scanned(WorstCaseScan scan);
  void release_held();
  void prepare_request();
  // The upstream connection: the open one if it is still good, else a new one.
  void do_upstream();
  void on_connected(boost::system::error_code ec);
  void do_send_request();
  void do_relay_request();  // head and body
  void do_read_response_head();
  void on_response_head(boost::system::error_code ec);
  void do_relay_response();  // head and body
  void on_response_sent();

  // Runs f with the upstream stream, whichever kind it is.
  template <class F>
  void with_upstream(F&& f);
  boost::beast::tcp_stream& upstream_tcp();
  bool upstream_reusable();
  void drop_upstream();

  // An error the gateway makes itself, shaped like Anthropic's; then the next request or close.
  void answer_error(boost::beast::http::status status, const std::string& message, bool keep_alive = false);
  void linger();
  void do_drain();
  void upstream_failed(boost::system::error_code ec, const std::string& doing);
  void record(bool allowed, std::string reason);
  // What the answer used: replaces the reservation, or is added to the day without a budget.
  void count(const TokenCounts& used);
  void close();

  boost::beast::tcp_stream client_;
  std::optional<TlsStream> tls_;
  std::optional<boost::beast::tcp_stream> plain_;
  std::shared_ptr<BoxAccount> who_;
  // The account the box belongs to: a profile's or a context's box spends its user's budget and
  // request memory, not one of its own (who_->account is the box's key, the log's).
  std::string account_;
  std::shared_ptr<GatewayContext> context_;

  boost::beast::flat_buffer client_buffer_;
  boost::beast::flat_buffer upstream_buffer_;
  std::optional<RequestParser> request_;
  std::optional<ResponseParser> response_;
  std::optional<boost::beast::http::request_serializer<boost::beast::http::buffer_body>> request_out_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::buffer_body>> response_out_;
  std::optional<UsageMeter> meter_;
  std::string held_;  // the body held for a budget check
  bool body_held_ = false;
  std::optional<TokenReservation> reservation_;  // its worst case, while in flight
  std::array<char, 64 * 1024> body_buffer_{};

  std::string what_;          // "POST /v1/messages", for the log
  std::string connected_to_;  // the upstream's address, for the log
  bool client_keep_alive_ = false;
  bool upstream_keep_alive_ = false;
  uint64_t bytes_up_ = 0, bytes_down_ = 0;
};

}  // namespace agentbox::net
