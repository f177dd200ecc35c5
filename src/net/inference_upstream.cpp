#include "net/inference_upstream.hpp"

#include <boost/url/parse.hpp>

#include <fmt/format.h>

#include "net/egress_policy.hpp"
#include "net/ip_address.hpp"
#include "util/error.hpp"

namespace agentbox::net {

UpstreamUrl UpstreamUrl::parse(std::string_view text) {
  auto url = boost::urls::parse_absolute_uri(text);
  if (!url) throw Error(fmt::format("\"{}\" is not an absolute URL", text));
  UpstreamUrl out;
  if (url->scheme() == "https") {
    out.tls = true;
  } else if (url->scheme() == "http") {
    out.tls = false;
  } else {
    throw Error(fmt::format("\"{}\": the scheme must be https (or http to a loopback address)", text));
  }
  if (url->has_userinfo()) throw Error(fmt::format("\"{}\": no user or password in the URL: use key_file", text));
  if (url->has_query() || url->has_fragment()) throw Error(fmt::format("\"{}\": no query or fragment", text));
  std::optional<std::string> host = normalize_host(url->encoded_host());
  if (!host || host->empty()) throw Error(fmt::format("\"{}\": no host", text));
  out.host = *host;
  out.port = out.tls ? 443 : 80;
  if (url->has_port()) {
    if (url->port_number() == 0) throw Error(fmt::format("\"{}\": the port must be 1-65535", text));
    out.port = url->port_number();
  }
  if (!out.tls) {
    std::optional<IpAddress> ip = IpAddress::parse(out.host);
    if (!ip || classify(*ip) != AddressKind::loopback)
      throw Error(fmt::format(
          "\"{}\": plain http:// only to a loopback address (it would carry the credential in clear)", text));
  }
  std::string path(url->encoded_path());
  while (!path.empty() && path.back() == '/') path.pop_back();
  out.base_path = path;
  return out;
}

std::string UpstreamUrl::authority() const {
  std::string host_text = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port == (tls ? 443 : 80)) return host_text;
  return fmt::format("{}:{}", host_text, port);
}

std::string UpstreamUrl::to_string() const {
  return fmt::format("{}://{}{}", tls ? "https" : "http", authority(), base_path);
}

}  // namespace agentbox::net
