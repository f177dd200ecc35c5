// The proxy session over real loopback sockets, without a box: the server's takeover route hands
// the connection to a ProxySession whose "box" is a scripted upstream server in this process
// (a socket of the host's namespace). Each test drives one step of the session: framing both
// ways, hop-by-hop fields, interim responses, the WebSocket tunnel, and a failure injected at
// each step (no socket, refused, silence before the head, a bad head, a cut body, a stall, a
// client that leaves).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/proxy.hpp"
#include "api/proxy_session.hpp"
#include "http/server.hpp"
#include "support/raw_socket.hpp"
#include "util/error.hpp"

namespace agentbox::api {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kKey[] = "proxy-test-key-0123456789";
constexpr std::uint16_t kNoBoxPort = 1;  // the test's "account without a box"

// ---- the pure part -------------------------------------------------------------------------------

TEST(UpstreamTarget, IsThePathPastThePortAndTheQueryWithoutUserId) {
  EXPECT_EQ(upstream_target("/proxy/8124"), "/");
  EXPECT_EQ(upstream_target("/proxy/8124/"), "/");
  EXPECT_EQ(upstream_target("/proxy/8124?a=1"), "/?a=1");
  EXPECT_EQ(upstream_target("/proxy/8124/index.html"), "/index.html");
  EXPECT_EQ(upstream_target("/proxy/8124/a%2Fb/c%20d/?x=1&user_id=u-1&y=%26"), "/a%2Fb/c%20d/?x=1&y=%26");
  EXPECT_EQ(upstream_target("/proxy/8124/x?user_id=u-1"), "/x");
  EXPECT_EQ(upstream_target("/proxy/8124//double"), "//double");
  EXPECT_EQ(upstream_target("not-origin-form"), std::nullopt);
}

// ---- a scripted upstream ---------------------------------------------------------------------------

// Reads one request head (and what came with it) from fd.
std::string read_head(int fd, std::string& rest) {
  std::string data;
  char buf[4096];
  while (data.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {};
    data.append(buf, static_cast<size_t>(n));
  }
  const auto end = data.find("\r\n\r\n") + 4;
  rest = data.substr(end);
  return data.substr(0, end);
}

std::string read_until_closed(int fd) {
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Blocks until fd reads end of file (true) or `within` passes (false).
bool sees_eof(int fd, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

// One listening socket on 127.0.0.1; each accepted connection runs `script` on a thread of its
// own with the request head already read. Joined (and the listener closed) by the destructor.
class Upstream {
 public:
  using Script = std::function<void(int fd, const std::string& head, std::string rest)>;
  explicit Upstream(Script script) : script_(std::move(script)) {
    listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    check(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), "bind");
    check(::listen(listener_.get(), 16), "listen");
    check(::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&a), &len), "getsockname");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Upstream() {
    stop_ = true;
    thread_.join();
  }
  std::uint16_t port() const { return port_; }
  std::string head() {  // the last request head seen
    std::lock_guard lock(mu_);
    return head_;
  }

 private:
  void serve() {
    std::vector<std::thread> conns;
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      conns.emplace_back([this, fd] {
        UniqueFd owned(fd);
        timeval tv{5, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::string rest;
        std::string head = read_head(fd, rest);
        {
          std::lock_guard lock(mu_);
          head_ = head;
        }
        if (!head.empty()) script_(fd, head, std::move(rest));
      });
    }
    for (auto& t : conns) t.join();
  }

  Script script_;
  UniqueFd listener_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string head_;
};

// ---- the server under test ---------------------------------------------------------------------------

class ProxySessionTest : public ::testing::Test {
 protected:
  void start(ProxyOptions options = fast_options()) {
    Router router;
    auto handler = [this, options](Takeover conn) {
      auto session = std::make_shared<ProxySession>(std::move(conn), options);
      ProxyTarget target;
      target.port = static_cast<std::uint16_t>(std::stoi(session->request().param("port")));
      target.target = upstream_target(session->request().target).value_or("/");
      target.prefix = "/proxy/" + std::to_string(target.port);
      target.open = [this, port = target.port](int family, std::function<void(UniqueFd, std::string)> done) {
        if (port == kNoBoxPort) return done(UniqueFd(), "no box is running for this user");
        // The host's namespace stands in for the box's; from another thread, as in the daemon,
        // and joined before the server goes (the daemon's launchers stop before its loops).
        std::lock_guard lock(openers_mu_);
        openers_.emplace_back(
            [family, done] { done(UniqueFd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)), ""); });
      };
      session->start(std::move(target));
    };
    for (auto verb : {http::verb::get, http::verb::post, http::verb::head}) {
      router.add_takeover(verb, "/proxy/{port}", handler);
      router.add_takeover(verb, "/proxy/{port}/{path:path}", handler);
    }
    HttpServerOptions http;
    http.api_key = kKey;
    http.threads = 2;
    server_ = std::make_unique<HttpServer>(std::move(router), http);
    port_ = server_->listen("127.0.0.1", 0).port;
    server_->start();
  }
  // Stopped, then the openers joined (they post to its strands), then destroyed.
  void TearDown() override {
    if (server_) server_->stop();
    {
      std::lock_guard lock(openers_mu_);
      for (auto& t : openers_) t.join();
    }
    server_.reset();
  }

  static ProxyOptions fast_options() {
    ProxyOptions o;
    o.connect_timeout = 2s;
    o.response_timeout = 500ms;
    o.idle_timeout = 1s;
    o.tunnel_idle_timeout = 1s;
    o.linger_timeout = 500ms;
    o.buffer_size = 16 * 1024;  // small: bodies take many turns
    return o;
  }

  UniqueFd connect() { return testing::connect_loopback(port_, 5); }

  // Sends the request (head fields after the request line, then body) and reads the whole answer.
  std::string exchange(const std::string& request_line, const std::string& fields = "", const std::string& body = "") {
    UniqueFd fd = connect();
    EXPECT_TRUE(testing::send_all(fd.get(), request_line + "\r\nHost: proxy.test\r\nAuthorization: Bearer " + kKey +
                                                "\r\n" + fields + "\r\n" + body));
    return read_until_closed(fd.get());
  }

  std::mutex openers_mu_;
  std::vector<std::thread> openers_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
};

