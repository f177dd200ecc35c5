#pragma once
// Where the inference gateway sends a box's model requests, and the operator's credential it
// adds on the way (DESIGN §4). The credential lives only in the daemon: a box sees a
// placeholder key and a base URL on its own loopback.
#include <cstdint>
#include <string>
#include <string_view>

namespace agentbox::net {

// "https://api.anthropic.com", "https://gw.example:8443/anthropic", or, for tests only,
// "http://127.0.0.1:PORT": plain HTTP would carry the credential in clear, so it is accepted
// only to a loopback address.
struct UpstreamUrl {
  bool tls = true;
  std::string host;  // as written: a name (verified against the certificate) or an IP literal
  uint16_t port = 443;
  std::string base_path;  // "" or "/prefix" without a trailing slash; requests are appended to it

  static UpstreamUrl parse(std::string_view text);  // throws Error saying what is wrong
  std::string authority() const;                    // host[:port] as a Host field carries it
  std::string to_string() const;
};

// An Anthropic API key goes in x-api-key; an OAuth token (Claude subscriptions) goes in
// Authorization: Bearer. Never printed: to_string() of anything holding it shows the kind only.
struct Credential {
  enum class Kind { api_key, oauth_token };
  Kind kind = Kind::api_key;
  std::string secret;

  bool empty() const { return secret.empty(); }
  std::string_view describe() const { return kind == Kind::api_key ? "an API key" : "an OAuth token"; }
};

}  // namespace agentbox::net
