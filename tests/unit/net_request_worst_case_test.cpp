// The worst case a token budget reserves for a Messages API request, read from its body.
#include "net/request_worst_case.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace agentbox::net {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kContext = 200'000;

WorstCase worst(const std::string& body) {
  WorstCaseScan scan = worst_case_tokens(body, kContext);
  EXPECT_TRUE(scan.worst) << scan.refusal << "\n" << body;
  return scan.worst.value_or(WorstCase{});
}

std::string refused(const std::string& body) {
  WorstCaseScan scan = worst_case_tokens(body, kContext);
  EXPECT_FALSE(scan.worst) << body;
  return scan.refusal;
}

TEST(RequestWorstCase, TextIsBoundedByMaxTokensAndTheBodysBytes) {
  const std::string body =
      R"({"model":"claude-x","max_tokens":512,"stream":true,"system":[{"type":"text","text":"Be brief.",)"
      R"("cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"},)"
      R"({"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},)"
      R"({"type":"tool_use","id":"toolu_1","name":"Grep","input":{"type":"py","pattern":"x"}}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ok"}]}]}],)"
      R"("tools":[{"name":"Grep","description":"d","input_schema":{"type":"object","properties":{"type":{"type":"string"}}}}],)"
      R"("tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":256},"metadata":{"user_id":"u"}})";
  WorstCase w = worst(body);
  EXPECT_EQ(w.output, 512u);
  EXPECT_EQ(w.input, body.size() + kPromptAllowance);
  EXPECT_EQ(w.input_bound, "the body's size");
  EXPECT_EQ(w.total(), 512 + body.size() + kPromptAllowance);
}

TEST(RequestWorstCase, ContentThatCostsMoreThanItsBytesIsBoundedByTheContextWindow) {
  const std::string image =
      R"({"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}})";
  for (const auto& [body, why] : std::initializer_list<std::pair<std::string, std::string>>{
           {R"({"max_tokens":8,"messages":[{"role":"user","content":[)" + image + "]}]}", "\"image\""},
           {R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t",)"
            R"("content":[)" +
                image + "]}]}]}",
            "\"image\""},
           {R"({"max_tokens":8,"messages":[{"role":"user","content":[{"type":"document","source":)"
            R"({"type":"url","url":"https://x/a.pdf"}}]}]})",
            "\"document\""},
           {R"({"max_tokens":8,"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]})",
            "\"web_search_20250305\""},
           {R"({"max_tokens":8,"messages":[],"mcp_servers":[{"type":"url","url":"https://x"}]})", "\"mcp_servers\""},
           {R"({"max_tokens":8,"messages":[],"a_feature_to_come":1})", "\"a_feature_to_come\""},
           {R"({"max_tokens":8,"system":[{"type":"something_new"}],"messages":[]})", "\"something_new\""},
       }) {
    WorstCase w = worst(body);
    EXPECT_EQ(w.input, kContext) << body;
    EXPECT_THAT(w.input_bound, HasSubstr(why));
    EXPECT_EQ(w.output, 8u);
  }
}

TEST(RequestWorstCase, MaxTokensReadAsTheUpstreamWouldReadIt) {
  EXPECT_EQ(worst(R"({"max_\u0074okens":77,"messages":[]})").output, 77u);  // an escaped key is the same key
  EXPECT_EQ(worst(R"( { "messages" : [ ] , "max_tokens" : 9 } )").output, 9u);
  EXPECT_EQ(worst(R"({"messages":[{"max_tokens":5}],"max_tokens":3})").output, 3u);  // only the top level's
  EXPECT_EQ(worst(R"({"max_tokens":18446744073709551615,"messages":[]})").total(), UINT64_MAX);
}

TEST(RequestWorstCase, AMaxTokensTheBudgetCannotReadTheSameWayIsRefused) {
  EXPECT_THAT(refused(R"({"messages":[]})"), HasSubstr("no top-level max_tokens"));
  EXPECT_THAT(refused(R"({"messages":[{"max_tokens":5}]})"), HasSubstr("no top-level max_tokens"));
  EXPECT_THAT(refused(R"({"max_tokens":1,"max_tokens":100000})"), HasSubstr("twice"));
  EXPECT_THAT(refused(R"({"max_tokens":1,"max_\u0074okens":100000})"), HasSubstr("twice"));
  for (std::string value :
       {"1e5", "100.0", "-1", "\"100\"", "null", "true", "[1]", "{\"n\":1}", "18446744073709551616"})
    EXPECT_THAT(refused(R"({"max_tokens":)" + value + "}"), HasSubstr("whole number")) << value;
  EXPECT_THAT(refused(R"({"max_tokens":1e400})"), HasSubstr("agentbox: "));  // out of range: not read
}

TEST(RequestWorstCase, WhatIsNotAJsonObjectIsRefused) {
  for (std::string body :
       {"", "[]", "1", "\"x\"", "null", "{", "{\"max_tokens\":1", "{\"max_tokens\":1}x", "{\"max_tokens\":1}{}",
        "{\"max_tokens\":1,}", "{'max_tokens':1}", "{\"max_tokens\":1 /* c */}", "{\"a\":\"\xff\",\"max_tokens\":1}"})
    EXPECT_THAT(refused(body), HasSubstr("agentbox: the request body")) << body;
}

TEST(RequestWorstCase, DeepNestingIsRefusedNotFollowed) {
  std::string deep = "{\"max_tokens\":1,\"x\":" + std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']') + "}";
  EXPECT_THAT(refused(deep), HasSubstr("nested deeper than"));
  std::string very = "{\"x\":" + std::string(1 << 20, '[');
  EXPECT_THAT(refused(very), HasSubstr("nested deeper than"));
  std::string fine =
      "{\"max_tokens\":1,\"x\":" + std::string(kMaxDepth - 2, '[') + std::string(kMaxDepth - 2, ']') + "}";
  EXPECT_EQ(worst(fine).output, 1u);
}

}  // namespace
}  // namespace agentbox::net
