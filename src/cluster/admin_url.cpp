#include "cluster/admin_url.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <charconv>
#include <string_view>

#include "util/error.hpp"

namespace agentbox::cluster {

namespace {

// The clients of admin routes connect to an address: a name (a Kubernetes Service, a host) is
// resolved here, once per command or move.
std::string numeric_host(const std::string& host, const ClusterNode& node) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw Error("node " + node.name + ": cannot resolve " + host + ": " + ::gai_strerror(rc));
  char numeric[INET6_ADDRSTRLEN] = {};
  const int rc = ::getnameinfo(found->ai_addr, found->ai_addrlen, numeric, sizeof numeric, nullptr, 0, NI_NUMERICHOST);
  ::freeaddrinfo(found);
  if (rc != 0) throw Error("node " + node.name + ": cannot resolve " + host + ": " + ::gai_strerror(rc));
  return numeric;
}

}  // namespace

AdminAddress admin_address(const ClusterNode& node) {
  const auto bad = [&](std::string_view why) {
    return Error("node " + node.name + ": admin_url " + node.admin_url + " " + std::string(why));
  };
  std::string_view url = node.admin_url;
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) throw bad("is not http://HOST:PORT");
  url.remove_prefix(kScheme.size());
  while (url.ends_with('/')) url.remove_suffix(1);
  AdminAddress a;
  std::string_view host = url;
  const size_t colon = url.rfind(':');
  if (colon != std::string_view::npos && url.find(']', colon) == std::string_view::npos) {
    auto [end, ec] = std::from_chars(url.data() + colon + 1, url.data() + url.size(), a.port);
    if (ec != std::errc() || end != url.data() + url.size() || a.port == 0) throw bad("has a bad port");
    host = url.substr(0, colon);
  }
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  if (host.empty() || host.find('/') != std::string_view::npos) throw bad("is not http://HOST:PORT");
  a.host = numeric_host(std::string(host), node);
  return a;
}

}  // namespace agentbox::cluster
