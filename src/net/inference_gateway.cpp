#include "net/inference_gateway.hpp"

#include <algorithm>

#include "net/gateway_call.hpp"
#include "net/gateway_session.hpp"
#include "util/error.hpp"

namespace agentbox::net {

namespace asio = boost::asio;
namespace ssl = asio::ssl;

namespace {

ssl::context make_tls_context(const GatewayOptions& options) {
  ssl::context tls(ssl::context::tls_client);
  tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                  ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  tls.set_default_verify_paths(ec);
  if (ec) throw Error("inference gateway: cannot load the system's certificate store: " + ec.message());
  if (options.ca_file) {
    tls.load_verify_file(*options.ca_file, ec);
    if (ec) throw Error("inference gateway: ca_file " + *options.ca_file + ": " + ec.message());
  }
  tls.set_verify_mode(ssl::verify_peer);
  return tls;
}

}  // namespace

GatewayContext::GatewayContext(GatewayOptions options, std::shared_ptr<NameResolver> resolver,
                               std::shared_ptr<TokenLedger> ledger, std::shared_ptr<NetworkLog> log)
    : options_(std::move(options)),
      tls_(make_tls_context(options_)),
      resolver_(std::move(resolver)),
      ledger_(std::move(ledger)),
      log_(std::move(log)) {}

bool GatewayContext::hold(const std::string& account, size_t bytes) {
  std::lock_guard lock(held_mu_);
  size_t& held = held_[account];
  if (bytes > options_.request_memory - held) {
    if (held == 0) held_.erase(account);
    return false;
  }
  held += bytes;
  return true;
}

void GatewayContext::unhold(const std::string& account, size_t bytes) {
  std::lock_guard lock(held_mu_);
  auto it = held_.find(account);
  if (it == held_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) held_.erase(it);
}

InferenceGateway::InferenceGateway(asio::io_context& io, std::shared_ptr<GatewayContext> context)
    : io_(io),
      context_(context),
      listeners_(io, [context](asio::ip::tcp::socket s, const std::shared_ptr<BoxAccount>& who) {
        std::make_shared<GatewaySession>(std::move(s), who, context)->start();
      }) {}

void InferenceGateway::call(GatewayCall request, std::function<void(GatewayAnswer)> done) {
  call_gateway(io_, context_, std::move(request), std::move(done));
}

}  // namespace agentbox::net
