#include "net/proxy_request.hpp"

#include <boost/url/parse.hpp>

#include <fmt/format.h>
#include <charconv>
#include <optional>

#include "net/egress_policy.hpp"

namespace agentbox::net {
namespace {

namespace http = boost::beast::http;
using http::status;

[[noreturn]] void refuse(const std::string& why, status s = status::bad_request) {
  throw ProxyRequestError(s, "agentbox: " + why);
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return out;
}

struct HostPort {
  std::string host;
  std::optional<uint16_t> port;
};

// host[:port] as in an authority; nullopt when it is not one (userinfo included).
std::optional<HostPort> parse_host_port(std::string_view text) {
  auto authority = boost::urls::parse_authority(text);
  if (!authority || authority->has_userinfo()) return std::nullopt;
  if (authority->host_type() == boost::urls::host_type::ipvfuture) return std::nullopt;
  std::optional<std::string> host = normalize_host(authority->encoded_host());
  if (!host) return std::nullopt;
  HostPort out{*host, std::nullopt};
  if (authority->has_port()) {
    std::string_view digits = authority->port();
    unsigned port = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535)
      return std::nullopt;
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

std::string bracketed(const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; }

// The Host header, if any, must name the place the request line names.
void check_host_header(const http::request_header<>& head, const ProxyRequest& request) {
  auto [first, last] = head.equal_range(http::field::host);
  if (first == last) return;
  if (std::next(first) != last) refuse("the request has more than one Host header");
  std::optional<HostPort> named = parse_host_port(first->value());
  if (!named) refuse("the Host header \"" + std::string(first->value()) + "\" is not a host");
  uint16_t port = named->port.value_or(request.kind == ProxyRequest::Kind::forward ? 80 : request.port);
  if (named->host != request.host || port != request.port)
    refuse("the Host header names " + std::string(first->value()) + " but the request is for " + request.authority());
}

ProxyRequest parse_tunnel(std::string_view target) {
  std::optional<HostPort> hp = parse_host_port(target);
  if (!hp || !hp->port) refuse("CONNECT needs HOST:PORT, not \"" + std::string(target) + "\"");
  return {ProxyRequest::Kind::tunnel, hp->host, *hp->port, {}};
}

ProxyRequest parse_forward(std::string_view target) {
  if (target.starts_with("/")) refuse("this is a proxy: send the full URL (http://host/path), or CONNECT for https");
  auto url = boost::urls::parse_absolute_uri(target);
  if (!url) refuse(fmt::format("\"{}\" is not a URL", target.substr(0, 200)));
  std::string scheme = lower(url->scheme());
  if (scheme == "https") refuse("https URLs go through CONNECT (set HTTPS_PROXY)");
  if (scheme != "http") refuse("only http:// URLs can be forwarded, not " + scheme + "://");
  if (!url->has_authority()) refuse("the URL names no host");
  if (url->has_userinfo()) refuse("credentials in the URL are not forwarded; send an Authorization header");
  std::optional<HostPort> hp = parse_host_port(url->encoded_authority());
  if (!hp) refuse(fmt::format("\"{}\" is not a host", std::string_view(url->encoded_authority())));
  std::string origin = url->encoded_path().empty() ? "/" : std::string(url->encoded_path());
  if (origin.front() != '/') refuse("the URL's path must start with /");
  if (url->has_query()) origin.append("?").append(url->encoded_query());
  return {ProxyRequest::Kind::forward, hp->host, hp->port.value_or(80), std::move(origin)};
}

}  // namespace

std::string ProxyRequest::authority() const { return bracketed(host) + ":" + std::to_string(port); }

ProxyRequest parse_proxy_request(const http::request_header<>& head) {
  std::string_view target = head.target();
  ProxyRequest request = head.method() == http::verb::connect ? parse_tunnel(target) : parse_forward(target);
  check_host_header(head, request);
  return request;
}

}  // namespace agentbox::net
