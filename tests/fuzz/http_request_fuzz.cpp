// The API's request framing as http/session.cpp reads it, fed what a client sends on one
// connection: Beast's request_parser with the daemon's header limit (64 KiB) and read buffer
// (header limit + 16 KiB), then our code on each head (parse_target, the router with the API's
// route patterns, the API key check, the CORS preflight, typed query parameters, the account
// name of X-User-Id), the body through RequestBody under a route's body limit, and the next
// request of a kept-alive connection. The bytes are read twice: all at once, and in reads of
// 1 to 13 bytes (chosen by the first byte).
//
// Checks: both readings give the same requests and answers; no header value holds CR or LF;
// a parsed target has no NUL, no "null" query value, and its path is its segments joined; a
// route found has the request's method and non-empty parameters; the key is accepted exactly
// when the header is "Bearer <key>"; a preflight answer reads back as one response; typed query
// parameters fail only with a 422; account names are valid Linux user names; a body read whole
// is within the limit and as long as its Content-Length.
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/api_key_auth.hpp"
#include "http/cors.hpp"
#include "http/error.hpp"
#include "http/options.hpp"
#include "http/query_params.hpp"
#include "http/request.hpp"
#include "http/request_body.hpp"
#include "http/router.hpp"
#include "store/account_name.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using beast::error_code;
using namespace agentbox::http;

constexpr std::string_view kApiKey = "fuzz-api-key-0123456789abcdef0123";
constexpr std::uint64_t kBodyLimit = 4096;     // a route's body limit (small, so inputs reach it)
constexpr std::size_t kReadChunk = 16 * 1024;  // as http/session.cpp
constexpr int kMaxRequests = 16;               // per connection

const HttpServerOptions kOptions;  // the daemon's header limit

