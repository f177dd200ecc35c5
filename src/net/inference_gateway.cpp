#include "net/inference_gateway.hpp"

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

InferenceGateway::InferenceGateway(asio::io_context& io, std::shared_ptr<GatewayContext> context)
    : context_(context),
      listeners_(io, [context](asio::ip::tcp::socket s, const std::shared_ptr<BoxAccount>& who) {
        std::make_shared<GatewaySession>(std::move(s), who, context)->start();
      }) {}

}  // namespace agentbox::net
