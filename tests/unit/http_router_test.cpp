// The pure parts of the HTTP layer, without a network: routing, target parsing and the null
// rule, error bodies, JSON bodies, the API key check, CORS and log redaction.
#include <gtest/gtest.h>

#include <stdexcept>

#include "http/access_log.hpp"
#include "http/api_key_auth.hpp"
#include "http/cors.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/request.hpp"
#include "http/router.hpp"

namespace agentbox::http {
namespace {

using nlohmann::json;

Response ok(const Request&) { return Response::text("ok"); }

std::vector<std::string> segments_of(std::string_view target) {
  auto parsed = parse_target(target);
  EXPECT_TRUE(parsed) << target;
  return parsed ? parsed->segments : std::vector<std::string>{};
}

TEST(ServerRouter, MatchesLiteralAndParamSegmentsWithDecodedValues) {
  Router r;
  r.add(http::verb::get, "/execute/{id}/status", ok);
  r.add(http::verb::get, "/files/serve/{path:path}", ok);
  r.add(http::verb::get, "/", ok);

  auto m = r.match(http::verb::get, segments_of("/execute/ab%20c/status"));
  ASSERT_EQ(m.kind, RouteMatch::Kind::found);
  EXPECT_EQ(m.route->pattern, "/execute/{id}/status");
  EXPECT_EQ(m.params.at("id"), "ab c");

  m = r.match(http::verb::get, segments_of("/files/serve/dir/sub/index.html"));
  ASSERT_EQ(m.kind, RouteMatch::Kind::found);
  EXPECT_EQ(m.params.at("path"), "dir/sub/index.html");

  EXPECT_EQ(r.match(http::verb::get, segments_of("/")).kind, RouteMatch::Kind::found);
  // A {name} segment never matches an empty segment, and lengths must agree.
  EXPECT_EQ(r.match(http::verb::get, segments_of("/execute//status")).kind, RouteMatch::Kind::not_found);
  EXPECT_EQ(r.match(http::verb::get, segments_of("/execute/1")).kind, RouteMatch::Kind::not_found);
  EXPECT_EQ(r.match(http::verb::get, segments_of("/execute/1/status/x")).kind, RouteMatch::Kind::not_found);
  EXPECT_EQ(r.match(http::verb::get, segments_of("/files/serve")).kind, RouteMatch::Kind::not_found);
}

TEST(ServerRouter, AScopePrefixIsTakenOffTheTargetOnce) {
  Router r;
  std::string target = "/p/build/files/list?path=%2Fx";
  EXPECT_EQ(r.take_scope(target), "") << "no prefix is taken before one is set";
  EXPECT_EQ(target, "/p/build/files/list?path=%2Fx");

  r.scope_prefix("p", [](const Request&, const RouteOptions&, bool) { return std::nullopt; });
  struct Case {
    std::string in, scope, out;
  };
  for (const Case& c : std::vector<Case>{
           {"/p/build/files/list?path=%2Fx", "build", "/files/list?path=%2Fx"},
           {"/p/build/p/other/x", "build", "/p/other/x"},  // once only
           {"/p/build", "build", "/"},
           {"/p/build?x=1", "build", "/?x=1"},
           {"/p/build/", "build", "/"},
           {"/p/a%2Fb/x", "a%2Fb", "/x"},  // still encoded: no such profile name, so a 404
           {"/p//x", "", "/p//x"},
           {"/p/", "", "/p/"},
           {"/p", "", "/p"},
           {"/pp/build/x", "", "/pp/build/x"},
           {"/proxy/8000/p/x", "", "/proxy/8000/p/x"},
       }) {
    std::string target = c.in;
    EXPECT_EQ(r.take_scope(target), c.scope) << c.in;
    EXPECT_EQ(target, c.out) << c.in;
  }
}

TEST(ServerRouter, TheScopeCheckRunsOnlyForScopedRequests) {
  Router r;
  Request req;
  EXPECT_FALSE(r.check_scope(req, {}, true)) << "no check set";
  int calls = 0;
  r.scope_prefix("p", [&](const Request& q, const RouteOptions&, bool) -> std::optional<Response> {
    ++calls;
    if (q.scope == "bad") return error_response(http::status::not_found, "Unknown profile 'bad'");
    return std::nullopt;
  });
  EXPECT_FALSE(r.check_scope(req, {}, true));
  EXPECT_EQ(calls, 0);
  req.scope = "good";
  EXPECT_FALSE(r.check_scope(req, {}, true));
  req.scope = "bad";
  auto refusal = r.check_scope(req, {}, true);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->status, http::status::not_found);
  EXPECT_EQ(calls, 2);
}

TEST(ServerRouter, FirstRegisteredRouteWins) {
  Router r;
  r.add(http::verb::get, "/files/cwd", [](const Request&) { return Response::text("literal"); });
  r.add(http::verb::get, "/files/{name}", [](const Request&) { return Response::text("param"); });
  auto m = r.match(http::verb::get, segments_of("/files/cwd"));
  ASSERT_EQ(m.kind, RouteMatch::Kind::found);
  EXPECT_EQ(std::get<Handler>(m.route->handler)(Request{}).body, "literal");
  m = r.match(http::verb::get, segments_of("/files/list"));
  EXPECT_EQ(std::get<Handler>(m.route->handler)(Request{}).body, "param");
}

TEST(ServerRouter, KnownPathWithOtherMethodIsMethodNotAllowed) {
  Router r;
  r.add(http::verb::get, "/execute", ok);
  r.add(http::verb::post, "/execute", ok);
  auto m = r.match(http::verb::delete_, segments_of("/execute"));
  ASSERT_EQ(m.kind, RouteMatch::Kind::method_not_allowed);
  EXPECT_EQ(allow_header(m.allowed), "GET, POST");
  EXPECT_EQ(r.match(http::verb::get, segments_of("/nope")).kind, RouteMatch::Kind::not_found);
}

TEST(ServerRouter, MalformedPatternsAreRefused) {
  Router r;
  EXPECT_THROW(r.add(http::verb::get, "no-slash", ok), std::invalid_argument);
  EXPECT_THROW(r.add(http::verb::get, "/a{b}", ok), std::invalid_argument);
  EXPECT_THROW(r.add(http::verb::get, "/{}", ok), std::invalid_argument);
  EXPECT_THROW(r.add(http::verb::get, "/{p:path}/x", ok), std::invalid_argument);
}

TEST(ServerRouter, AdminRoutesAreExactlyThoseUnderAdmin) {
  Router r;
  r.add(http::verb::get, "/admin/backup", ok, {.admin = true});
  EXPECT_TRUE(r.routes().back().options.admin);
  // /metrics, the scrapers' path, may be either (the API's and the metrics listener's); no other.
  r.add(http::verb::get, "/metrics", ok, {.admin = true});
  Router keyless;
  keyless.add(http::verb::get, "/metrics", ok, {.is_public = true});
  EXPECT_THROW(r.add(http::verb::get, "/metrics/x", ok, {.admin = true}), std::invalid_argument);
  // A route under /admin/ that forgot the flag, or an admin route elsewhere: refused.
  EXPECT_THROW(r.add(http::verb::get, "/admin/accounts", ok), std::invalid_argument);
  EXPECT_THROW(r.add(http::verb::get, "/files/admin", ok, {.admin = true}), std::invalid_argument);
  EXPECT_THROW(r.add(http::verb::get, "/admin/open", ok, {.is_public = true, .admin = true}), std::invalid_argument);
}

TEST(ServerRequest, NullQueryValuesAreAbsentInAnyCase) {
  auto t = parse_target("/files/list?directory=null&x=NuLL&y=nullish&z=&include%5B%5D=a&include%5B%5D=b+c");
  ASSERT_TRUE(t);
  Request req;
  req.query = t->query;
  EXPECT_FALSE(req.query_param("directory"));
  EXPECT_FALSE(req.query_param("x"));
  EXPECT_EQ(req.query_param("y"), "nullish");
  EXPECT_EQ(req.query_param("z"), "");
  EXPECT_EQ(req.query_params("include[]"), (std::vector<std::string>{"a", "b c"}));
}

TEST(ServerRequest, TargetsThatAreNotOriginFormOrHoldNulAreRefused) {
  EXPECT_FALSE(parse_target("http://example.com/x"));
  EXPECT_FALSE(parse_target("*"));
  EXPECT_FALSE(parse_target("/files/read?path=a%00b"));
  EXPECT_FALSE(parse_target("/files/a%00b"));
  EXPECT_TRUE(parse_target("/files/a%2Fb"));
}

TEST(ServerRequest, HeadersAreCaseInsensitive) {
  Request req;
  req.headers.set("X-User-Id", "u1");
  EXPECT_EQ(req.header("x-user-id"), "u1");
  EXPECT_FALSE(req.header("x-session-id"));
  EXPECT_THROW(req.param("id"), std::out_of_range);
}

TEST(ServerErrors, HttpErrorKeepsItsStatusAndDetail) {
  auto r = response_for_exception(std::make_exception_ptr(HttpError(http::status::conflict, "busy")), "T");
  EXPECT_EQ(r.status, http::status::conflict);
  EXPECT_EQ(json::parse(r.body), (json{{"detail", "busy"}}));
  EXPECT_EQ(r.headers[http::field::content_type], "application/json");
}

TEST(ServerErrors, AnythingElseIsA500ThatRevealsNothing) {
  auto r = response_for_exception(std::make_exception_ptr(std::runtime_error("open(/etc/shadow): EACCES")), "T");
  EXPECT_EQ(r.status, http::status::internal_server_error);
  EXPECT_EQ(r.body, R"({"detail":"Internal Server Error"})");
  r = response_for_exception(std::make_exception_ptr(42), "T");
  EXPECT_EQ(r.body, R"({"detail":"Internal Server Error"})");
}

TEST(ServerErrors, InvalidUtf8InADetailDoesNotThrow) {
  auto r = error_response(http::status::not_found, std::string("no such file: \xff\xfe"));
  EXPECT_TRUE(json::accept(r.body)) << r.body;
}

Request with_body(std::string body) {
  Request req;
  req.body = std::move(body);
  return req;
}

std::string http_error_of(const Request& req, http::status* status = nullptr) {
  try {
    (void)parse_json_object(req);
  } catch (const HttpError& e) {
    if (status) *status = e.status();
    return std::string(e.detail());
  }
  return "<no error>";
}

TEST(ServerJsonBody, ParsesObjects) {
  auto j = parse_json_object(with_body(R"({"command":"ls","unknown":1})"));
  EXPECT_EQ(j["command"], "ls");
}

TEST(ServerJsonBody, SyntaxErrorsAndBadUtf8Are400WithAClearDetail) {
  http::status status{};
  auto detail = http_error_of(with_body(R"({"command": )"), &status);
  EXPECT_EQ(status, http::status::bad_request);
  EXPECT_TRUE(detail.starts_with("Invalid JSON body: ")) << detail;
  EXPECT_EQ(detail.find("[json.exception"), std::string::npos) << detail;

  detail = http_error_of(with_body("{\"a\":\"\xc3\x28\"}"), &status);
  EXPECT_EQ(status, http::status::bad_request);
  EXPECT_NE(detail.find("UTF-8"), std::string::npos) << detail;

  detail = http_error_of(with_body(""), &status);
  EXPECT_EQ(detail, "Invalid JSON body: empty body");
}

// nlohmann reports a number no double holds as out_of_range, not parse_error: it was a 500.
TEST(ServerJsonBody, NumbersOutOfRangeAre400NamingTheNumber) {
  const std::string ten_to_the_400 = "1" + std::string(400, '0');  // an integer past every double
  for (const std::string& body : {std::string(R"({"timeout": 1e309})"), std::string(R"({"a": [-1e400]})"),
                                  std::string("1e309"), R"({"n": )" + ten_to_the_400 + "}"}) {
    http::status status{};
    auto detail = http_error_of(with_body(body), &status);
    EXPECT_EQ(status, http::status::bad_request) << body << ": " << detail;
    EXPECT_TRUE(detail.starts_with("Invalid JSON body: number overflow")) << detail;
    EXPECT_EQ(detail.find("[json.exception"), std::string::npos) << detail;
  }
  EXPECT_EQ(parse_json_object(with_body(R"({"timeout": 1e308})"))["timeout"], 1e308);
}

TEST(ServerJsonBody, DeepNestingIsRefused) {
  std::string deep(kMaxJsonDepth + 10, '[');
  deep += std::string(kMaxJsonDepth + 10, ']');
  http::status status{};
  auto detail = http_error_of(with_body(deep), &status);
  EXPECT_EQ(status, http::status::bad_request);
  EXPECT_NE(detail.find("nesting"), std::string::npos) << detail;
  std::string ok_depth(10, '[');
  ok_depth += std::string(10, ']');
  EXPECT_EQ(parse_json_body(with_body(ok_depth)).size(), 1u);
}

TEST(ServerJsonBody, NonObjectIs422) {
  http::status status{};
  auto detail = http_error_of(with_body("[1,2]"), &status);
  EXPECT_EQ(status, http::status::unprocessable_entity);
  EXPECT_EQ(detail, "Request body must be a JSON object");
}

TEST(ServerApiKey, AcceptsOnlyTheExactBearerKey) {
  ApiKeyAuth auth("s3cret-key");
  EXPECT_TRUE(auth.accepts("Bearer s3cret-key"));
  EXPECT_TRUE(auth.accepts("bearer s3cret-key"));
  EXPECT_FALSE(auth.accepts("Bearer s3cret-kez"));
  EXPECT_FALSE(auth.accepts("Bearer s3cret-key "));
  EXPECT_FALSE(auth.accepts("Bearer s3cret"));
  EXPECT_FALSE(auth.accepts("Basic s3cret-key"));
  EXPECT_FALSE(auth.accepts("s3cret-key"));
  EXPECT_FALSE(auth.accepts(""));
}

TEST(ServerApiKey, AnEmptyKeyAcceptsNothing) {
  ApiKeyAuth auth("");
  EXPECT_FALSE(auth.accepts("Bearer "));
  EXPECT_FALSE(auth.accepts("Bearer x"));
}

http::fields origin_headers(std::string_view origin) {
  http::fields f;
  f.set(http::field::origin, origin);
  f.set(http::field::access_control_request_method, "POST");
  f.set(http::field::access_control_request_headers, "authorization, content-type");
  return f;
}

TEST(Router, AnErrorShapeCoversItsPrefixAsAWholeSegmentOnly) {
  Router r;
  const ErrorShape shape = [](Response& e) { e.body = "shaped"; };
  r.shape_errors("/v1", shape);
  EXPECT_EQ(r.error_shape("/v1"), shape);
  EXPECT_EQ(r.error_shape("/v1/chat/completions"), shape);
  EXPECT_EQ(r.error_shape("/v10/x"), nullptr);
  EXPECT_EQ(r.error_shape("/files/v1"), nullptr);
  EXPECT_EQ(r.error_shape("/"), nullptr);
  EXPECT_THROW(r.shape_errors("/v1/", shape), std::invalid_argument);
  EXPECT_THROW(r.shape_errors("v1", shape), std::invalid_argument);
  EXPECT_THROW(r.shape_errors("/", shape), std::invalid_argument);
}

TEST(ServerCors, WildcardAllowsAnyOrigin) {
  CorsPolicy cors({"*"});
  auto r = cors.preflight(origin_headers("https://webui.example"));
  EXPECT_EQ(r.status, http::status::no_content);
  EXPECT_EQ(r.headers[http::field::access_control_allow_origin], "*");
  EXPECT_EQ(r.headers[http::field::access_control_allow_headers], "authorization, content-type");
  EXPECT_NE(r.headers[http::field::access_control_allow_methods].find("POST"), std::string::npos);
  EXPECT_TRUE(CorsPolicy::is_preflight(origin_headers("x"), http::verb::options));
  EXPECT_FALSE(CorsPolicy::is_preflight(origin_headers("x"), http::verb::get));
}

TEST(ServerCors, ListedOriginsAreEchoedOthersRefused) {
  CorsPolicy cors({"https://a.example"});
  EXPECT_EQ(cors.allow_origin("https://a.example"), "https://a.example");
  EXPECT_FALSE(cors.allow_origin("https://b.example"));
  auto refused = cors.preflight(origin_headers("https://b.example"));
  EXPECT_EQ(refused.status, http::status::bad_request);
  EXPECT_EQ(refused.headers.find(http::field::access_control_allow_origin), refused.headers.end());

  http::fields response;
  cors.decorate(origin_headers("https://a.example"), response);
  EXPECT_EQ(response[http::field::access_control_allow_origin], "https://a.example");
  EXPECT_EQ(response[http::field::vary], "Origin");
}

TEST(ServerAccessLog, SecretLookingQueryValuesAreRedacted) {
  EXPECT_EQ(loggable_target("/files/view?path=a.txt&token=abc&sig=def&X-Api-Key=ghi"),
            "/files/view?path=a.txt&token=REDACTED&sig=REDACTED&X-Api-Key=REDACTED");
  EXPECT_EQ(loggable_target("/health"), "/health");
  EXPECT_EQ(loggable_target("/x?flag"), "/x?flag");
}

}  // namespace
}  // namespace agentbox::http
