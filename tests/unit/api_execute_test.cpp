// The /execute routes' request checks, handlers called directly in memory (support/route_caller.hpp):
// each malformed request is answered with its documented status and detail (docs/API.md: 400
// for a body that is not JSON or a NUL byte, 413 for a command too large to start, 422 for a
// field or parameter of the wrong shape; unknown fields ignored) before anything is made for it:
// no account, no home, and no box or process table (the services hold none here, so a request
// that got past its checks to them would crash the test). A request that passes its checks
// goes on to its caller: a user the node refuses (being restored) shows where that step is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "accounts/directory.hpp"
#include "accounts/restore_gate.hpp"
#include "api/errors.hpp"
#include "api/execute.hpp"
#include "api/services.hpp"
#include "store/schema.hpp"
#include "support/route_caller.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::RouteReply;
using ::testing::StartsWith;

constexpr char kRestoring[] = "being-restored";  // a user the node refuses (503) while its restore runs

class ExecuteChecksTest : public ::testing::Test {
 protected:
  ExecuteChecksTest() {
    gate_.begin("restored-home", kRestoring);
    Services s;
    s.accounts = &accounts_;
    s.callers = &callers_;
    // s.boxes and s.processes stay null: no check may need them.
    Router router;
    router.map_errors(error_map);  // as register_routes does: the daemon's map of errors to statuses
    add_execute_routes(router, s);
    routes_ = std::make_unique<testing::RouteCaller>(std::move(router));
  }

  static std::vector<std::pair<std::string, std::string>> as(const std::string& user) {
    return {{"X-User-Id", user}, {"X-Session-Id", "chat-1"}};
  }
  RouteReply post_execute(const std::string& body, const std::string& query = "", const std::string& user = "val") {
    return routes_->post("/execute" + query, body, as(user));
  }

  // Nothing was made for a refused request: no account, no home.
  void expect_nothing_made() {
    EXPECT_TRUE(accounts_.list().empty()) << "a request refused by its checks must make no account";
    EXPECT_TRUE(std::filesystem::is_empty(dir_.path() + "/volumes")) << "nor a home";
  }

  testing::ScratchDir dir_{"abx-exec-checks"};
  AccountStore accounts_{open_state_db(dir_.path()), UidRange{4300000, 1000}};
  accounts::RestoreGate gate_{dir_.path() + "/restoring"};
  accounts::AccountDirectory callers_{accounts_, dir_.path(), {}, nullptr, {.restoring = &gate_}};
  std::unique_ptr<testing::RouteCaller> routes_;
};

// ---------------------------------------------------------------- POST /execute: the body

TEST_F(ExecuteChecksTest, BodiesOfTheWrongShapeAre422NamingTheField) {
  const std::pair<json, std::string> cases[] = {
      {json::object(), "Field 'command' is required and must be a string"},
      {{{"command", 5}}, "Field 'command' is required and must be a string"},
      {{{"command", nullptr}}, "Field 'command' is required and must be a string"},
      {{{"command", {"ls"}}}, "Field 'command' is required and must be a string"},
      {{{"command", ""}}, "Field 'command' must not be empty"},
      {{{"command", "x"}, {"env", "A=1"}}, "Field 'env' must be an object of strings"},
      {{{"command", "x"}, {"env", {{"A", 1}}}}, "Field 'env': value of 'A' must be a string"},
      {{{"command", "x"}, {"env", {{"A=B", "1"}}}}, "Field 'env': 'A=B' is not a valid variable"},
      {{{"command", "x"}, {"env", {{"", "1"}}}}, "Field 'env': '' is not a valid variable"},
      {{{"command", "x"}, {"timeout", -1}}, "Field 'timeout' must be a number of seconds above 0 and at most 86400"},
      {{{"command", "x"}, {"timeout", 0}}, "Field 'timeout' must be a number of seconds above 0 and at most 86400"},
      {{{"command", "x"}, {"timeout", 86401}}, "Field 'timeout' must be a number of seconds above 0 and at most 86400"},
      {{{"command", "x"}, {"timeout", "5"}}, "Field 'timeout' must be a number of seconds above 0 and at most 86400"},
      {{{"command", "x"}, {"pty", "yes"}}, "Field 'pty' must be a boolean"},
      {{{"command", "x"}, {"cwd", 5}}, "Field 'cwd' must be a string"},
      {{{"command", "x"}, {"stdin", 5}}, "Field 'stdin' must be a string"},
      {json::array(), "Request body must be a JSON object"},
      {"echo", "Request body must be a JSON object"},
      {5, "Request body must be a JSON object"},
  };
  for (const auto& [body, detail] : cases) {
    RouteReply r = post_execute(body.dump());
    ASSERT_TRUE(r.answered) << body;
    EXPECT_EQ(r.code(), 422u) << body;
    EXPECT_EQ(r.detail(), detail) << body;
  }
  expect_nothing_made();
}

