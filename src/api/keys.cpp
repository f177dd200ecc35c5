#include "api/keys.hpp"

#include <ctime>

#include "api/services.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/offload.hpp"
#include "http/user_keys.hpp"
#include "store/api_key_store.hpp"
#include "util/log.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

// The same bounds as a user id in a header (accounts/user_id.hpp) and a label that fits a line.
constexpr std::size_t kMaxUserBytes = 256;
constexpr std::size_t kMaxNameBytes = 200;

Response create(ApiKeyStore& store, UserKeys& keys, const Request& req) {
  const nlohmann::json body = parse_json_object(req);
  const std::string user = required_string(body, "user");
  const std::string name = optional_string(body, "name").value_or("");
  if (user.empty() || user.size() > kMaxUserBytes)
    throw HttpError(http::status::unprocessable_entity, "Field 'user' must be 1 to 256 bytes");
  if (name.size() > kMaxNameBytes) throw HttpError(http::status::unprocessable_entity, "Field 'name' is too long");
  UserKeys::Minted minted = UserKeys::mint();
  const ApiKeyRecord record{minted.id, UserKeys::hex_of(minted.digest), user, name,
                            static_cast<int64_t>(std::time(nullptr))};
  store.add(record);  // stored first: a key that works is a key that survives a restart
  keys.add(minted.id, user, minted.digest);
  log::info("keys", "API key {} made for user {}", minted.id, user);
  return Response::json(
      {{"id", record.id}, {"key", minted.key}, {"user", user}, {"name", name}, {"created", record.created}},
      http::status::created);
}

Response list(ApiKeyStore& store) {
  nlohmann::json out = nlohmann::json::array();
  for (const ApiKeyRecord& k : store.list())
    out.push_back({{"id", k.id}, {"user", k.user}, {"name", k.name}, {"created", k.created}});
  return Response::json({{"keys", std::move(out)}});
}

Response revoke(ApiKeyStore& store, UserKeys& keys, const std::string& id) {
  std::string user;
  for (const ApiKeyRecord& k : store.list())
    if (k.id == id) user = k.user;
  // The store first: a revocation that failed there must not come back at the next start.
  // Both are done before the answer: from then on the key is refused.
  const bool stored = store.remove(id);
  if (!keys.remove(id) && !stored) throw HttpError(http::status::not_found, "Unknown API key id: " + id);
  log::info("keys", "API key {} of user {} revoked", id, user);
  return Response::json({{"id", id}, {"user", user}, {"revoked", static_cast<int64_t>(std::time(nullptr))}});
}

}  // namespace

void add_key_routes(Router& router, const Services& s) {
  if (!s.api_keys || !s.user_keys) return;
  ApiKeyStore& store = *s.api_keys;
  UserKeys& keys = *s.user_keys;
  const RouteOptions admin{.admin = true};
  router.add_async(
      http::verb::post, "/admin/keys",
      offload(s.file_pool, Handler([&store, &keys](const Request& req) { return create(store, keys, req); })), admin);
  router.add_async(http::verb::get, "/admin/keys",
                   offload(s.file_pool, Handler([&store](const Request&) { return list(store); })), admin);
  router.add_async(http::verb::delete_, "/admin/keys/{id}",
                   offload(s.file_pool, Handler([&store, &keys](const Request& req) {
                             return revoke(store, keys, req.param("id"));
                           })),
                   admin);
}

}  // namespace agentbox::api
