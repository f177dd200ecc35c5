#include "net/hop_by_hop.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/rfc7230.hpp>

namespace agentbox::net {

namespace beast = boost::beast;
namespace http = boost::beast::http;

bool is_hop_by_hop(std::string_view name) {
  for (std::string_view hop : {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"})
    if (beast::iequals(name, hop)) return true;
  return name.size() >= 6 && beast::iequals(name.substr(0, 6), "proxy-");
}

bool named_by_connection(const http::fields& fields, std::string_view name) {
  return has_token(fields, http::field::connection, name);
}

bool has_token(const http::fields& fields, http::field name, std::string_view token) {
  auto [begin, end] = fields.equal_range(name);
  for (auto it = begin; it != end; ++it)
    if (http::token_list(it->value()).exists(token)) return true;
  return false;
}

}  // namespace agentbox::net
