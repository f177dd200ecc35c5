#include "net/egress_proxy.hpp"

#include "net/socket_buffers.hpp"

namespace agentbox::net {

EgressProxy::EgressProxy(boost::asio::io_context& io, std::shared_ptr<EgressContext> context)
    : context_(context),
      host_addresses_(std::make_shared<HostAddresses>(io)),
      listeners_(io, [context](boost::asio::ip::tcp::socket s, const std::shared_ptr<BoxAccount>& who) {
        std::make_shared<EgressSession>(std::move(s), who, context)->start();
      }) {
  context_->set_host_addresses(host_addresses_);
}

void EgressProxy::serve(UniqueFd listener, const std::string& account, const std::string& user) {
  bound_socket_buffers(listener.get(), context_->limits().socket_buffer);
  listeners_.serve(std::move(listener), account, user);
}

}  // namespace agentbox::net
