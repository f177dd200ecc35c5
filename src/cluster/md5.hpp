#pragma once
// MD5 (RFC 1321), for one thing: the router's pins map is keyed by the md5 of a user id, because
// nginx's set_md5 (set-misc) is how nginx keys a map by any bytes (cluster/nginx_conf.hpp). Not
// for anything that needs a secure hash. Ours rather than OpenSSL's so that the static
// `agentbox`, which writes that map, links no crypto library: libcrypto's start-up (CPU feature
// probes, each a trap to the hypervisor on a VM) would be paid by every `agentbox run`.
#include <array>
#include <cstdint>
#include <string_view>

namespace agentbox::cluster {

using Md5Digest = std::array<uint8_t, 16>;

Md5Digest md5(std::string_view bytes);

}  // namespace agentbox::cluster