unsigned status_of(const std::string& raw) {
  return raw.starts_with("HTTP/1.1 ") && raw.size() >= 12 ? static_cast<unsigned>(std::stoul(raw.substr(9, 3))) : 0;
}
std::string body_of(const std::string& raw) {
  const auto end = raw.find("\r\n\r\n");
  return end == std::string::npos ? "" : raw.substr(end + 4);
}
std::string head_of(const std::string& raw) { return raw.substr(0, raw.find("\r\n\r\n") + 2); }
bool has_field(const std::string& head, const std::string& line) {
  return head.find("\r\n" + line + "\r\n") != std::string::npos;
}

// Decodes a chunked body; "" with ok=false when it is cut or malformed.
std::string dechunk(std::string body, bool& ok) {
  std::string out;
  ok = false;
  for (;;) {
    const auto eol = body.find("\r\n");
    if (eol == std::string::npos) return out;
    const size_t size = std::stoul(body.substr(0, eol), nullptr, 16);
    if (size == 0) {
      ok = body.substr(eol) == "\r\n\r\n";
      return out;
    }
    if (body.size() < eol + 2 + size + 2) return out;
    out += body.substr(eol + 2, size);
    body = body.substr(eol + 2 + size + 2);
  }
}

// ---- framing --------------------------------------------------------------------------------------

TEST_F(ProxySessionTest, ALengthBodyPassesWithItsLength) {
  const std::string payload(300 * 1024, 'p');
  Upstream up([&](int fd, const std::string&, std::string) {
    testing::send_all(
        fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(payload.size()) + "\r\nX-App: 1\r\n\r\n" + payload);
  });
  start();
  const auto raw = exchange("GET /proxy/" + std::to_string(up.port()) + "/file?x=1 HTTP/1.1");
  EXPECT_EQ(status_of(raw), 200u);
  EXPECT_TRUE(has_field(head_of(raw), "Content-Length: " + std::to_string(payload.size()))) << head_of(raw);
  EXPECT_TRUE(has_field(head_of(raw), "Connection: close"));
  EXPECT_TRUE(has_field(head_of(raw), "X-App: 1"));
  EXPECT_EQ(body_of(raw), payload);
  EXPECT_TRUE(up.head().starts_with("GET /file?x=1 HTTP/1.1\r\n")) << up.head();
}

