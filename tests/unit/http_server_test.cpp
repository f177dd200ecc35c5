// The HTTP layer over real sockets on 127.0.0.1 (port 0): routing, auth, limits, timeouts,
// keep-alive, async and streamed responses, CORS, shutdown. Clients are Beast's (bounded by
// tcp_stream deadlines) or raw sockets with SO_RCVTIMEO for input Beast would not send.
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "http/server.hpp"
#include "support/log_capture.hpp"
#include "support/raw_socket.hpp"
#include "util/error.hpp"

namespace agentbox::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr char kKey[] = "test-key-0123456789";
constexpr auto kClientTimeout = 5s;

using Headers = std::vector<std::pair<std::string, std::string>>;
const Headers kAuth = {{"Authorization", std::string("Bearer ") + kKey}};

struct Reply {
  unsigned status = 0;
  http::fields headers;
  std::string body;
  bool chunked = false;
  beast::error_code ec;
  json json_body() const { return json::parse(body); }
};

http::request<http::string_body> make_request(http::verb method, std::string target, std::string body,
                                              const Headers& headers) {
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) req.set(name, value);
  if (!body.empty() || method == http::verb::post) {
    req.body() = std::move(body);
    req.prepare_payload();
  }
  return req;
}

// A Beast client on its own io_context; every call ends within kClientTimeout.
class Client {
 public:
  explicit Client(std::uint16_t port) : stream_(ioc_) {
    stream_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }

  Reply request(http::verb method, std::string target, std::string body = {}, const Headers& headers = kAuth) {
    auto req = make_request(method, std::move(target), std::move(body), headers);
    Reply reply;
    http::response<http::string_body> res;
    stream_.expires_after(kClientTimeout);
    http::async_write(stream_, req, [&](beast::error_code ec, std::size_t) {
      if (ec) {
        reply.ec = ec;
        return;
      }
      http::async_read(stream_, buffer_, res, [&](beast::error_code ec2, std::size_t) { reply.ec = ec2; });
    });
    ioc_.restart();
    ioc_.run();
    reply.status = res.result_int();
    reply.headers = res.base();
    reply.chunked = res.chunked();
    reply.body = std::move(res.body());
    return reply;
  }

  // True when the server closes the connection (EOF) within `within`.
  bool closed_by_server(std::chrono::milliseconds within) {
    bool eof = false;
    stream_.expires_after(within);
    char byte;
    stream_.async_read_some(net::buffer(&byte, 1), [&](beast::error_code ec, std::size_t) {
      eof = ec == net::error::eof || ec == net::error::connection_reset;
    });
    ioc_.restart();
    ioc_.run();
    return eof;
  }

