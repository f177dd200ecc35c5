#include "net/egress_proxy.hpp"

namespace agentbox::net {

EgressProxy::EgressProxy(boost::asio::io_context& io, std::shared_ptr<EgressContext> context)
    : context_(context),
      listeners_(io, [context](boost::asio::ip::tcp::socket s, const std::shared_ptr<BoxAccount>& who) {
        std::make_shared<EgressSession>(std::move(s), who, context)->start();
      }) {}

}  // namespace agentbox::net
