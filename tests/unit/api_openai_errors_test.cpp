// The /v1 error shape (api/openai_errors.hpp) row by row: the status OpenAI's clients get, and a
// body they parse as {"error": {"message", "type", "param", "code"}}, headers kept.
#include "api/openai_errors.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace agentbox::api {
namespace {

struct Row {
  http::status in;
  std::string code_in;
  unsigned status;
  std::string type;
  std::string code;
};

TEST(OpenAiErrors, EachStatusBecomesOpenAisShape) {
  const Row rows[] = {
      {http::status::bad_request, "", 400, "invalid_request_error", "invalid_request"},
      {http::status::unprocessable_entity, "", 400, "invalid_request_error", "invalid_request"},
      {http::status::unauthorized, "", 401, "invalid_request_error", "invalid_api_key"},
      {http::status::forbidden, "", 403, "permission_error", "permission_denied"},
      {http::status::not_found, "model_not_found", 404, "invalid_request_error", "model_not_found"},
      {http::status::not_found, "", 404, "invalid_request_error", "not_found"},
      {http::status::method_not_allowed, "", 405, "invalid_request_error", "method_not_allowed"},
      {http::status::payload_too_large, "", 413, "invalid_request_error", "request_too_large"},
      {http::status::too_many_requests, "", 429, "rate_limit_error", "rate_limit_exceeded"},
      {http::status::internal_server_error, "", 500, "server_error", "internal_server_error"},
      {http::status::service_unavailable, "", 503, "server_error", "service_unavailable"},
      {http::status::conflict, "", 409, "invalid_request_error", "invalid_request"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(std::to_string(static_cast<unsigned>(row.in)));
    http::Response r = http::error_response(row.in, "what went wrong", row.code_in);
    r.headers.set(http::field::retry_after, "7");
    shape_openai_error(r);
    EXPECT_EQ(static_cast<unsigned>(r.status), row.status);
    const auto body = nlohmann::json::parse(r.body);
    ASSERT_EQ(body.size(), 1u) << r.body;
    const auto& e = body.at("error");
    EXPECT_EQ(e.at("message"), "what went wrong");
    EXPECT_EQ(e.at("type"), row.type);
    EXPECT_EQ(e.at("code"), row.code);
    EXPECT_TRUE(e.at("param").is_null());
    EXPECT_EQ(r.headers[http::field::content_type], "application/json");
    EXPECT_EQ(r.headers[http::field::retry_after], "7");
  }
}

TEST(OpenAiErrors, AnAnswerThatIsNoErrorIsLeftAlone) {
  http::Response r = http::Response::json({{"detail", "mine"}}, http::status::bad_request);
  shape_openai_error(r);
  EXPECT_EQ(r.body, R"({"detail":"mine"})");
}

}  // namespace
}  // namespace agentbox::api
