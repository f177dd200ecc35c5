#include "accounts/user_id.hpp"

#include <iterator>
#include <optional>

#include "http/error.hpp"

namespace agentbox::accounts {

namespace {

// External ids are opaque strings from the front end; a bound keeps the store and the logs sane.
constexpr size_t kMaxUserIdBytes = 256;

}  // namespace

std::string user_id_of(const http::Request& req, bool query_allowed) {
  std::optional<std::string> user;
  const auto take = [&](std::string_view value, std::string_view from) {
    if (user && *user != value)
      throw http::HttpError(http::status::bad_request,
                            "Two different user ids (" + std::string(from) + " disagrees): a request names one user");
    user = std::string(value);
  };
  for (const char* name : {"X-User-Id", "X-OpenWebUI-User-Id"}) {
    auto range = req.headers.equal_range(name);
    if (std::distance(range.first, range.second) > 1)
      throw http::HttpError(http::status::bad_request, std::string(name) + " appears more than once");
    if (range.first != range.second) take(range.first->value(), name);
  }
  if (query_allowed) {
    const auto values = req.query_params("user_id");
    if (values.size() > 1) throw http::HttpError(http::status::bad_request, "user_id appears more than once");
    if (!values.empty()) take(values.front(), "the user_id parameter");
  }
  if (!user || user->empty())
    throw http::HttpError(http::status::bad_request,
                          query_allowed ? "Missing user: send X-User-Id or ?user_id= to name the user"
                                        : "Missing X-User-Id header: every request must name its user");
  if (user->size() > kMaxUserIdBytes)
    throw http::HttpError(http::status::bad_request, "The user id is longer than 256 bytes");
  return std::move(*user);
}

}  // namespace agentbox::accounts