 private:
  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

Reply fetch(std::uint16_t port, http::verb method, std::string target, std::string body = {},
            const Headers& headers = kAuth) {
  Client c(port);
  return c.request(method, std::move(target), std::move(body), headers);
}

// Everything the server sends until it closes (or 5 s pass).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

unsigned status_of(std::string_view raw) {
  if (!raw.starts_with("HTTP/1.1 ") || raw.size() < 12) return 0;
  return static_cast<unsigned>(std::stoul(std::string(raw.substr(9, 3))));
}

bool connection_refused(std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno == ECONNREFUSED;
}

// A one-shot signal between threads, with a bounded wait.
class Latch {
 public:
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

Response item_handler(const Request& req) {
  json query = json::object();
  for (const auto& [k, v] : req.query) query[k] = v;
  return Response::json({{"id", req.param("id")},
                         {"query", query},
                         {"listener", req.listener_tag},
                         {"user", req.header("x-user-id").value_or("")}});
}

Router base_routes() {
  Router r;
  r.add(http::verb::get, "/health",
        [](const Request&) {
          return Response::json({{"status", "ok"}});
        },
        {.is_public = true});
  r.add(http::verb::get, "/items/{id}", item_handler);
  r.add(http::verb::delete_, "/items/{id}", item_handler);
  r.add(http::verb::post, "/echo", [](const Request& req) {
    return Response::json({{"size", req.body_size}, {"body", req.body}});
  });
  r.add(http::verb::post, "/upload",
        [](const Request& req) {
          std::string content(req.body_size, '\0');
          EXPECT_EQ(::pread(req.body_file.get(), content.data(), content.size(), 0),
                    static_cast<ssize_t>(req.body_size));
          return Response::json({{"size", req.body_size}, {"in_memory", req.body.size()}, {"content", content}});
        },
        {.body_limit = 64 * 1024, .spool_body = true});
  r.add(http::verb::get, "/boom", [](const Request&) -> Response {
    throw std::runtime_error("open(/srv/secret-internal-path): Permission denied");
  });
  r.add(http::verb::get, "/conflict",
        [](const Request&) -> Response { throw HttpError(http::status::conflict, "Already exists: a.txt"); });
  return r;
}

HttpServerOptions test_options() {
  HttpServerOptions o;
  o.threads = 2;
  o.api_key = kKey;
  o.body_limit = 1024;
  o.header_timeout = 2s;
  o.shutdown_grace = 3s;
  o.linger_timeout = 1s;
  o.spool_dir = "/tmp";
  return o;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void start(Router routes, HttpServerOptions options = test_options()) {
    server_ = std::make_unique<HttpServer>(std::move(routes), std::move(options));
    port_ = server_->listen("127.0.0.1", 0).port;
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  const HttpCounters& counters() const { return server_->counters(); }

  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
};

TEST_F(HttpServerTest, RoutesWithDecodedParamsAndDropsNullQueryValues) {
  start(base_routes());
  auto r = fetch(port_, http::verb::get, "/items/a%20b?directory=null&mode=NULL&keep=1&name=x+y", {},
                 {kAuth[0], {"X-User-Id", "user-7"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.headers[http::field::content_type], "application/json");
  auto j = r.json_body();
  EXPECT_EQ(j["id"], "a b");
  EXPECT_EQ(j["query"], (json{{"keep", "1"}, {"name", "x y"}}));
  EXPECT_EQ(j["user"], "user-7");
}

TEST_F(HttpServerTest, ApiKeyIsRequiredExceptOnPublicRoutes) {
  start(base_routes());
  for (const Headers& bad : {Headers{}, Headers{{"Authorization", "Bearer wrong"}},
                             Headers{{"Authorization", std::string("Basic ") + kKey}}}) {
    auto r = fetch(port_, http::verb::get, "/items/1", {}, bad);
    EXPECT_EQ(r.status, 401u);
    EXPECT_EQ(r.body, R"({"detail":"Invalid API key"})");
    EXPECT_EQ(r.headers[http::field::www_authenticate], "Bearer");
  }
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/1").status, 200u);
  EXPECT_EQ(fetch(port_, http::verb::get, "/health", {}, {}).status, 200u);
  EXPECT_EQ(counters().unauthorized.load(), 3u);
}

TEST_F(HttpServerTest, AdminRoutesTakeOnlyTheAdminKeyAndItOpensNothingElse) {
  Router routes = base_routes();
  routes.add(http::verb::get, "/admin/ping",
             [](const Request&) {
               return Response::json({{"admin", true}});
             },
             {.admin = true});
  HttpServerOptions o = test_options();
  o.admin_key = "admin-key-for-tests";
  start(std::move(routes), o);
  const Headers admin = {{"Authorization", "Bearer admin-key-for-tests"}};
  EXPECT_EQ(fetch(port_, http::verb::get, "/admin/ping", {}, admin).status, 200u);
  auto api_key = fetch(port_, http::verb::get, "/admin/ping");  // the ordinary API key
  EXPECT_EQ(api_key.status, 403u);
  EXPECT_EQ(api_key.body, R"({"detail":"This is an admin route: it takes the admin key, not the API key"})");
  for (const Headers& bad : {Headers{}, Headers{{"Authorization", "Bearer wrong"}}}) {
    auto r = fetch(port_, http::verb::get, "/admin/ping", {}, bad);
    EXPECT_EQ(r.status, 401u);
    EXPECT_EQ(r.body, R"({"detail":"Invalid admin key"})");
  }
  // The admin key is no API key: a user route refuses it (control: the API key opens it).
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/1", {}, admin).status, 401u);
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/1").status, 200u);
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405) {
  start(base_routes());
  auto r = fetch(port_, http::verb::get, "/nowhere");
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(r.body, R"({"detail":"Not Found"})");
  r = fetch(port_, http::verb::put, "/items/1");
  EXPECT_EQ(r.status, 405u);
  EXPECT_EQ(r.headers[http::field::allow], "GET, DELETE");
  EXPECT_EQ(r.json_body()["detail"], "Method Not Allowed");
}

TEST_F(HttpServerTest, UnexpectedExceptionIsA500ThatHidesItsMessage) {
  testing::LogCapture log;
  start(base_routes());
  auto r = fetch(port_, http::verb::get, "/boom");
  EXPECT_EQ(r.status, 500u);
  EXPECT_EQ(r.body, R"({"detail":"Internal Server Error"})");
  auto c = fetch(port_, http::verb::get, "/conflict");
  EXPECT_EQ(c.status, 409u);
  EXPECT_EQ(c.body, R"({"detail":"Already exists: a.txt"})");
  server_->stop();
  // The operator sees the real reason; the client never does.
  EXPECT_NE(log.text().find("secret-internal-path"), std::string::npos) << log.text();
  EXPECT_EQ(counters().internal_errors.load(), 1u);
}

TEST_F(HttpServerTest, AccessLogHasMethodPathStatusButNoKeyOrSecretQuery) {
  testing::LogCapture log;
  start(base_routes());
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/7?token=tok-SECRET-1&view=full").status, 200u);
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/7", {}, {{"Authorization", "Bearer wrong-KEY-2"}}).status, 401u);
  server_->stop();
  const auto text = log.text();
  EXPECT_NE(text.find("\"GET /items/7?token=REDACTED&view=full\" 200"), std::string::npos) << text;
  EXPECT_NE(text.find("\"GET /items/7\" 401"), std::string::npos) << text;
  EXPECT_EQ(text.find("tok-SECRET-1"), std::string::npos) << text;
  EXPECT_EQ(text.find(kKey), std::string::npos) << text;
  EXPECT_EQ(text.find("wrong-KEY-2"), std::string::npos) << text;
}

TEST_F(HttpServerTest, TooLargeBodyIs413WithoutReadingIt) {
  start(base_routes());
  // Only the header is sent: the answer must come from Content-Length alone.
  auto fd = testing::connect_loopback(port_, 5);
  ASSERT_TRUE(testing::send_all(fd.get(), std::string("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
                                              kKey + "\r\nContent-Length: 5000\r\n\r\n"));
  auto raw = read_all(fd.get());
  EXPECT_EQ(status_of(raw), 413u) << raw;
  EXPECT_NE(raw.find(R"x({"detail":"Request body too large (limit 1024 bytes)"})x"), std::string::npos) << raw;

  // A chunked body has no length up front: the limit stops it while reading.
  fd = testing::connect_loopback(port_, 5);
  std::string chunk(600, 'a');
  ASSERT_TRUE(testing::send_all(fd.get(), std::string("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
                                              kKey + "\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n" + chunk +
                                              "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n"));
  raw = read_all(fd.get());
  EXPECT_EQ(status_of(raw), 413u) << raw;
  EXPECT_EQ(counters().body_too_large.load(), 2u);

  // Within the limit it is served.
  auto ok = fetch(port_, http::verb::post, "/echo", std::string(1024, 'b'));
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.json_body()["size"], 1024);
}

TEST_F(HttpServerTest, StalledBodyIs408) {
  auto options = test_options();
  options.body_timeout = 300ms;
  start(base_routes(), options);
  auto fd = testing::connect_loopback(port_, 5);
  auto begin = Clock::now();
  ASSERT_TRUE(testing::send_all(fd.get(), std::string("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
                                              kKey + "\r\nContent-Length: 10\r\n\r\nabc"));
  auto raw = read_all(fd.get());
  EXPECT_EQ(status_of(raw), 408u) << raw;
  EXPECT_LT(Clock::now() - begin, 3s);
  EXPECT_EQ(counters().body_timeouts.load(), 1u);
}

// A connection from another address of the loopback network (all of 127/8 is this host's).
UniqueFd connect_from(const char* source, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval tv{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  check(::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from), "bind");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  check(::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), "connect");
  return fd;
}

// GET target on fd with the key, Connection: close; everything the server answers.
std::string get_on(int fd, std::string_view target) {
  EXPECT_TRUE(testing::send_all(fd, std::string("GET ") + std::string(target) +
                                        " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey +
                                        "\r\nConnection: close\r\n\r\n"));
  return read_all(fd);
}

// An async route that answers only when the test says: a connection serving a request.
struct Held {
  Latch entered;
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
  void add_to(Router& r) {
    r.add_async(http::verb::get, "/held", [this](const Request&, std::shared_ptr<ResponseWriter> w) {
      std::lock_guard lock(mu);
      writers.push_back(std::move(w));
      entered.open();
    });
  }
  void release() {
    std::lock_guard lock(mu);
    for (auto& w : writers) w->send(Response::text("released"));
  }
};

TEST_F(HttpServerTest, AnIdleConnectionMakesRoomForANewOne) {
  auto options = test_options();
  options.max_connections = 1;
  start(base_routes(), options);
  Client first(port_);
  ASSERT_EQ(first.request(http::verb::get, "/items/1").status, 200u);
  std::this_thread::sleep_for(20ms);  // the server marks it idle once its answer is out
  // first waits for its next request: its place goes to the newcomer, which is served.
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/2").status, 200u);
  EXPECT_TRUE(first.closed_by_server(2s));
  EXPECT_EQ(counters().connections_evicted.load(), 1u);
  EXPECT_EQ(counters().connections_rejected.load(), 0u);
}

TEST_F(HttpServerTest, WithEveryConnectionBusyANewOneGets503NamingTheLimit) {
  auto options = test_options();
  options.max_connections = 1;
  Router r = base_routes();
  Held held;
  held.add_to(r);
  start(std::move(r), options);
  auto busy = testing::connect_loopback(port_, 5);
  ASSERT_TRUE(testing::send_all(busy.get(), std::string("GET /held HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
                                                kKey + "\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(held.entered.wait(5s));
  auto refused = testing::connect_loopback(port_, 5);
  const std::string raw = get_on(refused.get(), "/items/1");
  EXPECT_EQ(status_of(raw), 503u) << raw;
  EXPECT_NE(raw.find("Too many connections: limits.connections is 1"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Retry-After: 1\r\n"), std::string::npos) << raw;
  EXPECT_EQ(counters().connections_rejected.load(), 1u);
  held.release();  // the busy one was never touched
  EXPECT_EQ(status_of(read_all(busy.get())), 200u);
  // Its place is free again once it has closed.
  const auto deadline = Clock::now() + 3s;
  unsigned status = 0;
  while (Clock::now() < deadline && (status = fetch(port_, http::verb::get, "/items/3").status) != 200u)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(status, 200u);
}

TEST_F(HttpServerTest, AnAddressAtItsLimitGets429AndOtherAddressesAreServed) {
  auto options = test_options();
  options.max_connections = 10;
  options.max_connections_per_address = 1;
  Router r = base_routes();
  Held held;
  held.add_to(r);
  start(std::move(r), options);
  auto busy = connect_from("127.0.0.7", port_);
  ASSERT_TRUE(testing::send_all(
      busy.get(), std::string("GET /held HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kKey + "\r\n\r\n"));
  ASSERT_TRUE(held.entered.wait(5s));
  auto same = connect_from("127.0.0.7", port_);
  const std::string raw = get_on(same.get(), "/items/1");
  EXPECT_EQ(status_of(raw), 429u) << raw;
  EXPECT_NE(raw.find("Too many connections from your address: limits.connections_per_address is 1"), std::string::npos)
      << raw;
  auto other = connect_from("127.0.0.8", port_);
  EXPECT_EQ(status_of(get_on(other.get(), "/items/1")), 200u);
  held.release();
}

TEST_F(HttpServerTest, ConnectionsThatNeverPresentedTheKeyMakeRoomFirst) {
  auto options = test_options();
  options.max_connections = 2;
  start(base_routes(), options);
  Client authed(port_);  // the older of the two idle ones
  ASSERT_EQ(authed.request(http::verb::get, "/items/1").status, 200u);
  std::this_thread::sleep_for(5ms);
  Client anonymous(port_);
  ASSERT_EQ(anonymous.request(http::verb::get, "/health", {}, {}).status, 200u);
  std::this_thread::sleep_for(20ms);  // the server marks it idle once its answer is out
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/2").status, 200u);
  EXPECT_TRUE(anonymous.closed_by_server(2s));
  EXPECT_EQ(authed.request(http::verb::get, "/items/3").status, 200u) << "the authenticated one stayed";
}

TEST_F(HttpServerTest, RouteBodyLimitOverridesAndSpoolsToAFile) {
  start(base_routes());
  std::string big(40 * 1024, 'u');
  big[0] = 'S';
  auto r = fetch(port_, http::verb::post, "/upload", big);
  ASSERT_EQ(r.status, 200u) << r.body;
  auto j = r.json_body();
  EXPECT_EQ(j["size"], big.size());
  EXPECT_EQ(j["in_memory"], 0);
  EXPECT_EQ(j["content"], big);
  EXPECT_EQ(fetch(port_, http::verb::post, "/upload", std::string(65 * 1024, 'u')).status, 413u);
}

TEST_F(HttpServerTest, ExpectContinueGets100BeforeTheBody) {
  start(base_routes());
  auto fd = testing::connect_loopback(port_, 5);
  ASSERT_TRUE(
      testing::send_all(fd.get(), std::string("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kKey +
                                      "\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"));
  char buf[64];
  ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(testing::send_all(fd.get(), "hello"));
  auto raw = read_all(fd.get());
  EXPECT_EQ(status_of(raw), 200u) << raw;
  EXPECT_NE(raw.find(R"("body":"hello")"), std::string::npos) << raw;
}

TEST_F(HttpServerTest, TenMegabytesOfHeadersIs431AndTheServerServesTheNextClient) {
  start(base_routes());
  auto fd = testing::connect_loopback(port_, 5);
  std::string request = "GET /health HTTP/1.1\r\nHost: x\r\n";
  const std::string line = "X-Filler: " + std::string(1000, 'h') + "\r\n";
  while (request.size() < 10 * 1024 * 1024) request += line;
  request += "\r\n";
  // The send may be cut short once the server has answered; the answer must still arrive.
  std::thread sender([&] { testing::send_all(fd.get(), request); });
  auto raw = read_all(fd.get());
  sender.join();
  EXPECT_EQ(status_of(raw), 431u) << raw.substr(0, 200);
  EXPECT_NE(raw.find(R"({"detail":"Request header fields too large"})"), std::string::npos);
  EXPECT_EQ(counters().header_too_large.load(), 1u);

  EXPECT_EQ(fetch(port_, http::verb::get, "/health", {}, {}).status, 200u);
}

TEST_F(HttpServerTest, MalformedRequestsAre400) {
  start(base_routes());
  // The last two are well-formed HTTP with a bad target: the connection could stay open, so
  // they ask for close to let read_all() end.
  for (std::string bad : {"GARBAGE\r\n\r\n", "GET /health HTTP/1.1\r\nBad Header\r\n\r\n",
                          "GET http://evil.example/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                          "GET /items/a%00b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"}) {
    auto fd = testing::connect_loopback(port_, 5);
    ASSERT_TRUE(testing::send_all(fd.get(), bad));
    auto raw = read_all(fd.get());
    EXPECT_EQ(status_of(raw), 400u) << bad << " → " << raw;
    EXPECT_NE(raw.find("{\"detail\":"), std::string::npos) << raw;
  }
  EXPECT_EQ(fetch(port_, http::verb::get, "/health", {}, {}).status, 200u);
}

TEST_F(HttpServerTest, SlowClientIsCutOffAtTheHeaderDeadlineWhileOthersAreServed) {
  auto options = test_options();
  options.header_timeout = 1500ms;
  start(base_routes(), options);

  std::promise<std::pair<std::string, Clock::duration>> slow_result;
  std::thread slow([&] {
    auto fd = testing::connect_loopback(port_, 5);
    const std::string request = "GET /health HTTP/1.1\r\nHost: slow\r\n\r\n";
    auto begin = Clock::now();
    std::string received;
    for (char c : request) {  // one byte a second, watching for the server's answer
      if (!testing::send_all(fd.get(), std::string(1, c))) break;
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 1000) > 0) {
        received = read_all(fd.get());
        break;
      }
    }
    slow_result.set_value({received, Clock::now() - begin});
  });

  std::this_thread::sleep_for(300ms);
  auto begin = Clock::now();
  auto r = fetch(port_, http::verb::get, "/health", {}, {});
  auto normal_took = Clock::now() - begin;
  EXPECT_EQ(r.status, 200u);
  EXPECT_LT(normal_took, 500ms);

  auto [received, took] = slow_result.get_future().get();
  slow.join();
  EXPECT_EQ(status_of(received), 408u) << received;
  EXPECT_GE(took, 1400ms);
  EXPECT_LT(took, 3500ms);
  EXPECT_EQ(counters().header_timeouts.load(), 1u);
}

TEST_F(HttpServerTest, KeepAliveReusesTheConnectionAndIdleOnesAreClosed) {
  auto options = test_options();
  options.idle_timeout = 400ms;
  start(base_routes(), options);
  Client c(port_);
  for (int i = 0; i < 3; ++i) {
    auto r = c.request(http::verb::get, "/items/" + std::to_string(i));
    ASSERT_EQ(r.status, 200u) << r.ec.message();
    EXPECT_EQ(r.headers.find(http::field::connection), r.headers.end());  // HTTP/1.1 default: keep-alive
  }
  EXPECT_EQ(counters().connections_accepted.load(), 1u);
  EXPECT_EQ(counters().requests.load(), 3u);
  EXPECT_TRUE(c.closed_by_server(2s));
  EXPECT_EQ(counters().idle_timeouts.load(), 1u);
}

TEST_F(HttpServerTest, AsyncHandlersDoNotHoldAThreadWhileWaiting) {
  constexpr int kPending = 4;  // more long-polls than io threads (2)
  constexpr int kFast = 50;
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
  std::atomic<int> fast_done{0};
  Latch all_fast_done;

  Router r = base_routes();
  r.add_async(http::verb::get, "/wait", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    std::lock_guard lock(mu);
    writers.push_back(std::move(w));
  });
  start(std::move(r));

  // The completer answers the long-polls from its own thread after 200 ms, once the fast
  // requests are done (or after 10 s, and then the test fails below).
  std::atomic<bool> fast_all_done_first{false};
  std::thread completer([&] {
    std::this_thread::sleep_for(200ms);
    fast_all_done_first = all_fast_done.wait(10s);
    std::lock_guard lock(mu);
    for (auto& w : writers) EXPECT_TRUE(w->send(Response::json({{"waited", true}})));
  });

  net::io_context ioc;
  struct Call {
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
    explicit Call(net::io_context& io) : stream(io) {}
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::atomic<int> pending_ok{0};
  auto launch = [&](std::string target, std::function<void(const Call&)> done) {
    calls.push_back(std::make_unique<Call>(ioc));
    Call& call = *calls.back();
    call.req = make_request(http::verb::get, std::move(target), {}, kAuth);
    call.stream.expires_after(15s);
    call.stream.async_connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), [&call, done](beast::error_code ec) {
          ASSERT_FALSE(ec) << ec.message();
          http::async_write(call.stream, call.req, [&call, done](beast::error_code ec2, size_t) {
            ASSERT_FALSE(ec2) << ec2.message();
            http::async_read(call.stream, call.buffer, call.res, [&call, done](beast::error_code ec3, size_t) {
              EXPECT_FALSE(ec3) << ec3.message();
              done(call);
            });
          });
        });
  };
  for (int i = 0; i < kPending; ++i)
    launch("/wait", [&](const Call& c) {
      EXPECT_EQ(c.res.result_int(), 200u);
      EXPECT_EQ(fast_done.load(), kFast) << "a long-poll finished before the fast requests";
      ++pending_ok;
    });
  // Let the long-polls reach their handlers before the fast requests start.
  auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    ioc.poll();
    std::lock_guard lock(mu);
    if (writers.size() == kPending) break;
  }
  for (int i = 0; i < kFast; ++i)
    launch("/items/" + std::to_string(i), [&](const Call& c) {
      EXPECT_EQ(c.res.result_int(), 200u);
      if (++fast_done == kFast) all_fast_done.open();
    });
  ioc.run();
  completer.join();
  EXPECT_TRUE(fast_all_done_first);
  EXPECT_EQ(fast_done.load(), kFast);
  EXPECT_EQ(pending_ok.load(), kPending);
}

TEST_F(HttpServerTest, AsyncHandlerLearnsWhenTheClientLeaves) {
  Latch closed;
  std::shared_ptr<ResponseWriter> kept;
  Latch entered;
  Router r = base_routes();
  r.add_async(http::verb::get, "/hang", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    w->on_close([&] { closed.open(); });
    kept = std::move(w);
    entered.open();
  });
  start(std::move(r));
  {
    auto fd = testing::connect_loopback(port_, 5);
    ASSERT_TRUE(testing::send_all(
        fd.get(), std::string("GET /hang HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kKey + "\r\n\r\n"));
    ASSERT_TRUE(entered.wait(5s));
  }  // the client closes its socket
  EXPECT_TRUE(closed.wait(5s));
  EXPECT_FALSE(kept->is_open());
  EXPECT_FALSE(kept->send(Response::text("late")));
  EXPECT_EQ(counters().client_aborts.load(), 1u);
}

TEST_F(HttpServerTest, DroppedWriterAnswers500AndThrowingAsyncHandlerIsMapped) {
  Router r = base_routes();
  r.add_async(http::verb::get, "/drop", [](const Request&, std::shared_ptr<ResponseWriter>) {});
  r.add_async(http::verb::get, "/throw", [](const Request&, std::shared_ptr<ResponseWriter>) {
    throw HttpError(http::status::not_found, "Process not found");
  });
  start(std::move(r));
  auto d = fetch(port_, http::verb::get, "/drop");
  EXPECT_EQ(d.status, 500u);
  EXPECT_EQ(d.body, R"({"detail":"Internal Server Error"})");
  auto t = fetch(port_, http::verb::get, "/throw");
  EXPECT_EQ(t.status, 404u);
  EXPECT_EQ(t.body, R"({"detail":"Process not found"})");
}

TEST_F(HttpServerTest, ChunkedStreamFromAnotherThread) {
  std::vector<std::thread> producers;
  Router r = base_routes();
  r.add_async(http::verb::get, "/stream", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    producers.emplace_back([w] {
      Response head;
      head.headers.set(http::field::content_type, "text/event-stream");
      EXPECT_TRUE(w->begin_chunked(std::move(head)));
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(w->write_chunk("data: " + std::to_string(i) + "\n\n"));
        std::this_thread::sleep_for(20ms);
      }
      EXPECT_TRUE(w->end_chunked());
      EXPECT_FALSE(w->write_chunk("after the end"));
    });
  });
  start(std::move(r));
  Client c(port_);
  auto s = c.request(http::verb::get, "/stream");
  EXPECT_EQ(s.status, 200u);
  EXPECT_TRUE(s.chunked);
  EXPECT_EQ(s.headers[http::field::content_type], "text/event-stream");
  EXPECT_EQ(s.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  // The connection stays usable after a streamed response.
  EXPECT_EQ(c.request(http::verb::get, "/items/1").status, 200u);
  for (auto& t : producers) t.join();
}

TEST_F(HttpServerTest, StreamToAClientThatDoesNotReadIsDroppedAtTheQueueBound) {
  Latch closed;
  std::thread producer;
  std::atomic<std::uint64_t> accepted_bytes{0};
  Router r = base_routes();
  r.add_async(http::verb::get, "/flood", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    w->on_close([&] { closed.open(); });
    producer = std::thread([w, &accepted_bytes] {
      EXPECT_TRUE(w->begin_chunked(Response{}));
      const std::string chunk(64 * 1024, 'f');
      // Bounded: stops when the server drops the stream, at the latest after 256 MiB.
      while (accepted_bytes < 256ull * 1024 * 1024 && w->write_chunk(chunk)) {
        accepted_bytes += chunk.size();
        std::this_thread::sleep_for(200us);
      }
    });
  });
  auto options = test_options();
  options.stream_queue_limit = 1024 * 1024;
  start(std::move(r), options);
  auto fd = testing::connect_loopback(port_, 5);  // sends the request, then never reads
  ASSERT_TRUE(testing::send_all(
      fd.get(), std::string("GET /flood HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kKey + "\r\n\r\n"));
  EXPECT_TRUE(closed.wait(20s));
  producer.join();
  EXPECT_LT(accepted_bytes.load(), 256ull * 1024 * 1024);
  EXPECT_EQ(counters().stream_overflows.load(), 1u);
}

TEST_F(HttpServerTest, FileBodyWithKnownLengthFromADescriptor) {
  std::string content;
  for (int i = 0; i < 20000; ++i) content += std::to_string(i % 10);
  content = content + content + content + content;  // 80000 bytes: more than one 64 KiB piece
  Router r = base_routes();
  r.add_async(http::verb::get, "/file", [&](const Request& req, std::shared_ptr<ResponseWriter> w) {
    UniqueFd fd(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::write(fd.get(), content.data(), content.size()), static_cast<ssize_t>(content.size()));
    Response head;
    head.headers.set(http::field::content_type, "application/octet-stream");
    const std::uint64_t offset = std::stoull(req.query_param("offset").value_or("0"));
    w->send_file(std::move(head), std::move(fd), offset, content.size() - offset);
  });
  start(std::move(r));
  auto f = fetch(port_, http::verb::get, "/file?offset=7");
  EXPECT_EQ(f.status, 200u);
  EXPECT_FALSE(f.chunked);
  EXPECT_EQ(f.headers[http::field::content_length], std::to_string(content.size() - 7));
  EXPECT_EQ(f.body, content.substr(7));
}

TEST_F(HttpServerTest, CorsPreflightAndAllowOriginOnResponses) {
  start(base_routes());
  auto p = fetch(port_, http::verb::options, "/items/1", {},
                 {{"Origin", "https://webui.example"},
                  {"Access-Control-Request-Method", "DELETE"},
                  {"Access-Control-Request-Headers", "authorization,x-user-id"}});
  EXPECT_EQ(p.status, 204u);  // no API key needed: browsers send none on preflight
  EXPECT_EQ(p.headers[http::field::access_control_allow_origin], "*");
  EXPECT_NE(p.headers[http::field::access_control_allow_methods].find("DELETE"), std::string::npos);
  EXPECT_EQ(p.headers[http::field::access_control_allow_headers], "authorization,x-user-id");

  auto g = fetch(port_, http::verb::get, "/items/1", {}, {kAuth[0], {"Origin", "https://webui.example"}});
  EXPECT_EQ(g.status, 200u);
  EXPECT_EQ(g.headers[http::field::access_control_allow_origin], "*");
  auto u = fetch(port_, http::verb::get, "/items/1", {}, {{"Origin", "https://webui.example"}});
  EXPECT_EQ(u.status, 401u);
  EXPECT_EQ(u.headers[http::field::access_control_allow_origin], "*");  // so the browser can read the 401
}

TEST_F(HttpServerTest, CorsWithAnOriginListRefusesOthers) {
  auto options = test_options();
  options.cors_origins = {"https://webui.example"};
  start(base_routes(), options);
  auto allowed = fetch(port_, http::verb::get, "/items/1", {}, {kAuth[0], {"Origin", "https://webui.example"}});
  EXPECT_EQ(allowed.headers[http::field::access_control_allow_origin], "https://webui.example");
  auto other = fetch(port_, http::verb::get, "/items/1", {}, {kAuth[0], {"Origin", "https://evil.example"}});
  EXPECT_EQ(other.status, 200u);
  EXPECT_EQ(other.headers.find(http::field::access_control_allow_origin), other.headers.end());
  auto pre = fetch(port_, http::verb::options, "/items/1", {},
                   {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "GET"}});
  EXPECT_EQ(pre.status, 400u);
}

TEST_F(HttpServerTest, AdoptedListenerCarriesItsTag) {
  Router r = base_routes();
  start(std::move(r));
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  UniqueFd not_listening(::dup(fd.get()));
  EXPECT_THROW(server_->adopt_listener(std::move(not_listening), "x"), Error);
  ASSERT_EQ(::listen(fd.get(), 16), 0);
  auto info = server_->adopt_listener(std::move(fd), "account-42");
  auto r1 = fetch(info.port, http::verb::get, "/items/1");
  ASSERT_EQ(r1.status, 200u);
  EXPECT_EQ(r1.json_body()["listener"], "account-42");
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/1").json_body()["listener"], "");

  server_->close_listener(info.id);
  EXPECT_TRUE(connection_refused(info.port));
  EXPECT_EQ(fetch(port_, http::verb::get, "/items/1").status, 200u);
}

TEST_F(HttpServerTest, GracefulStopFinishesInFlightRequestAndRefusesNewOnes) {
  Latch entered;
  Router r = base_routes();
  r.add(http::verb::get, "/slow", [&](const Request&) {
    entered.open();
    std::this_thread::sleep_for(600ms);
    return Response::json({{"done", true}});
  });
  start(std::move(r));
  Client idle(port_);  // an idle keep-alive connection is closed at once, not after the grace period
  ASSERT_EQ(idle.request(http::verb::get, "/items/1").status, 200u);

  auto in_flight = std::async(std::launch::async, [&] { return fetch(port_, http::verb::get, "/slow"); });
  ASSERT_TRUE(entered.wait(5s));
  auto stop_began = Clock::now();
  auto stopper = std::async(std::launch::async, [&] { server_->stop(); });

  auto deadline = Clock::now() + 2s;
  bool refused = false;
  while (!refused && Clock::now() < deadline) {
    refused = connection_refused(port_);
    if (!refused) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(in_flight.wait_for(0s), std::future_status::timeout) << "refused only after the slow request ended";
  EXPECT_TRUE(idle.closed_by_server(1s));

  auto reply = in_flight.get();
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.headers[http::field::connection], "close");
  stopper.get();
  EXPECT_LT(Clock::now() - stop_began, 2s);  // well inside the 3 s grace
  EXPECT_EQ(server_->connection_count(), 0u);
}

TEST_F(HttpServerTest, StopClosesWhatIsStillBusyAfterTheGracePeriod) {
  Latch entered, closed;
  std::shared_ptr<ResponseWriter> never_answered;
  Router r = base_routes();
  r.add_async(http::verb::get, "/forever", [&](const Request&, std::shared_ptr<ResponseWriter> w) {
    w->on_close([&] { closed.open(); });
    never_answered = std::move(w);
    entered.open();
  });
  auto options = test_options();
  options.shutdown_grace = 500ms;
  start(std::move(r), options);
  auto fd = testing::connect_loopback(port_, 5);
  ASSERT_TRUE(testing::send_all(
      fd.get(), std::string("GET /forever HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kKey + "\r\n\r\n"));
  ASSERT_TRUE(entered.wait(5s));
  auto begin = Clock::now();
  server_->stop();
  auto took = Clock::now() - begin;
  EXPECT_GE(took, 450ms);
  EXPECT_LT(took, 2500ms);
  EXPECT_TRUE(closed.wait(1s));
  EXPECT_EQ(read_all(fd.get()), "");  // closed without an answer
  EXPECT_FALSE(never_answered->send(Response::text("too late")));
  never_answered.reset();  // dropping it after the server stopped is harmless
}

}  // namespace
}  // namespace agentbox::http

namespace agentbox::http {
namespace {

// A takeover route gets the connection whole after the head: here it answers 101 and echoes
// what follows, bytes sent in the same packet as the head included (they were read already).
struct Echo : std::enable_shared_from_this<Echo> {
  explicit Echo(Takeover t) : conn(std::move(t)) {}
  void start() {
    std::string head = "HTTP/1.1 101 Switching Protocols\r\nX-Key-Accepted: ";
    head += conn.key_accepted ? "yes" : "no";
    head += "\r\nX-Path: " + conn.request.path + "\r\n\r\n";
    out = head + beast::buffers_to_string(conn.buffer.data());
    write();
  }
  void write() {
    net::async_write(conn.socket, net::buffer(out), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->read();
    });
  }
  void read() {
    conn.socket.async_read_some(net::buffer(buf), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return;
      self->out.assign(self->buf, n);
      self->write();
    });
  }
  Takeover conn;
  std::string out;
  char buf[256];
};

Router takeover_routes() {
  Router r;
  auto echo = [](Takeover t) { std::make_shared<Echo>(std::move(t))->start(); };
  r.add_takeover(http::verb::get, "/upgrade/{name}", echo);
  r.add_takeover(http::verb::get, "/own-auth", echo, {.auth_in_handler = true});
  return r;
}

TEST_F(HttpServerTest, ATakeoverRouteGetsTheConnectionWithTheBytesReadPastTheHead) {
  start(takeover_routes());
  UniqueFd fd = testing::connect_loopback(port_, 5);
  ASSERT_TRUE(testing::send_all(fd.get(), std::string("GET /upgrade/x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ") +
                                              kKey + "\r\nUpgrade: websocket\r\n\r\nearly bytes|"));
  std::string got;
  char buf[512];
  while (got.find("early bytes|") == std::string::npos) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("X-Key-Accepted: yes\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("X-Path: /upgrade/x\r\n"), std::string::npos) << got;
  ASSERT_TRUE(testing::send_all(fd.get(), "later"));
  std::string later;
  while (later.size() < 5) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    later.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(later, "later");
}

TEST_F(HttpServerTest, ATakeoverRouteNeedsTheKeyUnlessItAuthenticatesItself) {
  start(takeover_routes());
  EXPECT_EQ(fetch(port_, http::verb::get, "/upgrade/x", {}, {}).status, 401u);
  UniqueFd fd = testing::connect_loopback(port_, 5);
  ASSERT_TRUE(testing::send_all(fd.get(), "GET /own-auth HTTP/1.1\r\nHost: a\r\n\r\n"));
  std::string got;
  char buf[512];
  while (got.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got.rfind("HTTP/1.1 101", 0), 0u) << got;
  EXPECT_NE(got.find("X-Key-Accepted: no\r\n"), std::string::npos) << got;
}

TEST_F(HttpServerTest, ATakenOverConnectionHoldsItsPlace) {
  auto options = test_options();
  options.max_connections = 1;
  start(takeover_routes(), options);
  auto upgraded = testing::connect_loopback(port_, 5);
  ASSERT_TRUE(
      testing::send_all(upgraded.get(), std::string("GET /upgrade/x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ") +
                                            kKey + "\r\nUpgrade: websocket\r\n\r\n"));
  char buf[512];
  ASSERT_GT(::recv(upgraded.get(), buf, sizeof buf, 0), 0);  // its 101
  auto refused = testing::connect_loopback(port_, 5);
  const std::string raw = get_on(refused.get(), "/upgrade/y");
  EXPECT_EQ(status_of(raw), 503u) << raw;
  upgraded.reset();  // the takeover ends with its connection, and its place with it
  const auto deadline = Clock::now() + 3s;
  unsigned status = 0;
  while (Clock::now() < deadline && (status = fetch(port_, http::verb::get, "/upgrade/z", {}, {}).status) == 503u)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(status, 401u) << "admitted, and turned down for its missing key";
}

// What the agent's download links start with when no public_url is set: the address the
// connection reached (on a wildcard listener, the one the client dialled), never its Host.
TEST(HttpServerLocalAddress, IsTheAddressTheConnectionArrivedAtNotTheHostHeader) {
  Router r;
  r.add(http::verb::get, "/where", [](const Request& req) { return Response::text(req.local_address); },
        {.is_public = true});
  HttpServer server(std::move(r), test_options());
  const std::uint16_t port = server.listen("0.0.0.0", 0).port;
  server.start();
  auto fd = testing::connect_loopback(port, 5);
  ASSERT_TRUE(testing::send_all(fd.get(), "GET /where HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"));
  const std::string raw = read_all(fd.get());
  EXPECT_EQ(status_of(raw), 200u) << raw;
  EXPECT_TRUE(raw.ends_with("\r\n\r\n127.0.0.1:" + std::to_string(port))) << raw;
  server.stop();
}

}  // namespace
}  // namespace agentbox::http