TEST_F(ProxySessionTest, ChunkedAndCloseDelimitedBodiesReachTheClientChunked) {
  Upstream chunked([](int fd, const std::string&, std::string) {
    testing::send_all(fd,
                      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n"
                      "6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
  });
  Upstream until_close(
      [](int fd, const std::string&, std::string) { testing::send_all(fd, "HTTP/1.0 200 OK\r\n\r\nuntil the end"); });
  start();
  for (auto [port, want] : {std::pair{chunked.port(), "hello world"}, std::pair{until_close.port(), "until the end"}}) {
    const auto raw = exchange("GET /proxy/" + std::to_string(port) + "/ HTTP/1.1");
    EXPECT_EQ(status_of(raw), 200u) << raw;
    EXPECT_TRUE(has_field(head_of(raw), "Transfer-Encoding: chunked")) << raw;
    bool complete = false;
    EXPECT_EQ(dechunk(body_of(raw), complete), want);
    EXPECT_TRUE(complete) << raw;
  }
}

TEST_F(ProxySessionTest, RequestBodiesArePassedOnWithTheirFraming) {
  std::promise<std::string> got_length, got_chunked;
  Upstream length_up([&](int fd, const std::string&, std::string rest) {
    while (rest.size() < 100000) {
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      rest.append(buf, static_cast<size_t>(n));
    }
    got_length.set_value(rest);
    testing::send_all(fd, "HTTP/1.1 204 No Content\r\n\r\n");
  });
  Upstream chunked_up([&](int fd, const std::string&, std::string rest) {
    while (rest.find("0\r\n\r\n") == std::string::npos) {
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      rest.append(buf, static_cast<size_t>(n));
    }
    got_chunked.set_value(rest);
    testing::send_all(fd, "HTTP/1.1 204 No Content\r\n\r\n");
  });
  start();
  const std::string body(100000, 'b');
  auto raw =
      exchange("POST /proxy/" + std::to_string(length_up.port()) + "/up HTTP/1.1", "Content-Length: 100000\r\n", body);
  EXPECT_EQ(status_of(raw), 204u) << raw;
  EXPECT_EQ(got_length.get_future().get(), body);
  EXPECT_NE(length_up.head().find("\r\nContent-Length: 100000\r\n"), std::string::npos) << length_up.head();

  raw = exchange("POST /proxy/" + std::to_string(chunked_up.port()) + "/up HTTP/1.1", "Transfer-Encoding: chunked\r\n",
                 "3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n");
  EXPECT_EQ(status_of(raw), 204u) << raw;
  bool complete = false;
  EXPECT_EQ(dechunk(got_chunked.get_future().get(), complete), "abcdefg");
  EXPECT_TRUE(complete);
  EXPECT_NE(chunked_up.head().find("\r\nTransfer-Encoding: chunked\r\n"), std::string::npos) << chunked_up.head();
}

TEST_F(ProxySessionTest, HopByHopFieldsAndAuthorizationStayOnTheirSide) {
  Upstream up([](int fd, const std::string&, std::string) {
    testing::send_all(fd,
                      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
                      "Keep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-Kept: 1\r\n\r\nok");
  });
  start();
  const auto raw = exchange("GET /proxy/" + std::to_string(up.port()) + "/ HTTP/1.1",
                            "X-User-Id: someone\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nKeep-Alive: 5\r\n"
                            "TE: trailers\r\nTrailer: X-Sum\r\nUpgrade: h2c\r\nProxy-Authorization: Basic eDp5\r\n"
                            "X-Forwarded-For: 6.6.6.6\r\nX-Kept: 1\r\n");
  ASSERT_EQ(status_of(raw), 200u) << raw;
  const std::string sent = up.head();
  for (const char* gone : {"Authorization", "X-Drop", "Keep-Alive", "\r\nTE:", "Trailer", "Upgrade",
                           "Proxy-Authorization", "6.6.6.6", "keep-alive"})
    EXPECT_EQ(sent.find(gone), std::string::npos) << gone << " reached the box:\n" << sent;
  EXPECT_TRUE(has_field(sent, "X-Kept: 1")) << sent;
  EXPECT_TRUE(has_field(sent, "X-User-Id: someone")) << sent;
  EXPECT_TRUE(has_field(sent, "Connection: close")) << sent;
  EXPECT_TRUE(has_field(sent, "Host: 127.0.0.1:" + std::to_string(up.port()))) << sent;
  EXPECT_TRUE(has_field(sent, "X-Forwarded-Host: proxy.test")) << sent;
  EXPECT_TRUE(has_field(sent, "X-Forwarded-For: 127.0.0.1")) << sent;
  EXPECT_TRUE(has_field(sent, "X-Forwarded-Prefix: /proxy/" + std::to_string(up.port()))) << sent;
  const std::string back = head_of(raw);
  for (const char* gone : {"X-Hop", "Keep-Alive", "Proxy-Authenticate", "Upgrade", "keep-alive"})
    EXPECT_EQ(back.find(gone), std::string::npos) << gone << " reached the client:\n" << back;
  EXPECT_TRUE(has_field(back, "X-Kept: 1")) << back;
  EXPECT_EQ(body_of(raw), "ok");
}

TEST_F(ProxySessionTest, InterimResponsesAreRelayedBeforeTheFinalOne) {
  Upstream up([](int fd, const std::string&, std::string rest) {
    testing::send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n");
    while (rest.size() < 5) {
      char buf[16];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      rest.append(buf, static_cast<size_t>(n));
    }
    testing::send_all(fd, "HTTP/1.1 201 Created\r\nContent-Length: " + std::to_string(rest.size()) + "\r\n\r\n" + rest);
  });
  start();
  UniqueFd fd = connect();
  ASSERT_TRUE(testing::send_all(fd.get(), "POST /proxy/" + std::to_string(up.port()) +
                                              "/ HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + kKey +
                                              "\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  char buf[256];
  const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);  // the body is not sent before the 100
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(testing::send_all(fd.get(), "hello"));
  const auto raw = read_until_closed(fd.get());
  EXPECT_EQ(status_of(raw), 201u) << raw;
  EXPECT_EQ(body_of(raw), "hello");
}

TEST_F(ProxySessionTest, HeadAnswersKeepTheirLengthAndHaveNoBody) {
  Upstream up([](int fd, const std::string&, std::string) {
    testing::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n");
  });
  start();
  const auto raw = exchange("HEAD /proxy/" + std::to_string(up.port()) + "/ HTTP/1.1");
  EXPECT_EQ(status_of(raw), 200u) << raw;
  EXPECT_TRUE(has_field(head_of(raw), "Content-Length: 12345")) << raw;
  EXPECT_EQ(body_of(raw), "");
}

// ---- WebSocket ---------------------------------------------------------------------------------------

TEST_F(ProxySessionTest, AWebSocketUpgradeBecomesATunnelBothWays) {
  Upstream up([](int fd, const std::string& head, std::string rest) {
    if (head.find("\r\nUpgrade: websocket\r\n") == std::string::npos) return;
    // Bytes right behind the 101 go through too.
    testing::send_all(fd,
                      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                      "Sec-WebSocket-Accept: xyz\r\n\r\nserver-first|");
    std::string got = rest;
    char buf[4096];
    while (got.find("END") == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      got.append(buf, static_cast<size_t>(n));
    }
    testing::send_all(fd, "echo:" + got);
    ::shutdown(fd, SHUT_WR);
    read_until_closed(fd);
  });
  start();
  UniqueFd fd = connect();
  ASSERT_TRUE(testing::send_all(fd.get(), "GET /proxy/" + std::to_string(up.port()) +
                                              "/ws HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + kKey +
                                              "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                                              "Sec-WebSocket-Key: abc\r\nSec-WebSocket-Version: 13\r\n\r\nearly|"));
  std::string got;
  char buf[4096];
  while (got.find("server-first|") == std::string::npos) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(status_of(got), 101u) << got;
  EXPECT_TRUE(has_field(head_of(got), "Upgrade: websocket")) << got;
  EXPECT_TRUE(has_field(head_of(got), "Sec-WebSocket-Accept: xyz")) << got;
  EXPECT_NE(up.head().find("\r\nSec-WebSocket-Key: abc\r\n"), std::string::npos) << up.head();
  ASSERT_TRUE(testing::send_all(fd.get(), "later|END"));
  const std::string echoed = read_until_closed(fd.get());  // the box's end of file reaches us
  EXPECT_EQ(echoed, "echo:early|later|END");
}

// ---- failures ----------------------------------------------------------------------------------------

TEST_F(ProxySessionTest, NoSocketInTheBoxIs502WithTheReason) {
  start();
  const auto raw = exchange("GET /proxy/" + std::to_string(kNoBoxPort) + "/ HTTP/1.1");
  EXPECT_EQ(status_of(raw), 502u) << raw;
  EXPECT_NE(body_of(raw).find("no box is running for this user"), std::string::npos) << raw;
}

TEST_F(ProxySessionTest, ARefusedPortIs502) {
  std::uint16_t closed_port;
  {
    Upstream gone([](int, const std::string&, std::string) {});
    closed_port = gone.port();
  }
  start();
  const auto raw = exchange("POST /proxy/" + std::to_string(closed_port) + "/ HTTP/1.1", "Content-Length: 10000\r\n",
                            std::string(10000, 'x'));
  EXPECT_EQ(status_of(raw), 502u) << raw;
  EXPECT_NE(body_of(raw).find("connection refused"), std::string::npos) << raw;
}

TEST_F(ProxySessionTest, SilenceBeforeTheHeadIs504) {
  Upstream up([](int fd, const std::string&, std::string) { sees_eof(fd, 3s); });
  start();
  const auto started = Clock::now();
  const auto raw = exchange("GET /proxy/" + std::to_string(up.port()) + "/ HTTP/1.1");
  EXPECT_EQ(status_of(raw), 504u) << raw;
  EXPECT_NE(body_of(raw).find("did not answer"), std::string::npos) << raw;
  EXPECT_LT(Clock::now() - started, 2s);
}

TEST_F(ProxySessionTest, ABadOrMissingHeadIs502) {
  Upstream closes([](int, const std::string&, std::string) {});
  Upstream garbage([](int fd, const std::string&, std::string) { testing::send_all(fd, "SSH-2.0-OpenSSH\r\n\r\n"); });
  Upstream huge([](int fd, const std::string&, std::string) {
    testing::send_all(fd, "HTTP/1.1 200 OK\r\nX-Big: " + std::string(100 * 1024, 'h') + "\r\n\r\n");
  });
  start();
  for (auto* up : {&closes, &garbage, &huge}) {
    const auto raw = exchange("GET /proxy/" + std::to_string(up->port()) + "/ HTTP/1.1");
    EXPECT_EQ(status_of(raw), 502u) << raw;
    EXPECT_NE(body_of(raw).find("\"detail\""), std::string::npos) << raw;
  }
}

TEST_F(ProxySessionTest, ABodyCutInTheBoxIsCutForTheClient) {
  Upstream length_cut([](int fd, const std::string&, std::string) {
    testing::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly part");
  });
  Upstream chunk_cut([](int fd, const std::string&, std::string) {
    testing::send_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
  });
  start();
  auto raw = exchange("GET /proxy/" + std::to_string(length_cut.port()) + "/ HTTP/1.1");
  EXPECT_EQ(status_of(raw), 200u);
  EXPECT_EQ(body_of(raw), "only part");  // fewer bytes than announced: the client knows
  raw = exchange("GET /proxy/" + std::to_string(chunk_cut.port()) + "/ HTTP/1.1");
  bool complete = true;
  EXPECT_EQ(dechunk(body_of(raw), complete), "hello");
  EXPECT_FALSE(complete) << raw;  // no last chunk
}

TEST_F(ProxySessionTest, AStalledBodyIsCutAfterTheIdleTimeout) {
  Upstream up([](int fd, const std::string&, std::string) {
    testing::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nsome");
    sees_eof(fd, 5s);  // then nothing: the proxy must give up on its own
  });
  start();
  const auto started = Clock::now();
  const auto raw = exchange("GET /proxy/" + std::to_string(up.port()) + "/ HTTP/1.1");
  const auto took = Clock::now() - started;
  EXPECT_EQ(body_of(raw), "some");
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 3s);
}

TEST_F(ProxySessionTest, AClientThatLeavesReleasesTheBoxsConnection) {
  std::promise<bool> upstream_saw_eof;
  Upstream up([&](int fd, const std::string&, std::string) {
    testing::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: one\n\n");
    upstream_saw_eof.set_value(sees_eof(fd, 3s));
  });
  ProxyOptions o = fast_options();
  o.idle_timeout = 10s;  // not what ends it
  start(o);
  {
    UniqueFd fd = connect();
    ASSERT_TRUE(testing::send_all(fd.get(), "GET /proxy/" + std::to_string(up.port()) +
                                                "/ HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + kKey + "\r\n\r\n"));
    std::string got;
    char buf[1024];
    while (got.find("data: one") == std::string::npos) {
      const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      ASSERT_GT(n, 0);
      got.append(buf, static_cast<size_t>(n));
    }
  }  // the client goes
  auto eof = upstream_saw_eof.get_future();
  ASSERT_EQ(eof.wait_for(4s), std::future_status::ready);
  EXPECT_TRUE(eof.get());
}

TEST_F(ProxySessionTest, TheKeyIsRequired) {
  start();
  UniqueFd fd = connect();
  ASSERT_TRUE(testing::send_all(fd.get(), "GET /proxy/8124/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(status_of(read_until_closed(fd.get())), 401u);
}

}  // namespace
}  // namespace agentbox::api
