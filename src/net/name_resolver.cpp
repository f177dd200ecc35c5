#include "net/name_resolver.hpp"

#include <netdb.h>

#include <boost/asio/error.hpp>

#include <cstring>
#include <memory>

namespace agentbox::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// getaddrinfo's errors in Asio's terms, as its resolver reports them.
boost::system::error_code netdb_error(int rc) {
  switch (rc) {
    case EAI_NONAME:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
      return asio::error::host_not_found;
    case EAI_AGAIN: return asio::error::host_not_found_try_again;
    case EAI_MEMORY: return asio::error::no_memory;
    case EAI_SYSTEM: return boost::system::error_code(errno, asio::error::get_system_category());
    default: return asio::error::no_recovery;
  }
}

}  // namespace

NameResolver::NameResolver(unsigned threads, unsigned per_account) : pool_(threads, per_account, "resolver") {}

void NameResolver::resolve(const std::string& account, std::string host, uint16_t port, Done done) {
  pool_.post(account, [host = std::move(host), port, done = std::move(done)] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;  // not AI_ADDRCONFIG: a namespace with only lo would get nothing
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) return done(netdb_error(rc), {});
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
    std::vector<tcp::endpoint> endpoints;
    for (addrinfo* ai = found; ai; ai = ai->ai_next) {
      if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
      tcp::endpoint e;
      std::memcpy(e.data(), ai->ai_addr, ai->ai_addrlen);
      endpoints.push_back(e);
    }
    if (endpoints.empty()) return done(asio::error::host_not_found, {});
    done({}, std::move(endpoints));
  });
}

}  // namespace agentbox::net
