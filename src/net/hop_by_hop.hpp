#pragma once
// Fields that describe one connection, not the message (RFC 9110 §7.6.1), which a proxy must
// not pass on: each side's framing and connection management are its own. Shared by /proxy
// (into a box) and the egress proxy (out of one).
#include <boost/beast/http/fields.hpp>

#include <string_view>

namespace agentbox::net {

// Connection, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade and every Proxy-* field.
bool is_hop_by_hop(std::string_view name);
// A field the message's Connection header names is hop-by-hop too.
bool named_by_connection(const boost::beast::http::fields& fields, std::string_view name);
// Whether a header (all its occurrences) lists token, as in Connection: keep-alive, Upgrade.
bool has_token(const boost::beast::http::fields& fields, boost::beast::http::field name, std::string_view token);

}  // namespace agentbox::net
