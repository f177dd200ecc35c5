#pragma once
// Fields that describe one connection, not the message (RFC 9110 §7.6.1), which a proxy must
// not pass on: each side's framing and connection management are its own. Shared by /proxy
// (into a box) and the egress proxy (out of one).
#include <boost/beast/http/fields.hpp>

#include <boost/beast/core/string.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace agentbox::net {

// Connection, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade and every Proxy-* field.
bool is_hop_by_hop(std::string_view name);
// A field the message's Connection header names is hop-by-hop too.
bool named_by_connection(const boost::beast::http::fields& fields, std::string_view name);
// Whether a header (all its occurrences) lists token, as in Connection: keep-alive, Upgrade.
bool has_token(const boost::beast::http::fields& fields, boost::beast::http::field name, std::string_view token);

// Removes what belongs to one connection from a message being passed on. Transfer-Encoding
// stays: Beast's serializer frames the body it relays by it.
template <class Fields>
void remove_hop_by_hop(Fields& fields) {
  std::vector<std::string> names;
  for (const auto& field : fields) {
    std::string_view name = field.name_string();
    if (boost::beast::iequals(name, "transfer-encoding")) continue;
    if (is_hop_by_hop(name) || named_by_connection(fields, name)) names.emplace_back(name);
  }
  for (const std::string& name : names) fields.erase(name);
}

}  // namespace agentbox::net
