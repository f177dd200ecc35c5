#pragma once
// The [auth] keys of the server config (issue 33): who a request with the shared API key acts as.
//
//   [auth]
//   openwebui_jwt_secret = "..."  # Open WebUI's FORWARD_USER_INFO_HEADER_JWT_SECRET: the user is
//                                 # taken from a valid X-OpenWebUI-User-Jwt (http/openwebui_jwt.hpp)
//   require_jwt = false           # true: the shared key without a valid token is refused (401)
//
// Per-user keys need no configuration: `agentbox keys create USER` (api/keys.hpp).
#include <toml++/toml.h>

#include <array>
#include <string>
#include <string_view>

namespace agentbox {

struct AuthConfig {
  std::string openwebui_jwt_secret;  // "": X-OpenWebUI-User-Jwt is not read
  bool require_jwt = false;          // needs openwebui_jwt_secret
};

inline constexpr std::array<std::string_view, 1> kAuthSections = {"auth"};

// Stores one key the walker found under [auth]; false for a key that is not one of ours.
// Throws Error saying what is wrong with the value.
bool apply_auth_key(AuthConfig& config, std::string_view key, const toml::node& value);

// What is wrong across the keys ("" when nothing): require_jwt without a secret.
std::string check_auth_config(const AuthConfig& config);

}  // namespace agentbox
