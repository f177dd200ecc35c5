#pragma once
// The inference gateway (DESIGN §4): a listener in each box's network namespace that takes the
// box's model requests (ANTHROPIC_BASE_URL in the box), drops whatever credential the box sent,
// adds the operator's, and forwards them over TLS to the configured upstream, streaming the
// answers back as they come. It counts the tokens each answer reports against the account
// (store/token_usage.hpp) and refuses requests once a daily budget is spent.
//
//   read head (400/431) → the route: only the model API (net/gateway_routes.hpp; 403)
//   → with a daily budget, a request that spends tokens is read whole (at most request_memory
//     per account; 413/429), its worst case bounded (net/request_worst_case.hpp; 400) and
//     reserved from what is left of the budget (429), all before any upstream sees it
//   → upstream connection: reused, or resolve, connect, TLS handshake verifying the
//     upstream's certificate and name (502/504)
//   → the request with the operator's credential → the answer, metered, back to the box; its
//     counts replace the reservation
//   → the next request on the same connection (keep-alive)
//
// Errors the gateway makes itself are shaped like Anthropic's ({"type":"error","error":{...}})
// so the SDK in the box shows their message. No error, log line or answer carries the credential.
//
// Runs on: the box loop (the daemon's io_context), a strand per connection; held bodies are
// scanned for a budget on a FairPool ("gateway-scan"); serve() and stop() from any thread.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "net/account_listeners.hpp"
#include "net/inference_upstream.hpp"
#include "net/name_resolver.hpp"
#include "store/network_log.hpp"
#include "store/token_usage.hpp"
#include "util/fair_pool.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::net {

struct GatewayOptions {
  UpstreamUrl upstream;
  Credential credential;
  std::optional<std::string> ca_file;                 // trusted beside the system store (a private CA, tests)
  uint64_t daily_tokens = 0;                          // per account and UTC day; 0: no budget
  uint64_t context_tokens = 1'000'000;                // a request's input bound when its bytes are not one
  size_t request_memory = 32 << 20;                   // bytes of bodies held per account for a budget check
  std::chrono::milliseconds header_timeout{30'000};   // for a request head, and between requests
  std::chrono::milliseconds connect_timeout{10'000};  // resolve + connect + TLS handshake; then 504
  std::chrono::milliseconds idle_timeout{600'000};    // no byte moving while a request or answer streams
  uint32_t header_limit = 64 * 1024;
  size_t connections_per_account = 64;
};

// What every gateway session shares. The TLS context holds the trust store, loaded once.
class GatewayContext {
 public:
  // Throws Error when the trust store or ca_file cannot be loaded. ledger and log may be null.
  GatewayContext(GatewayOptions options, std::shared_ptr<NameResolver> resolver, std::shared_ptr<TokenLedger> ledger,
                 std::shared_ptr<NetworkLog> log);

  const GatewayOptions& options() const { return options_; }
  boost::asio::ssl::context& tls() { return tls_; }
  NameResolver& resolver() const { return *resolver_; }
  TokenLedger* ledger() const { return ledger_.get(); }
  void record(NetworkDecision decision) const {
    if (log_) log_->record(std::move(decision));
  }
  // Bodies held for a budget check take `bytes` more of the account's request_memory; false
  // (and nothing taken) when they would exceed it.
  bool hold(const std::string& account, size_t bytes);
  void unhold(const std::string& account, size_t bytes);
  // Reads held bodies off the loop (a 32 MiB body takes a while), fairly between accounts.
  FairPool& scans() { return scans_; }

 private:
  const GatewayOptions options_;
  boost::asio::ssl::context tls_;
  const std::shared_ptr<NameResolver> resolver_;
  const std::shared_ptr<TokenLedger> ledger_;
  const std::shared_ptr<NetworkLog> log_;
  std::mutex held_mu_;  // guards held_
  std::unordered_map<std::string, size_t> held_;
  FairPool scans_{2, 1, "gateway-scan"};  // last: its jobs may use the rest
};

struct GatewayCall;
struct GatewayAnswer;

class InferenceGateway {
 public:
  InferenceGateway(boost::asio::io_context& io, std::shared_ptr<GatewayContext> context);

  void serve(UniqueFd listener, const std::string& account, const std::string& user) {
    listeners_.serve(std::move(listener), account, user);
  }
  void stop(const std::string& account) { listeners_.stop(account); }
  void stop_all() { listeners_.stop_all(); }
  size_t listeners() const { return listeners_.size(); }

  // One request of the daemon's own on an account's behalf, through the same sessions as a
  // box's (net/gateway_call.hpp); done runs on the box loop.
  void call(GatewayCall request, std::function<void(GatewayAnswer)> done);

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<GatewayContext> context_;
  AccountListeners listeners_;  // last: its loops call into context_
};

}  // namespace agentbox::net
