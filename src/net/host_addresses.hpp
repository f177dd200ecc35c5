#pragma once
// The addresses bound to the interfaces of the network namespace the egress proxy connects
// from: the daemon's, or the caller's for `agentbox run`. An allowed name (or `allow = ["*"]`
// and a literal) that leads to one of them would reach the host's own services listening on
// 0.0.0.0 through the proxy; the address stage refuses them (net/egress_policy.hpp).
//
// Read with getifaddrs(3) at start and again whenever the kernel announces an address added or
// removed: a NETLINK_ROUTE socket subscribed to the address groups, waited on by the proxy's
// loop. Its messages are only a wake-up (not parsed); a burst of them costs one re-read. So a
// request costs no syscall, and a new address counts from the loop's next turn after the
// kernel's event.
#include <boost/asio/io_context.hpp>

#include <memory>
#include <mutex>
#include <vector>

#include "net/ip_address.hpp"

namespace agentbox::net {

class HostAddresses {
 public:
  using Set = std::vector<IpAddress>;  // IPv4-mapped forms stored as IPv4; holds() searches it

  // Reads the calling thread's namespace's addresses and follows their changes on io (whose
  // threads must stay in that namespace). Throws Error when neither can be set up.
  explicit HostAddresses(boost::asio::io_context& io);
  ~HostAddresses();  // stops following (on io: a pending wait ends there)
  HostAddresses(const HostAddresses&) = delete;
  HostAddresses& operator=(const HostAddresses&) = delete;

  // The addresses now: a snapshot that stays valid while held.
  std::shared_ptr<const Set> current() const;

 private:
  struct Watch;  // the netlink socket and its wait, alive while a wait is pending
  std::shared_ptr<Watch> watch_;
};

}  // namespace agentbox::net
