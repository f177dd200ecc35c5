// The egress proxy's reading of a request head: tunnels, forwards, and the ambiguous or
// malformed heads refused before any policy sees them.
#include "net/proxy_request.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

namespace agentbox::net {
namespace {

namespace http = boost::beast::http;
using ::testing::HasSubstr;

// Parses a head as the proxy's session does (Beast), then reads it.
ProxyRequest parse(const std::string& head_text) {
  http::request_parser<http::empty_body> parser;
  parser.eager(false);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(head_text), ec);
  EXPECT_FALSE(ec) << ec.message() << " in " << head_text;
  return parse_proxy_request(parser.get().base());
}

std::string refused(const std::string& head_text, http::status expected = http::status::bad_request) {
  try {
    parse(head_text);
  } catch (const ProxyRequestError& e) {
    EXPECT_EQ(e.status, expected);
    return e.what();
  }
  return "accepted";
}

TEST(ProxyRequest, ConnectNamesATunnel) {
  ProxyRequest r = parse("CONNECT Example.COM:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
  EXPECT_EQ(r.kind, ProxyRequest::Kind::tunnel);
  EXPECT_EQ(r.host, "example.com");
  EXPECT_EQ(r.port, 443);
  EXPECT_EQ(r.authority(), "example.com:443");

  ProxyRequest v6 = parse("CONNECT [2001:DB8::1]:8443 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(v6.host, "2001:db8::1");
  EXPECT_EQ(v6.authority(), "[2001:db8::1]:8443");
  EXPECT_EQ(parse("CONNECT 203.0.113.7:22 HTTP/1.1\r\nHost: 203.0.113.7\r\n\r\n").port, 22);
}

TEST(ProxyRequest, AbsoluteFormNamesAForwardAndItsOriginForm) {
  ProxyRequest r = parse("GET http://deb.debian.org/debian/dists/x?a=1&b=%20 HTTP/1.1\r\nHost: deb.debian.org\r\n\r\n");
  EXPECT_EQ(r.kind, ProxyRequest::Kind::forward);
  EXPECT_EQ(r.host, "deb.debian.org");
  EXPECT_EQ(r.port, 80);
  EXPECT_EQ(r.target, "/debian/dists/x?a=1&b=%20");
  EXPECT_EQ(parse("POST HTTP://bait.test:8080 HTTP/1.1\r\nHost: bait.test:8080\r\n\r\n").target, "/");
  EXPECT_EQ(parse("GET http://bait.test:8080/p HTTP/1.1\r\n\r\n").port, 8080);
}

TEST(ProxyRequest, AHostHeaderThatDisagreesWithTheUrlIsRefused) {
  EXPECT_THAT(refused("GET http://allowed.example/ HTTP/1.1\r\nHost: metadata.internal\r\n\r\n"),
              HasSubstr("the Host header names metadata.internal but the request is for allowed.example:80"));
  EXPECT_THAT(refused("GET http://allowed.example/ HTTP/1.1\r\nHost: allowed.example:81\r\n\r\n"),
              HasSubstr("Host header names"));
  EXPECT_THAT(refused("CONNECT a.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n"), HasSubstr("Host header"));
  EXPECT_THAT(refused("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n"),
              HasSubstr("more than one Host header"));
}

TEST(ProxyRequest, MalformedConnectLinesAreRefusedSayingWhatIsExpected) {
  for (const char* target : {"example.com", "example.com:", "example.com:0", "example.com:65536", "example.com:x",
                             "user@example.com:443", "[::1:443", "exa%6dple.com:443", ":443", "/path"})
    EXPECT_THAT(refused(std::string("CONNECT ") + target + " HTTP/1.1\r\n\r\n"), HasSubstr("CONNECT needs HOST:PORT"))
        << target;
}

TEST(ProxyRequest, WhatCannotBeForwardedIsRefusedSayingWhy) {
  EXPECT_THAT(refused("GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n"), HasSubstr("send the full URL"));
  EXPECT_THAT(refused("GET https://example.com/ HTTP/1.1\r\n\r\n"), HasSubstr("https URLs go through CONNECT"));
  EXPECT_THAT(refused("GET ftp://example.com/ HTTP/1.1\r\n\r\n"), HasSubstr("only http:// URLs"));
  EXPECT_THAT(refused("GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n"), HasSubstr("credentials in the URL"));
  EXPECT_THAT(refused("GET http:/example.com HTTP/1.1\r\n\r\n"), HasSubstr("names no host"));
  EXPECT_THAT(refused("GET http://exa_mple..com/ HTTP/1.1\r\n\r\n"), HasSubstr("is not a host"));
  EXPECT_THAT(refused("GET http://example.com:99999/ HTTP/1.1\r\n\r\n"), HasSubstr("is not a host"));
}

}  // namespace
}  // namespace agentbox::net
