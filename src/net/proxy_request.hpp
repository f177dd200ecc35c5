#pragma once
// What a client of the egress proxy asks for, read from its request head: a tunnel
// (`CONNECT host:port`) or a request to forward (`GET http://host[:port]/path`). Everything
// the policy judges comes from here, so this is where ambiguity is refused: a Host header that
// names another place than the URL, credentials in the URL, an https:// URL sent in the clear,
// an origin-form request with no destination.
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "util/error.hpp"

namespace agentbox::net {

struct ProxyRequest {
  enum class Kind { tunnel, forward };
  Kind kind = Kind::tunnel;
  std::string host;  // normalized (net::normalize_host); an IP literal without brackets
  uint16_t port = 0;
  std::string target;  // forward: the origin form to send ("/path?query"); tunnel: empty

  std::string authority() const;  // "host:port", "[v6]:port"
};

// A request the proxy refuses before judging it: the status and one line for the client.
struct ProxyRequestError : Error {
  ProxyRequestError(boost::beast::http::status s, const std::string& what) : Error(what), status(s) {}
  boost::beast::http::status status;
};

// Throws ProxyRequestError (400, or 405 for a method that cannot be proxied).
ProxyRequest parse_proxy_request(const boost::beast::http::request_header<>& head);

}  // namespace agentbox::net