// The API's route patterns (api/*.cpp), handlers left empty: only matching is fuzzed.
const Router& router() {
  static const Router r = [] {
    Router router;
    const Handler none = [](const Request&) { return Response{}; };
    struct Entry {
      http::verb method;
      const char* pattern;
    };
    for (auto [method, pattern] : std::initializer_list<Entry>{{http::verb::get, "/health"},
                                                               {http::verb::get, "/system"},
                                                               {http::verb::post, "/execute"},
                                                               {http::verb::get, "/execute"},
                                                               {http::verb::get, "/execute/{id}/status"},
                                                               {http::verb::post, "/execute/{id}/input"},
                                                               {http::verb::delete_, "/execute/{id}"},
                                                               {http::verb::get, "/files/list"},
                                                               {http::verb::get, "/files/read"},
                                                               {http::verb::post, "/files/write"},
                                                               {http::verb::get, "/files/serve/{path:path}"},
                                                               {http::verb::post, "/files/upload"},
                                                               {http::verb::get, "/files/trash"},
                                                               {http::verb::delete_, "/files/trash"},
                                                               {http::verb::get, "/api/terminals"},
                                                               {http::verb::delete_, "/api/terminals/{id}"},
                                                               {http::verb::get, "/agent/sessions/{id}"},
                                                               {http::verb::get, "/proxy/{port}"},
                                                               {http::verb::get, "/proxy/{port}/{path:path}"},
                                                               {http::verb::post, "/v1/chat/completions"}})
      router.add(method, pattern, none);
    router.add(http::verb::get, "/admin/accounts", none, RouteOptions{.admin = true});
    router.add(http::verb::delete_, "/admin/accounts/{user}", none, RouteOptions{.admin = true});
    return router;
  }();
  return r;
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool valid_user_name(std::string_view name) {
  if (name.empty() || name.size() > 32 || name[0] < 'a' || name[0] > 'z') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

// Runs one asynchronous operation of the session to completion; `got` is its byte count.
template <class Initiate>
error_code run(net::io_context& ioc, Initiate initiate, std::size_t* got = nullptr) {
  error_code result;
  bool done = false;
  initiate([&](error_code ec, std::size_t n) {
    result = ec;
    done = true;
    if (got) *got = n;
  });
  ioc.restart();
  ioc.run();
  FUZZ_CHECK(done);
  return result;
}

// A response as the session writes it, parsed back: exactly one response, all bytes used.
void check_response_reads_back(const Response& response) {
  http::response<http::string_body> msg{response.status, 11};
  for (const auto& field : response.headers) msg.insert(field.name_string(), field.value());
  msg.body() = response.body;
  msg.prepare_payload();
  std::string wire;
  {
    std::ostringstream out;
    out << msg;
    wire = out.str();
  }
  http::response_parser<http::string_body> parser;
  parser.eager(true);
  error_code ec;
  std::size_t used = parser.put(net::buffer(wire), ec);
  FUZZ_CHECK(!ec && parser.is_done() && used == wire.size());
  FUZZ_CHECK(parser.get().result() == response.status);
}

// Our code on one parsed head; appends what it decided to `log`.
void examine_head(const http::request_header<>& head, std::string& log) {
  for (const auto& field : head) {
    std::string_view value = field.value();
    FUZZ_CHECK(value.find_first_of("\r\n") == std::string_view::npos);
    FUZZ_CHECK(field.name_string().find_first_of(":\r\n ") == std::string_view::npos);
  }
  Request req;
  req.method = head.method();
  req.target = std::string(head.target());
  req.headers = static_cast<const http::fields&>(head);
  log += std::string(head.method_string()) + " " + req.target + "\n";

  auto target = parse_target(req.target);
  if (!target) {
    log += "400 target\n";
    return;
  }
  FUZZ_CHECK(target->path.find('\0') == std::string::npos);
  std::string joined;
  for (const auto& s : target->segments) joined += "/" + s;
  FUZZ_CHECK(target->path == (joined.empty() ? "/" : joined));
  for (const auto& [key, value] : target->query) {
    FUZZ_CHECK(key.find('\0') == std::string::npos && value.find('\0') == std::string::npos);
    FUZZ_CHECK(!is_null_value(value));
  }

  if (CorsPolicy::is_preflight(req.headers, req.method)) {
    static const CorsPolicy cors({"https://chat.example"});
    Response r = cors.preflight(req.headers);
    FUZZ_CHECK(r.status == http::status::no_content || r.status == http::status::bad_request);
    check_response_reads_back(r);
    log += "preflight " + std::to_string(static_cast<unsigned>(r.status)) + "\n";
  }

  auto match = router().match(req.method, target->segments);
  if (match.kind == RouteMatch::Kind::found) {
    FUZZ_CHECK(match.route->method == req.method);
    FUZZ_CHECK(match.route->options.admin == (!target->segments.empty() && target->segments[0] == "admin"));
    for (const auto& [name, value] : match.params) FUZZ_CHECK(!value.empty() || name == "path");
    log += "route " + match.route->pattern + "\n";
  } else if (match.kind == RouteMatch::Kind::method_not_allowed) {
    FUZZ_CHECK(!match.allowed.empty());
    check_response_reads_back([&] {
      Response r = error_response(http::status::method_not_allowed, "Method Not Allowed");
      r.headers.set(http::field::allow, allow_header(match.allowed));
      return r;
    }());
  }

  static const ApiKeyAuth auth(kApiKey);
  const std::string_view authorization = req.header("Authorization").value_or("");
  const bool expected = authorization.size() == 7 + kApiKey.size() &&
                        iequals_ascii(authorization.substr(0, 7), "bearer ") && authorization.substr(7) == kApiKey;
  FUZZ_CHECK(auth.accepts(authorization) == expected);

  req.query = std::move(target->query);
  for (const auto& [key, value] : req.query) {
    (void)value;
    try {
      if (auto v = query_int(req, key, -5, 1'000'000)) FUZZ_CHECK(*v >= -5 && *v <= 1'000'000);
    } catch (const HttpError& e) {
      FUZZ_CHECK(e.status() == http::status::unprocessable_entity);
    }
    try {
      if (auto v = query_number(req, key, 0, 300)) FUZZ_CHECK(*v >= 0 && *v <= 300);
    } catch (const HttpError& e) {
      FUZZ_CHECK(e.status() == http::status::unprocessable_entity);
    }
    try {
      query_bool(req, key);
    } catch (const HttpError& e) {
      FUZZ_CHECK(e.status() == http::status::unprocessable_entity);
    }
  }

  if (auto user = req.header("X-User-Id")) {
    std::string name = agentbox::account_name(*user);
    FUZZ_CHECK(valid_user_name(name));
    FUZZ_CHECK(name == agentbox::account_name(*user));
    log += "user " + name + "\n";
  }
}

// One connection: requests until an error, a close or kMaxRequests. Returns what was decided.
std::string serve_connection(std::string_view wire, std::size_t read_size) {
  static net::io_context ioc;
  beast::test::stream client(ioc), peer(ioc);
  client.connect(peer);
  client.append(wire);
  client.close_remote();  // the client has sent everything: then EOF
  if (read_size) client.read_size(read_size);

  std::string log;
  beast::flat_buffer buffer(kOptions.header_limit + kReadChunk);
  for (int n = 0; n < kMaxRequests; ++n) {
    if (buffer.size() == 0) {  // do_wait_request: the first bytes of the next request
      std::size_t got = 0;
      if (run(
              ioc, [&](auto handler) { client.async_read_some(buffer.prepare(kReadChunk), handler); }, &got))
        break;
      buffer.commit(got);
    }
    http::request_parser<http::empty_body> header_parser;
    header_parser.header_limit(kOptions.header_limit);
    header_parser.body_limit(boost::none);
    error_code ec = run(ioc, [&](auto handler) { http::async_read_header(client, buffer, header_parser, handler); });
    if (ec) {
      // As on_read_header: the header limit or a full buffer is a 431; anything else a 400 or a close.
      log += ec == http::error::header_limit || ec == http::error::buffer_overflow ? "431\n" : "400 or close\n";
      break;
    }
    FUZZ_CHECK(header_parser.is_header_done());
    examine_head(header_parser.get().base(), log);
    const bool keep_alive = header_parser.get().keep_alive();
    if (!header_parser.is_done()) {
      if (auto length = header_parser.content_length(); length && *length > kBodyLimit) {
        log += "413 early\n";
        break;  // respond_early: the connection closes
      }
      const auto length = header_parser.content_length();
      http::request_parser<RequestBody> body_parser(std::move(header_parser));
      body_parser.body_limit(kBodyLimit);
      while (!ec && !body_parser.is_done())
        ec = run(ioc, [&](auto handler) { http::async_read_some(client, buffer, body_parser, handler); });
      if (ec) {
        log += ec == http::error::body_limit ? "413\n" : "400 or close\n";
        break;
      }
      const auto& body = body_parser.get().body();
      FUZZ_CHECK(body.size == body.memory.size());
      FUZZ_CHECK(body.size <= kBodyLimit);
      if (length) FUZZ_CHECK(body.size == *length);
      log += "body " + std::to_string(body.size) + " " + std::to_string(std::hash<std::string>{}(body.memory)) + "\n";
    }
    if (!keep_alive) break;
  }
  return log;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view wire(reinterpret_cast<const char*>(data), size);
  const std::string whole = serve_connection(wire, 0);
  const std::string pieces = serve_connection(wire, 1 + data[0] % 13);
  if (whole != pieces) std::fprintf(stderr, "read whole:\n%s\nread in pieces:\n%s\n", whole.c_str(), pieces.c_str());
  FUZZ_CHECK(whole == pieces);
  return 0;
}
