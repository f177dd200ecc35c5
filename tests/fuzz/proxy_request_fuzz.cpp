// The egress proxy's request head as net/egress_session.cpp reads it from a box: Beast's
// request_parser<buffer_body> with the proxy's header limit (32 KiB), then parse_proxy_request
// (net/proxy_request.*: CONNECT host:port, or an absolute http:// URL, and the Host header),
// then the policy's name check (net/egress_policy.*) against a small allowlist.
//
// Checks: refusals are ProxyRequestError 400 or 405 only; a request's host is non-empty and
// already normalized, its port non-zero; a tunnel is CONNECT with no target; a forwarded target
// is an origin form without spaces or control characters (it goes into the request line sent
// upstream); authority() reads back as the same host and port; a host rule written from the
// host matches it; the allowlist lets through only what its rules name.
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "net/egress_policy.hpp"
#include "net/proxy_request.hpp"
#include "util/error.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using namespace agentbox::net;

constexpr std::uint32_t kHeaderLimit = 32 * 1024;  // EgressLimits::header_limit

const EgressPolicy& policy() {
  static const EgressPolicy p = [] {
    EgressPolicy out;
    for (const char* rule : {"*.example.com", "github.com:443", "10.0.0.1", "[2001:db8::1]:8080"})
      out.allow.push_back(HostRule::parse(rule));
    out.deny.push_back(HostRule::parse("secret.example.com"));
    return out;
  }();
  return p;
}

// What the allowlist above may let through, written out by hand.
bool allowed_by_hand(std::string_view host, std::uint16_t port) {
  if (host == "secret.example.com") return false;
  return (host.size() > 12 && host.ends_with(".example.com")) || (host == "github.com" && port == 443) ||
         host == "10.0.0.1" || (host == "2001:db8::1" && port == 8080);
}

// The head as the session reads it; false when Beast refuses it (the session answers 400/431).
bool read_head(std::string_view wire, http::request_parser<http::buffer_body>& parser) {
  static net::io_context ioc;
  beast::test::stream client(ioc), peer(ioc);
  client.connect(peer);
  client.append(wire);
  client.close_remote();
  beast::flat_buffer buffer;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(boost::none);
  beast::error_code result;
  bool done = false;
  http::async_read_header(client, buffer, parser, [&](beast::error_code ec, std::size_t) {
    result = ec;
    done = true;
  });
  ioc.restart();
  ioc.run();
  FUZZ_CHECK(done);
  return !result;
}

ProxyRequest reparse(const std::string& head) {
  http::request_parser<http::buffer_body> parser;
  FUZZ_CHECK(read_head(head, parser));
  return parse_proxy_request(parser.get().base());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view wire(reinterpret_cast<const char*>(data), size);
  http::request_parser<http::buffer_body> parser;
  if (!read_head(wire, parser)) return 0;
  const auto& head = parser.get().base();

  ProxyRequest request;
  try {
    request = parse_proxy_request(head);
  } catch (const ProxyRequestError& e) {
    FUZZ_CHECK(e.status == http::status::bad_request || e.status == http::status::method_not_allowed);
    return 0;
  }
  FUZZ_CHECK(!request.host.empty() && request.port != 0);
  FUZZ_CHECK(normalize_host(request.host) == request.host);
  if (request.kind == ProxyRequest::Kind::tunnel) {
    FUZZ_CHECK(head.method() == http::verb::connect && request.target.empty());
  } else {
    FUZZ_CHECK(head.method() != http::verb::connect);
    FUZZ_CHECK(request.target.starts_with('/'));
    for (char c : request.target) FUZZ_CHECK(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
  }

  // The authority, sent back as a CONNECT, names the same place.
  const ProxyRequest again = reparse("CONNECT " + request.authority() + " HTTP/1.1\r\n\r\n");
  FUZZ_CHECK(again.host == request.host && again.port == request.port);

  // A rule for exactly this host and port matches it (and another port only without one).
  try {
    const HostRule rule = HostRule::parse(request.authority());
    FUZZ_CHECK(rule.matches(request.host, request.port));
    FUZZ_CHECK(!rule.matches(request.host, static_cast<std::uint16_t>(request.port + 1)));
  } catch (const agentbox::Error&) {
    FUZZ_CHECK(false);  // a host the proxy accepts is a host a rule can name
  }

  const Verdict verdict = check_name(policy(), request.host, request.port);
  FUZZ_CHECK(verdict.allowed == allowed_by_hand(request.host, request.port));
  return 0;
}
