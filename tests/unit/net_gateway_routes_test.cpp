// The routes the inference gateway forwards with the operator's credential: the model API and
// nothing else, matched by exact method and path, with no encoding or dot segment to hide in.
#include "net/gateway_routes.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentbox::net {
namespace {

using ::testing::HasSubstr;

const GatewayRoute* route(std::string_view method, std::string_view target) {
  return match_gateway_route(method, target).route;
}

std::string refusal(std::string_view method, std::string_view target) {
  RouteMatch m = match_gateway_route(method, target);
  EXPECT_EQ(m.route, nullptr) << method << " " << target;
  return m.refusal;
}

TEST(GatewayRoutes, TheModelApiTheCliUsesIsForwarded) {
  ASSERT_NE(route("POST", "/v1/messages"), nullptr);
  EXPECT_TRUE(route("POST", "/v1/messages")->spends_tokens);
  EXPECT_NE(route("POST", "/v1/messages?beta=true"), nullptr);
  ASSERT_NE(route("POST", "/v1/messages/count_tokens?beta=true"), nullptr);
  EXPECT_FALSE(route("POST", "/v1/messages/count_tokens?beta=true")->spends_tokens);
  EXPECT_NE(route("GET", "/v1/models"), nullptr);
  EXPECT_NE(route("GET", "/v1/models?limit=20&after_id=claude-x"), nullptr);
  EXPECT_NE(route("POST", "/v1/messages?"), nullptr);  // an empty query is no query
}

TEST(GatewayRoutes, WhatElseTheCredentialOpensIsRefusedSayingWhy) {
  for (auto [method, target] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"POST", "/api/oauth/claude_cli/create_api_key"},
           {"GET", "/api/oauth/profile"},
           {"GET", "/v1/files"},
           {"GET", "/v1/files/file_011abc"},
           {"DELETE", "/v1/files/file_011abc"},
           {"GET", "/v1/files/file_011abc/content"},
           {"POST", "/v1/messages/batches"},
           {"GET", "/v1/messages/batches/msgbatch_01/results"},
           {"DELETE", "/v1/messages/batches/msgbatch_01"},
           {"POST", "/v1/complete"},
           {"GET", "/v1/models/claude-x"},  // not sent by the CLI
       }) {
    std::string why = refusal(method, target);
    EXPECT_THAT(why, HasSubstr("forwards only the model API")) << target;
    EXPECT_THAT(why, HasSubstr("POST /v1/messages")) << target;  // what is forwarded, for the reader
  }
}

TEST(GatewayRoutes, AnotherMethodOnAModelRouteIsRefused) {
  for (std::string_view method : {"GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "post", "POSTX"})
    EXPECT_THAT(refusal(method, "/v1/messages"), HasSubstr("forwards only the model API")) << method;
  EXPECT_EQ(route("POST", "/v1/models"), nullptr);
  EXPECT_EQ(route("DELETE", "/v1/models"), nullptr);
}

TEST(GatewayRoutes, DotSegmentsAreRefusedRawAndNoEncodingGetsThrough) {
  for (std::string_view target : {"/v1/messages/../files", "/v1/messages/..", "/v1/./messages", "/v1/models/..",
                                  "/v1/models/./", "/../v1/messages", "/v1/messages/../../api/oauth/profile"})
    EXPECT_THAT(refusal("POST", target), HasSubstr("'.' or '..' segment")) << target;
  for (std::string_view target :
       {"/v1/messages/%2e%2e/files", "/v1/messages/%2E%2E/files", "/v1/messages/.%2e/files", "/v1/messages/%252e%252e",
        "/v1/messages%2f..%2ffiles", "/v1/messages%2F..%2Ffiles", "/v1/%6dessages", "/v1/messages%00", "/v1/messages%",
        "/v1/messages%25252e", "/v1/models/%2e%2e", "/v1/messages\\..\\files", "/v1/messages;/../files",
        "/v1/messages/..;/files", "/v1/models/claude@x", "/v1/messages#frag"})
    EXPECT_THAT(refusal("POST", target), HasSubstr("no percent-encoding")) << target;
  EXPECT_THAT(refusal("POST", "/v1//messages"), HasSubstr("empty segment"));
  EXPECT_THAT(refusal("POST", "/v1/messages/"), HasSubstr("empty segment"));
  EXPECT_THAT(refusal("POST", "//v1/messages"), HasSubstr("empty segment"));
  EXPECT_THAT(refusal("GET", "/"), HasSubstr("empty segment"));
}

TEST(GatewayRoutes, OnlyTheQueryARouteListsWithPlainValues) {
  EXPECT_THAT(refusal("POST", "/v1/messages?beta=true&x=1"), HasSubstr("no query parameter \"x=1\""));
  EXPECT_THAT(refusal("POST", "/v1/messages?beta=%2e%2e"), HasSubstr("no query parameter"));
  EXPECT_THAT(refusal("POST", "/v1/messages?limit=1"), HasSubstr("no query parameter"));  // GET /v1/models's
  EXPECT_THAT(refusal("POST", "/v1/messages?=x"), HasSubstr("no query parameter"));
  EXPECT_THAT(refusal("POST", "/v1/messages?beta=a/b"), HasSubstr("no query parameter"));
  EXPECT_NE(route("POST", "/v1/messages?beta"), nullptr);
  EXPECT_NE(route("POST", "/v1/messages?beta=true&&beta=true&"), nullptr);
}

TEST(GatewayRoutes, NotAPathIsRefused) {
  EXPECT_THAT(refusal("POST", "v1/messages"), HasSubstr("only a path"));
  EXPECT_THAT(refusal("POST", ""), HasSubstr("only a path"));
  EXPECT_THAT(refusal("OPTIONS", "*"), HasSubstr("only a path"));
}

TEST(GatewayRoutes, ALongTargetIsShownShortened) {
  std::string target = "/v1/files/" + std::string(5000, 'a');
  EXPECT_LT(refusal("GET", target).size(), 600u);
}

}  // namespace
}  // namespace agentbox::net
