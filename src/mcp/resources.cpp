#include "mcp/resources.hpp"

#include <boost/beast/core/detail/base64.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request.hpp"
#include "mcp/jsonrpc.hpp"
#include "mcp/tool_table.hpp"
#include "util/utf8.hpp"

namespace agentbox::mcp {

namespace {

using nlohmann::json;

constexpr int kListLimit = 500;  // the glob route's most matches
constexpr std::string_view kScheme = "file://";

// The REST requests the resources are: not model tools, so not in the tool table.
Tool route_of(std::string name, std::string pattern, std::vector<std::string> query) {
  Tool t;
  t.name = std::move(name);
  t.method = http::verb::get;
  t.pattern = std::move(pattern);
  t.query_args = std::move(query);
  return t;
}

const Tool& glob_route() {
  static const Tool t = route_of("resources/list", "/files/glob", {"pattern", "path", "type", "max_results"});
  return t;
}

const Tool& view_route() {
  static const Tool t = route_of("resources/read", "/files/view", {"path"});
  return t;
}

std::string detail_of(const http::Response& r) {
  auto parsed = json::parse(r.body, nullptr, false);
  if (parsed.is_object() && parsed.contains("detail") && parsed["detail"].is_string())
    return parsed["detail"].get<std::string>();
  return r.body;
}

// A route's error as the outcome MCP names: what the caller cannot reach is not found.
RpcOutcome failure(const http::Response& r) {
  const unsigned code = static_cast<unsigned>(r.status);
  if (code == 404 || code == 403) return {nullptr, kResourceNotFound, "Resource not found: " + detail_of(r)};
  if (code < 500) return {nullptr, kInvalidParams, detail_of(r)};
  return {nullptr, kInternalError, detail_of(r)};
}

// The total size from "bytes 0-N/TOTAL", when there is one.
std::optional<std::uint64_t> total_of(std::string_view content_range) {
  auto slash = content_range.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::uint64_t total = 0;
  auto tail = content_range.substr(slash + 1);
  if (std::from_chars(tail.data(), tail.data() + tail.size(), total).ec != std::errc()) return std::nullopt;
  return total;
}

}  // namespace

std::string file_uri_of(std::string_view path) { return std::string(kScheme) + http::percent_encode(path, "/"); }

std::optional<std::string> path_of_file_uri(std::string_view uri) {
  if (!uri.starts_with(kScheme)) return std::nullopt;
  uri.remove_prefix(kScheme.size());
  if (uri.starts_with("localhost/")) uri.remove_prefix(std::string_view("localhost").size());
  // A query or fragment is no part of a file's name (an escaped ? or # is).
  if (!uri.starts_with('/') || uri.find_first_of("?#") != std::string_view::npos) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < uri.size(); ++i) {
    if (uri[i] != '%') {
      out += uri[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= uri.size() ||
        std::from_chars(uri.data() + i + 1, uri.data() + i + 3, value, 16).ptr != uri.data() + i + 3)
      return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  if (out.find('\0') != std::string::npos) return std::nullopt;
  return out;
}

bool is_resource_method(const std::string& method) {
  return method == "resources/list" || method == "resources/read" || method == "resources/templates/list";
}

json resource_capabilities() { return {{"subscribe", false}, {"listChanged", false}}; }

json resource_templates() {
  return {{"resourceTemplates",
           json::array({{{"uriTemplate", "file:///{path}"},
                         {"name", "file"},
                         {"title", "A file of yours"},
                         {"description",
                          "Any file in your home directory by its absolute path, e.g. file:///home/you/notes.md."}}})}};
}

void list_resources(const http::Router& router, const json& params, const CallerContext& caller, OutcomeSink done) {
  int offset = 0;
  if (params.contains("cursor") && !params["cursor"].is_null()) {
    const json& cursor = params["cursor"];
    std::string text = cursor.is_string() ? cursor.get<std::string>() : "";
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), offset);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || offset < 0 || offset >= kListLimit) {
      done({nullptr, kInvalidParams, "Invalid cursor"});
      return;
    }
  }
  const int want = std::min(kListLimit, offset + kResourcePage);
  json args = {{"pattern", "**"}, {"path", "~"}, {"type", "file"}, {"max_results", want}};
  call_route(router, glob_route(), args, caller, [offset, want, done = std::move(done)](http::Response r) {
    auto parsed = json::parse(r.body, nullptr, false);
    if (static_cast<unsigned>(r.status) >= 400 || !parsed.is_object()) {
      done(failure(r));
      return;
    }
    const std::string home = parsed.value("path", "");
    const json matches = parsed.value("matches", json::array());
    json resources = json::array();
    for (size_t i = static_cast<size_t>(offset); i < matches.size(); ++i) {
      const std::string rel = matches[i].value("path", "");
      resources.push_back(
          {{"uri", file_uri_of(home + "/" + rel)}, {"name", rel}, {"size", matches[i].value("size", 0)}});
    }
    json result = {{"resources", std::move(resources)}};
    // More beyond this page, within what the glob route lists.
    if (parsed.value("truncated", false) && want < kListLimit) result["nextCursor"] = std::to_string(want);
    done({std::move(result)});
  });
}

void read_resource(const http::Router& router, const json& params, const CallerContext& caller, OutcomeSink done) {
  const std::string uri = params.contains("uri") && params["uri"].is_string() ? params["uri"].get<std::string>() : "";
  std::optional<std::string> path = path_of_file_uri(uri);
  if (!path) {
    done({nullptr, kInvalidParams, "Not a file:// URI of an absolute path: " + uri});
    return;
  }
  // One byte past the limit says whether the file is larger, without reading all of it.
  CallerContext ranged = caller;
  ranged.headers.set(http::field::range, "bytes=0-" + std::to_string(kResourceReadLimit));
  call_route(router, view_route(), {{"path", *path}}, ranged, [uri, done = std::move(done)](http::Response r) {
    const unsigned code = static_cast<unsigned>(r.status);
    if (code == 416) {  // an empty file has no first byte to range over
      r.body.clear();
      r.headers.erase(http::field::content_type);
      r.headers.erase(http::field::content_range);
    } else if (code >= 400) {
      return done(failure(r));
    }
    std::uint64_t size = r.body.size();
    if (auto range = r.headers.find(http::field::content_range); range != r.headers.end())
      size = total_of(range->value()).value_or(size);
    if (size > kResourceReadLimit) {
      done({nullptr, kInvalidParams,
            "The file is " + std::to_string(size) + " bytes, more than a resource's " +
                std::to_string(kResourceReadLimit) + ": read it in parts with read_file"});
      return;
    }
    std::string type = "application/octet-stream";
    if (auto t = r.headers.find(http::field::content_type); t != r.headers.end()) type = std::string(t->value());
    json content = {{"uri", uri}, {"mimeType", type}};
    if (is_valid_utf8(r.body) && (type.starts_with("text/") || r.body.find('\0') == std::string::npos)) {
      content["text"] = std::move(r.body);
    } else {
      std::string blob(boost::beast::detail::base64::encoded_size(r.body.size()), '\0');
      blob.resize(boost::beast::detail::base64::encode(blob.data(), r.body.data(), r.body.size()));
      content["blob"] = std::move(blob);
    }
    json result = {{"contents", json::array({std::move(content)})}};
    done({std::move(result)});
  });
}

}  // namespace agentbox::mcp
