#include "cluster/admin_url.hpp"

#include <charconv>
#include <string_view>

#include "util/error.hpp"

namespace agentbox::cluster {

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
  a.host = std::string(host);
  return a;
}

}  // namespace agentbox::cluster