TEST_F(ExecuteChecksTest, BodiesThatAreNotJsonAre400) {
  const std::string bodies[] = {"{",
                                "",
                                "nul",
                                R"({"command": "x",})",
                                "{'command': 'x'}",
                                R"({"command": "x"} trailing)",
                                "{\"command\": \"echo \xff\xfe\"}"};
  for (const std::string& raw : bodies) {
    RouteReply r = post_execute(raw);
    EXPECT_EQ(r.code(), 400u) << raw;
    EXPECT_THAT(r.detail(), StartsWith("Invalid JSON body: ")) << raw;
  }
  RouteReply overflow = post_execute(R"({"command": "true", "timeout": 1e309})");
  EXPECT_EQ(overflow.code(), 400u);
  EXPECT_THAT(overflow.detail(), StartsWith("Invalid JSON body: number overflow"));
  expect_nothing_made();
}

TEST_F(ExecuteChecksTest, ANulByteInTheCommandIs400) {
  RouteReply r = post_execute(json{{"command", std::string("echo a\0b", 8)}}.dump());
  EXPECT_EQ(r.code(), 400u);
  EXPECT_EQ(r.detail(), "Field 'command' contains a NUL byte");
  r = post_execute(json{{"command", "true"}, {"env", {{"A", std::string("a\0b", 3)}}}}.dump());
  EXPECT_EQ(r.code(), 422u) << "a NUL in the environment is a variable no process can hold";
  EXPECT_EQ(r.detail(), "Field 'env': 'A' is not a valid variable");
  expect_nothing_made();
}

TEST_F(ExecuteChecksTest, ACommandOrEnvironmentTooLargeToStartIs413) {
  RouteReply r = post_execute(json{{"command", ": " + std::string(300 << 10, 'y')}}.dump());
  EXPECT_EQ(r.code(), 413u);
  EXPECT_EQ(r.detail(), "Field 'command' is 307202 bytes; the limit is 131072 (write a script file and run that)");
  r = post_execute(json{{"command", "true"}, {"env", {{"BIG", std::string(300 << 10, 'v')}}}}.dump());
  EXPECT_EQ(r.code(), 413u);
  EXPECT_EQ(r.detail(), "Field 'env' is 307205 bytes; the limit is 131072");
  // Exactly at the limit is a command, not an error: it goes on to its caller (refused here).
  r = post_execute(json{{"command", std::string(128 << 10, 'y')}}.dump(), "", kRestoring);
  EXPECT_EQ(r.code(), 503u) << r.detail();
  expect_nothing_made();
}

// ---------------------------------------------------------------- POST /execute: the query

TEST_F(ExecuteChecksTest, WaitAndTailOutOfRangeAre422) {
  const std::pair<std::string, std::string> cases[] = {
      {"wait=301", "Query parameter 'wait' must be a number from 0 to 300"},
      {"wait=-1", "Query parameter 'wait' must be a number from 0 to 300"},
      {"wait=abc", "Query parameter 'wait' must be a number from 0 to 300"},
      {"wait=1e999", "Query parameter 'wait' must be a number from 0 to 300"},
      {"wait=nan", "Query parameter 'wait' must be a number from 0 to 300"},
      {"tail=0", "Query parameter 'tail' must be an integer from 1 to 1000000"},
      {"tail=x", "Query parameter 'tail' must be an integer from 1 to 1000000"},
      {"tail=-3", "Query parameter 'tail' must be an integer from 1 to 1000000"},
  };
  for (const auto& [query, detail] : cases) {
    RouteReply r = post_execute(R"({"command": "true"})", "?" + query);
    EXPECT_EQ(r.code(), 422u) << query;
    EXPECT_EQ(r.detail(), detail) << query;
  }
  expect_nothing_made();
}

// ---------------------------------------------------------------- order: user, checks, caller

TEST_F(ExecuteChecksTest, ARequestNamingNoUserIs400BeforeItsBodyIsLookedAt) {
  for (const std::string body : {R"({"command": "true"})", R"({"command": 5})", "{"}) {
    RouteReply r = routes_->post("/execute", body);
    EXPECT_EQ(r.code(), 400u) << body;
    EXPECT_THAT(r.detail(), HasSubstr("X-User-Id")) << body;
  }
  expect_nothing_made();
}

