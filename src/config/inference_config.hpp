#pragma once
// The inference gateway's keys of the server config (DESIGN §4):
//
//   [inference]            port = 3129  connections = 64  connect_timeout = 10  idle_timeout = 600
//                          request_memory = "32MiB"                 # bodies held per account for a budget check
//   [inference.anthropic]  upstream = "https://api.anthropic.com"   # http:// only to loopback
//                          key_file = "/etc/agentbox/anthropic.key" # an API key or an OAuth token
//                          ca_file = "/etc/agentbox/upstream-ca.pem" # optional, beside the system store
//                          daily_tokens = 0                         # per account; 0 = no budget
//                          context_tokens = 1000000                 # input bound of a request with images...
//
// The credential comes from key_file, else AGENTBOX_ANTHROPIC_API_KEY, else
// AGENTBOX_ANTHROPIC_OAUTH_TOKEN. With none, there is no gateway (and no ANTHROPIC_BASE_URL in
// boxes); a config that names [inference.anthropic] without one is an error at start.
#include <toml++/toml.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "net/inference_upstream.hpp"

namespace agentbox {

struct InferenceConfig {
  uint16_t port = 3129;                      // on each box's 127.0.0.1
  size_t connections = 64;                   // open at once per account; above it 429
  std::chrono::seconds connect_timeout{10};  // resolve, connect and TLS handshake; then 504
  std::chrono::seconds idle_timeout{600};    // no byte moving while a request or answer streams
  uint64_t request_memory = 32 << 20;        // bytes of bodies one account's gateway holds for a budget check

  struct Anthropic {
    bool configured = false;  // the config has an [inference.anthropic] table
    net::UpstreamUrl upstream = net::UpstreamUrl::parse("https://api.anthropic.com");
    std::optional<std::string> key_file;
    std::optional<std::string> ca_file;
    uint64_t daily_tokens = 0;
    uint64_t context_tokens = 1'000'000;  // a request's input bound when its bytes are not one
  } anthropic;
};

inline constexpr std::array<std::string_view, 2> kInferenceSections = {"inference", "inference.anthropic"};

// Stores one key the walker found under those sections; false for a key that is not one of
// ours. Throws Error saying what is wrong with the value.
bool apply_inference_key(InferenceConfig& config, std::string_view key, const toml::node& value);

// The operator's credential, or nullopt when none is configured. A key file is read with
// read_secret_file's checks; a token starting "sk-ant-oat" is an OAuth token. Throws Error.
std::optional<net::Credential> load_anthropic_credential(const InferenceConfig& config,
                                                         const std::function<const char*(const char*)>& getenv);

// Names of the environment variables that may hold it: the daemon clears them once read, so
// no process it starts inherits them.
inline constexpr std::array<const char*, 2> kCredentialVariables = {"AGENTBOX_ANTHROPIC_API_KEY",
                                                                    "AGENTBOX_ANTHROPIC_OAUTH_TOKEN"};

}  // namespace agentbox
