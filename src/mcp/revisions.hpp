#pragma once
// The protocol revisions /mcp speaks and what tells them apart. The 2025 era (2025-11-25 and
// before) opens a session with `initialize`; the modern era (2026-07-28) is stateless: every
// request carries its revision in `_meta` (io.modelcontextprotocol/protocolVersion, with the
// client's capabilities) and in the MCP-Protocol-Version header, `server/discover` replaces
// the handshake, and every result says `resultType` (cacheable ones also ttlMs and cacheScope).
//
// Runs on: any thread (pure functions).
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "http/request.hpp"

namespace agentbox::mcp {

// Newest first.
inline const std::vector<std::string> kLegacyVersions = {"2025-11-25", "2025-06-18", "2025-03-26"};
inline const std::vector<std::string> kModernVersions = {"2026-07-28"};

inline constexpr const char* kVersionMetaKey = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kCapabilitiesMetaKey = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kServerInfoMetaKey = "io.modelcontextprotocol/serverInfo";

// A revision of the modern era (revision ids are ISO dates: they compare as text).
bool is_modern(const std::string& version);

// What a request says of its revision: the header's and the _meta envelope's.
struct RequestRevision {
  std::string header;  // MCP-Protocol-Version, "" when absent
  std::string meta;    // params._meta[kVersionMetaKey], "" when absent
  bool modern() const { return is_modern(header) || is_modern(meta); }
};
RequestRevision revision_of(const http::Request& req, const nlohmann::json& params);

// A modern result: resultType, the server's identity in _meta, and for a cacheable result (a
// list, discover) ttlMs 0 and cacheScope private (each user's box is their own).
nlohmann::json modern_result(nlohmann::json result, const nlohmann::json& server_info, bool cacheable);

}  // namespace agentbox::mcp
