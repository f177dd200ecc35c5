#pragma once
// `agentbox run --allow-net`: the daemon's egress proxy (net/, DESIGN §4) for one one-shot box.
// Its listener is made inside the box's network namespace; the proxy serves it on a thread of
// its own until the command ends. The rules are the server's: names against the allowlist,
// then the resolved address (loopback, private, link-local refused unless allowed). A denial
// answers the program with a 403 and tells the person on stderr, once per reason.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "net/egress_policy.hpp"

namespace agentbox::net {
class EgressProxy;
class EgressContext;
}  // namespace agentbox::net

namespace agentbox::cli {

struct RunNetFlags {
  std::vector<std::string> allow_net;        // HOST[,HOST...], each a policy allow rule
  std::vector<std::string> allow_addresses;  // CIDR[,CIDR...]
  std::vector<std::string> add_hosts;        // NAME=ADDRESS
};

// The flags over the profile's policy; nullopt when there is no allow rule at all (no proxy,
// no network). Throws UsageError naming the flag ("--allow-net: ...") for a bad value, or for
// --allow-address/--add-host given without any allow rule.
std::optional<net::EgressConfig> run_egress_config(const RunNetFlags& flags, const net::EgressConfig& profile);

class RunEgress {
 public:
  // crlf: the caller's terminal is in raw mode (a pty session), where "\n" does not return.
  RunEgress(net::EgressConfig config, bool crlf);
  // Stops accepting, drops the connections still open and joins the thread.
  ~RunEgress();
  RunEgress(const RunEgress&) = delete;
  RunEgress& operator=(const RunEgress&) = delete;

  // Listens on 127.0.0.1:port in the network namespace of init_pid (the box's init) and serves
  // it. Call before any thread of the caller's starts (it forks; see net/egress_listener.hpp)
  // and with the signals the caller handles blocked (the thread inherits the mask).
  void start(pid_t init_pid, uint16_t port);

 private:
  boost::asio::io_context io_;  // first: outlives the proxy and the handlers it owns
  std::shared_ptr<net::EgressContext> context_;
  std::unique_ptr<net::EgressProxy> proxy_;
  std::thread thread_;
};

}  // namespace agentbox::cli
