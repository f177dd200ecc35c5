#include "config/auth_config.hpp"

#include "config/toml_schema.hpp"
#include "util/error.hpp"

namespace agentbox {

namespace {

// HS256 with a short secret can be brute-forced offline from one token: ask for 32 bytes, as
// RFC 7518 3.2 does for the key of HMAC-SHA256.
constexpr std::size_t kMinSecretBytes = 32;

}  // namespace

bool apply_auth_key(AuthConfig& config, std::string_view key, const toml::node& value) {
  if (key == "auth.openwebui_jwt_secret") {
    config.openwebui_jwt_secret = toml_string(value);
    if (config.openwebui_jwt_secret.size() < kMinSecretBytes)
      throw Error("must be at least " + std::to_string(kMinSecretBytes) + " bytes (openssl rand -hex 32)");
  } else if (key == "auth.require_jwt") {
    const auto* b = value.as_boolean();
    if (!b) throw Error("must be true or false");
    config.require_jwt = b->get();
  } else {
    return false;
  }
  return true;
}

std::string check_auth_config(const AuthConfig& config) {
  if (config.require_jwt && config.openwebui_jwt_secret.empty())
    return "auth.require_jwt is true but auth.openwebui_jwt_secret is not set: no token could be checked";
  return {};
}

}  // namespace agentbox
