// mcp/tool_table and mcp/sessions: the MCP tools are /openapi.json's operations (one table), and a
// session answers only the user who opened it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

#include "api/openapi.hpp"
#include "mcp/resources.hpp"
#include "mcp/revisions.hpp"
#include "mcp/sessions.hpp"
#include "mcp/tool_call.hpp"
#include "mcp/tool_table.hpp"

namespace agentbox::mcp {
namespace {

using nlohmann::json;

const Tool& find(const std::vector<Tool>& tools, const std::string& name) {
  for (const Tool& t : tools)
    if (t.name == name) return t;
  throw std::runtime_error("no tool " + name);
}

TEST(McpToolTable, EveryOperationOfTheOpenApiDocumentIsATool) {
  json doc = api::openapi_document("test");
  std::set<std::string> ops;
  for (const auto& [path, methods] : doc["paths"].items())
    for (const auto& [method, op] : methods.items())
      if (op.contains("operationId")) ops.insert(op["operationId"].get<std::string>());
  std::set<std::string> names;
  for (const Tool& t : tools_of(doc)) names.insert(t.name);
  EXPECT_EQ(names, ops);
  EXPECT_TRUE(names.count("run_command"));
  // Documented for the front end without an operationId, so no tool: the model does not delete
  // the chat it works in (api/openapi.cpp).
  ASSERT_TRUE(doc["paths"].contains("/workspaces/{context}"));
  EXPECT_FALSE(doc["paths"]["/workspaces/{context}"]["delete"].contains("operationId"));
  for (const Tool& t : tools_of(doc)) EXPECT_NE(t.pattern, "/workspaces/{context}");
}

TEST(McpToolTable, ArgumentsKeepWhereTheRestRequestTakesThem) {
  auto tools = tools_of(api::openapi_document("test"));
  const Tool& run = find(tools, "run_command");
  EXPECT_EQ(run.method, http::verb::post);
  EXPECT_EQ(run.pattern, "/execute");
  EXPECT_EQ(run.query_args, (std::vector<std::string>{"wait", "tail"}));
  EXPECT_TRUE(std::find(run.body_args.begin(), run.body_args.end(), "command") != run.body_args.end());
  EXPECT_EQ(run.input_schema["required"], json::array({"command"}));
  EXPECT_EQ(run.input_schema["properties"]["wait"]["maximum"], 300);
  EXPECT_EQ(run.input_schema["additionalProperties"], false);

  const Tool& status = find(tools, "get_process_status");
  EXPECT_EQ(status.path_args, std::vector<std::string>{"id"});
  EXPECT_EQ(status.input_schema["required"], json::array({"id"}));
}

TEST(McpToolTable, ReferencesBecomeDefsOfTheToolsOwnSchema) {
  auto tools = tools_of(api::openapi_document("test"));
  const Tool& replace = find(tools, "replace_file_content");
  std::string text = replace.input_schema.dump();
  EXPECT_EQ(text.find("#/components/"), std::string::npos) << text;
  EXPECT_EQ(replace.input_schema["properties"]["replacements"]["items"]["$ref"], "#/$defs/Replacement");
  EXPECT_TRUE(replace.input_schema["$defs"].contains("Replacement"));
  EXPECT_FALSE(replace.input_schema["$defs"].contains("ReplaceRequest"));  // inlined as the tool's object
}

TEST(McpToolTable, RunCommandWaitsThirtySecondsUnlessTold) {
  auto tools = tools_of(api::openapi_document("test"));
  const Tool& run = find(tools, "run_command");
  const json& wait = run.input_schema["properties"]["wait"];
  EXPECT_EQ(wait["default"], kRunCommandDefaultWait);
  EXPECT_NE(wait["description"].get<std::string>().find("Default 30"), std::string::npos) << wait.dump();
  EXPECT_EQ(run.defaults, json({{"wait", kRunCommandDefaultWait}}));
  // Only run_command's: a status poll without wait still answers at once, as the REST route.
  EXPECT_EQ(find(tools, "get_process_status").defaults, json::object());
  EXPECT_FALSE(find(tools, "get_process_status").input_schema["properties"]["wait"].contains("default"));
}

// The query a call of run_command reaches the route with (a stand-in route that echoes it).
std::string wait_sent(const json& arguments) {
  auto tools = tools_of(api::openapi_document("test"));
  http::Router router;
  router.add(http::verb::post, "/execute", [](const http::Request& req) {
    return http::Response::json({{"wait", req.query_param("wait").value_or("absent")}});
  });
  std::string got = "not answered";
  call_tool(
      router, find(tools, "run_command"), arguments, CallerContext{}, std::nullopt, nullptr,
      [](const json&) { return true; }, [&](json result) { got = result["structuredContent"].value("wait", "none"); });
  return got;
}

TEST(McpToolCall, ACallWithoutWaitGetsTheDefaultAndAGivenOneIsKept) {
  EXPECT_EQ(wait_sent({{"command", "true"}}), "30");
  EXPECT_EQ(wait_sent({{"command", "true"}, {"wait", nullptr}}), "30");
  EXPECT_EQ(wait_sent({{"command", "true"}, {"wait", 0}}), "0");
  EXPECT_EQ(wait_sent({{"command", "true"}, {"wait", 5}}), "5");
}

TEST(McpResources, AFileUriIsTheBoxPathEncodedAndBack) {
  EXPECT_EQ(file_uri_of("/home/a/x y/ü.txt"), "file:///home/a/x%20y/%C3%BC.txt");
  EXPECT_EQ(path_of_file_uri(file_uri_of("/home/a/x y/ü.txt")), "/home/a/x y/ü.txt");
  EXPECT_EQ(path_of_file_uri(file_uri_of("/home/a/what?#100%")), "/home/a/what?#100%");
  EXPECT_EQ(path_of_file_uri("file://localhost/home/a/b"), "/home/a/b");
  EXPECT_EQ(path_of_file_uri("file:///home/a/%2e%2e/b"), "/home/a/../b") << "the route refuses what leaves the home";
  for (const char* bad : {"http://x/y", "file://host/y", "file:relative", "file:///a%2", "file:///a%zz",
                          "file:///a%00b", "file:///a?b", "file:///a#b"})
    EXPECT_EQ(path_of_file_uri(bad), std::nullopt) << bad;
}

TEST(McpSessions, ASessionAnswersOnlyTheUserWhoOpenedIt) {
  Sessions sessions;
  std::string id = sessions.open("alice");
  EXPECT_EQ(id.size(), 32u);
  EXPECT_TRUE(sessions.belongs(id, "alice"));
  EXPECT_FALSE(sessions.belongs(id, "bob"));
  EXPECT_FALSE(sessions.close(id, "bob"));
  EXPECT_TRUE(sessions.belongs(id, "alice"));
  EXPECT_TRUE(sessions.close(id, "alice"));
  EXPECT_FALSE(sessions.belongs(id, "alice"));
  EXPECT_FALSE(sessions.close(id, "alice"));
}

TEST(McpSessions, AtCapacityTheLeastRecentlyUsedGoes) {
  Sessions sessions(2);
  std::string a = sessions.open("u");
  std::string b = sessions.open("u");
  EXPECT_TRUE(sessions.belongs(a, "u"));  // a is now the more recent
  std::string c = sessions.open("u");
  EXPECT_TRUE(sessions.belongs(a, "u"));
  EXPECT_FALSE(sessions.belongs(b, "u"));
  EXPECT_TRUE(sessions.belongs(c, "u"));
}

TEST(McpRevisions, TheModernEraIsTheRevisionsFrom2026_07_28) {
  EXPECT_TRUE(is_modern("2026-07-28"));
  EXPECT_TRUE(is_modern("2027-01-01"));
  EXPECT_FALSE(is_modern("2025-11-25"));
  EXPECT_FALSE(is_modern(""));
}

TEST(McpRevisions, AModernResultSaysItIsCompleteWhoAnsweredAndHowLongToKeepIt) {
  json info = {{"name", "agentbox"}, {"version", "1"}};
  json list = modern_result({{"tools", json::array()}}, info, /*cacheable=*/true);
  EXPECT_EQ(list["resultType"], "complete");
  EXPECT_EQ(list["_meta"][kServerInfoMetaKey], info);
  EXPECT_EQ(list["ttlMs"], 0);
  EXPECT_EQ(list["cacheScope"], "private");
  json call = modern_result({{"content", json::array()}}, info, /*cacheable=*/false);
  EXPECT_FALSE(call.contains("ttlMs"));
  EXPECT_EQ(call["resultType"], "complete");
}

}  // namespace
}  // namespace agentbox::mcp
