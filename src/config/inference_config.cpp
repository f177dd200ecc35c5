#include "config/inference_config.hpp"

#include "config/secret_file.hpp"
#include "config/toml_schema.hpp"
#include "util/error.hpp"

namespace agentbox {

namespace {

constexpr std::string_view kOAuthPrefix = "sk-ant-oat";

// A credential is one printable token: a newline or space inside is a pasting mistake that
// would otherwise reach the upstream as a malformed header.
net::Credential credential_from(std::string text, std::string_view source, std::optional<net::Credential::Kind> kind) {
  if (text.empty()) throw Error(std::string(source) + ": empty");
  for (unsigned char c : text)
    if (c <= ' ' || c >= 0x7f) throw Error(std::string(source) + ": holds a space or a control character");
  net::Credential credential;
  credential.kind = kind.value_or(text.starts_with(kOAuthPrefix) ? net::Credential::Kind::oauth_token
                                                                 : net::Credential::Kind::api_key);
  credential.secret = std::move(text);
  return credential;
}

}  // namespace

bool apply_inference_key(InferenceConfig& config, std::string_view key, const toml::node& value) {
  if (key == "inference.port") {
    config.port = static_cast<uint16_t>(toml_integer(value, 1, 65535));
  } else if (key == "inference.connections") {
    config.connections = static_cast<size_t>(toml_integer(value, 1, 65536));
  } else if (key == "inference.connect_timeout") {
    config.connect_timeout = toml_seconds(value);
  } else if (key == "inference.idle_timeout") {
    config.idle_timeout = toml_seconds(value);
  } else if (key == "inference.request_memory") {
    config.request_memory = toml_size(value);
    if (config.request_memory < (64 << 10))
      throw Error("at least 64 KiB (a request body is held whole for a budget check)");
  } else if (key.starts_with("inference.anthropic.")) {
    std::string_view name = key.substr(std::string_view("inference.anthropic.").size());
    InferenceConfig::Anthropic& a = config.anthropic;
    if (name == "upstream")
      a.upstream = net::UpstreamUrl::parse(toml_string(value));
    else if (name == "key_file")
      a.key_file = toml_string(value);
    else if (name == "ca_file")
      a.ca_file = toml_string(value);
    else if (name == "daily_tokens")
      a.daily_tokens = static_cast<uint64_t>(toml_integer(value, 0, INT64_MAX));
    else if (name == "context_tokens")
      a.context_tokens = static_cast<uint64_t>(toml_integer(value, 1, INT64_MAX));
    else
      return false;
    a.configured = true;
  } else {
    return false;
  }
  return true;
}

std::optional<net::Credential> load_anthropic_credential(const InferenceConfig& config,
                                                         const std::function<const char*(const char*)>& getenv) {
  if (config.anthropic.key_file) {
    const std::string& path = *config.anthropic.key_file;
    std::optional<std::string> text = read_secret_file(path, /*missing_ok=*/false);
    return credential_from(std::move(*text), "inference.anthropic.key_file " + path, std::nullopt);
  }
  if (const char* key = getenv("AGENTBOX_ANTHROPIC_API_KEY"); key && *key)
    return credential_from(key, "AGENTBOX_ANTHROPIC_API_KEY", net::Credential::Kind::api_key);
  if (const char* token = getenv("AGENTBOX_ANTHROPIC_OAUTH_TOKEN"); token && *token)
    return credential_from(token, "AGENTBOX_ANTHROPIC_OAUTH_TOKEN", net::Credential::Kind::oauth_token);
  if (config.anthropic.configured)
    throw Error(
        "inference.anthropic: no credential: set key_file, or AGENTBOX_ANTHROPIC_API_KEY or "
        "AGENTBOX_ANTHROPIC_OAUTH_TOKEN in the daemon's environment");
  return std::nullopt;
}

}  // namespace agentbox
