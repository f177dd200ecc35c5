#pragma once
// Names resolved for the egress proxy and the gateway, off the event loop and fairly between
// accounts. getaddrinfo blocks for as long as DNS takes; Asio's resolver runs every lookup of an
// io_context one after another on one private thread, so one account's name with a slow DNS
// server would delay every other account's lookups. Here lookups run on a FairPool: each
// account may hold a few of its threads, never all of them.
//
// Runs on: its pool's threads ("resolver"); resolve() from any thread, done on a resolver thread.
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/fair_pool.hpp"

namespace agentbox::net {

class NameResolver {
 public:
  using Done = std::function<void(boost::system::error_code, std::vector<boost::asio::ip::tcp::endpoint>)>;

  NameResolver(unsigned threads = 8, unsigned per_account = 2);

  // Resolves host (a name or an IP literal) for TCP on port; done runs on a resolver thread
  // (post it back to the caller's strand). An error is a netdb error (host not found, ...).
  void resolve(const std::string& account, std::string host, uint16_t port, Done done);

 private:
  FairPool pool_;
};

}  // namespace agentbox::net
