#include "mcp/revisions.hpp"

#include <utility>

namespace agentbox::mcp {

using nlohmann::json;

bool is_modern(const std::string& version) { return !version.empty() && version >= kModernVersions.back(); }

RequestRevision revision_of(const http::Request& req, const json& params) {
  RequestRevision r;
  r.header = std::string(req.header("MCP-Protocol-Version").value_or(""));
  if (params.is_object() && params.contains("_meta") && params["_meta"].is_object()) {
    const json& meta = params["_meta"];
    if (meta.contains(kVersionMetaKey) && meta[kVersionMetaKey].is_string()) r.meta = meta[kVersionMetaKey];
  }
  return r;
}

json modern_result(json result, const json& server_info, bool cacheable) {
  result["resultType"] = "complete";
  if (!result.contains("_meta") || !result["_meta"].is_object()) result["_meta"] = json::object();
  result["_meta"][kServerInfoMetaKey] = server_info;
  if (cacheable) {
    result["ttlMs"] = 0;
    result["cacheScope"] = "private";
  }
  return result;
}

}  // namespace agentbox::mcp