TEST_F(ExecuteChecksTest, UnknownFieldsAreIgnoredAndAValidRequestGoesOnToItsCaller) {
  // Open WebUI posts every tool argument in the body, the query's among them, with nulls.
  json body = {{"command", "echo ok"}, {"wait", 10},     {"tail", nullptr}, {"foo", {{"bar", {1, 2}}}},
               {"cwd", nullptr},       {"env", nullptr}, {"pty", nullptr}};
  RouteReply r = post_execute(body.dump(), "?wait=10&tail=null", kRestoring);
  // Past every check, the caller is resolved: this one the node refuses while it is restored.
  EXPECT_EQ(r.code(), 503u) << r.body;
  EXPECT_THAT(r.detail(), HasSubstr("being restored"));
  EXPECT_EQ(r.headers[http::field::retry_after], "5");
  // The same user with a malformed request gets the request's answer: it is checked first.
  r = post_execute(R"({"command": ""})", "", kRestoring);
  EXPECT_EQ(r.code(), 422u);
  EXPECT_EQ(r.detail(), "Field 'command' must not be empty");
  expect_nothing_made();
}

// ---------------------------------------------------------------- the other /execute routes

TEST_F(ExecuteChecksTest, StatusQueriesOutOfRangeAre422) {
  const std::pair<std::string, std::string> cases[] = {
      {"offset=-1", "Query parameter 'offset' must be an integer from 0 to 9223372036854775807"},
      {"offset=abc", "Query parameter 'offset' must be an integer from 0 to 9223372036854775807"},
      {"wait=500", "Query parameter 'wait' must be a number from 0 to 300"},
      {"tail=0", "Query parameter 'tail' must be an integer from 1 to 1000000"},
  };
  for (const auto& [query, detail] : cases) {
    RouteReply r = routes_->get("/execute/p-1/status?" + query, as("val"));
    EXPECT_EQ(r.code(), 422u) << query;
    EXPECT_EQ(r.detail(), detail) << query;
  }
  EXPECT_EQ(routes_->get("/execute/p-1/status?wait=5", as(kRestoring)).code(), 503u) << "valid: on to the caller";
  expect_nothing_made();
}

TEST_F(ExecuteChecksTest, InputWithoutAStringIs422AndNotJsonIs400) {
  EXPECT_EQ(routes_->post("/execute/p-1/input", "{}", as("val")).detail(),
            "Field 'input' is required and must be a string");
  EXPECT_EQ(routes_->post("/execute/p-1/input", R"({"input": 3})", as("val")).code(), 422u);
  EXPECT_EQ(routes_->post("/execute/p-1/input", "{nope", as("val")).code(), 400u);
  RouteReply overflow = routes_->post("/execute/nosuch/input", R"({"input": "x", "n": 1e309})", as("val"));
  EXPECT_EQ(overflow.code(), 400u);
  EXPECT_THAT(overflow.detail(), StartsWith("Invalid JSON body: number overflow"));
  EXPECT_EQ(routes_->post("/execute/p-1/input", R"({"input": "y\\n", "extra": 1})", as(kRestoring)).code(), 503u);
  expect_nothing_made();
}

TEST_F(ExecuteChecksTest, KillWithAForceThatIsNoBooleanIs422) {
  RouteReply r = routes_->del("/execute/p-1?force=maybe", as("val"));
  EXPECT_EQ(r.code(), 422u);
  EXPECT_EQ(r.detail(), "Query parameter 'force' must be a boolean (true or false)");
  EXPECT_EQ(routes_->del("/execute/p-1?force=TRUE", as(kRestoring)).code(), 503u);
  expect_nothing_made();
}

TEST_F(ExecuteChecksTest, AStreamResumedFromAMalformedLastEventIdIs400) {
  for (const std::string value :
       {"-1", "18446744073709551615", "9223372036854775808", "+4", "4abc", "0x10", "", "1e3", "4 4"}) {
    auto headers = as("val");
    headers.emplace_back("Last-Event-ID", value);
    RouteReply r = routes_->get("/execute/p-1/stream", headers);
    EXPECT_EQ(r.code(), 400u) << value;
    EXPECT_THAT(r.detail(), StartsWith("Last-Event-ID must be an offset this stream sent")) << value;
  }
  // An offset query wins over the header, malformed or not.
  auto headers = as(kRestoring);
  headers.emplace_back("Last-Event-ID", "4abc");
  EXPECT_EQ(routes_->get("/execute/p-1/stream?offset=4", headers).code(), 503u);
  EXPECT_EQ(routes_->get("/execute/p-1/stream?offset=-4", as("val")).code(), 422u);
  expect_nothing_made();
}

}  // namespace
}  // namespace agentbox::api
