#pragma once
// The egress proxy: a listener in each box's network namespace (net/account_listeners.hpp),
// each connection an EgressSession judged by the account's policy. It follows the addresses of
// its own namespace, where it connects from (net/host_addresses.hpp), for the address stage.
//
// Runs on: the io_context it is given (in the daemon the box loop), a strand per connection;
// names are resolved on the NameResolver's threads; serve() and stop() from any thread.
#include <boost/asio/io_context.hpp>

#include <memory>
#include <string>

#include "net/account_listeners.hpp"
#include "net/egress_session.hpp"
#include "net/host_addresses.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::net {

class EgressProxy {
 public:
  // Made on a thread in the namespace connections go out from (the io threads' too). Throws
  // Error when the host's addresses cannot be read or followed.
  EgressProxy(boost::asio::io_context& io, std::shared_ptr<EgressContext> context);

  // Serves listener (listening already) for the account's box until stop(account); replaces
  // a listener the account had. The listener's buffers are bounded first (limits().socket_buffer),
  // so every connection it accepts is. Throws Error when they cannot be.
  void serve(UniqueFd listener, const std::string& account, const std::string& user);
  // Stops accepting for the account; connections already open run to their end.
  void stop(const std::string& account) { listeners_.stop(account); }
  void stop_all() { listeners_.stop_all(); }

  // A new policy for every request judged from now on (SIGHUP).
  void set_config(std::shared_ptr<const EgressConfig> config) { context_->set_config(std::move(config)); }
  size_t listeners() const { return listeners_.size(); }

 private:
  std::shared_ptr<EgressContext> context_;
  std::shared_ptr<HostAddresses> host_addresses_;
  AccountListeners listeners_;  // last: its loops call into context_
};

}  // namespace agentbox::net
