#pragma once
// The egress proxy: a listener in each box's network namespace (net/account_listeners.hpp),
// each connection an EgressSession judged by the account's policy.
#include <boost/asio/io_context.hpp>

#include <memory>
#include <string>

#include "net/account_listeners.hpp"
#include "net/egress_session.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::net {

class EgressProxy {
 public:
  EgressProxy(boost::asio::io_context& io, std::shared_ptr<EgressContext> context);

  // Serves listener (listening already) for the account's box until stop(account); replaces
  // a listener the account had.
  void serve(UniqueFd listener, const std::string& account, const std::string& user) {
    listeners_.serve(std::move(listener), account, user);
  }
  // Stops accepting for the account; connections already open run to their end.
  void stop(const std::string& account) { listeners_.stop(account); }
  void stop_all() { listeners_.stop_all(); }

  // A new policy for every request judged from now on (SIGHUP).
  void set_config(std::shared_ptr<const EgressConfig> config) { context_->set_config(std::move(config)); }
  size_t listeners() const { return listeners_.size(); }

 private:
  std::shared_ptr<EgressContext> context_;
  AccountListeners listeners_;  // last: its loops call into context_
};

}  // namespace agentbox::net
