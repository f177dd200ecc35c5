// http::Session driven in memory: Beast's test::stream stands in for the client's socket, so
// each test writes bytes as a client would and reads exactly what the session answered, with no
// network and no thread but the test's. A router of test handlers: keep-alive, pipelining, the
// body and header limits, the header, body and idle deadlines (short real ones), Expect:
// 100-continue, file and streamed bodies, and a failure injected at each read and write
// (fail_count) of a keep-alive exchange, after which the session must be gone: no crash, no
// session left holding itself, a streaming handler told its client is gone.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/response_writer.hpp"
#include "http/session_impl.hpp"
#include "support/test_stream_session.hpp"  // before the definitions it specialises for
#include "util/error.hpp"

namespace agentbox::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using TestStream = beast::test::stream;
using TestSession = Session<TestStream>;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kKey[] = "session-test-key";
const std::string kAuth = std::string("Authorization: Bearer ") + kKey + "\r\n";

HttpServerOptions fast_options() {
  HttpServerOptions o;
  o.api_key = kKey;
  o.header_timeout = 2s;
  o.idle_timeout = 100ms;  // a kept-alive connection ends soon after its last answer
  o.body_timeout = 2s;
  o.linger_timeout = 50ms;
  return o;
}

// What the streaming handler saw: it ran, it ended its answer (end_chunked() was taken), or
// its writer told it the connection ended first (on_close).
struct StreamProbe {
  asio::io_context* io = nullptr;  // where the rest of its answer is produced, a piece a turn
  bool started = false, ended = false, closed_early = false;
};

// /stream's answer: a piece a turn of the loop, each posted after the last is taken, so that a
// write that fails can end the connection with the answer half sent.
void stream_pieces(std::shared_ptr<StreamProbe> probe, std::shared_ptr<ResponseWriter> w, std::size_t i) {
  static constexpr std::array<std::string_view, 3> kPieces{"one,", "two,", "three"};
  if (!w->write_chunk(std::string(kPieces[i]))) return;  // the connection ended: stop here
  if (i + 1 == kPieces.size()) {
    probe->ended = w->end_chunked();
    return;
  }
  asio::post(*probe->io, [probe, w, i] { stream_pieces(probe, w, i + 1); });
}

// A test's routes: /hello, /echo (the body back), /boom (throws), /stream (three chunks, made
// over several turns of the loop), /file (a body from a descriptor), /limited (10-byte limit).
struct Routes {
  std::shared_ptr<StreamProbe> stream = std::make_shared<StreamProbe>();
  std::string file_content = std::string(150'000, 'f') + "end";

  Router make() const {
    Router r;
    r.add(verb::get, "/hello", [](const Request&) { return Response::json({{"hello", "world"}}); });
    r.add(verb::post, "/echo", [](const Request& req) { return Response::text(req.body); });
    r.add(verb::post, "/limited", [](const Request& req) { return Response::text(req.body); }, {.body_limit = 10});
    r.add(verb::get, "/boom", [](const Request&) -> Response { throw std::runtime_error("secret detail"); });
    r.add_async(verb::get, "/stream", [probe = stream](const Request&, std::shared_ptr<ResponseWriter> w) {
      probe->started = true;
      w->on_close([probe] { probe->closed_early = true; });
      w->begin_chunked(Response::text(""));
      asio::post(*probe->io, [probe, w] { stream_pieces(probe, w, 0); });
    });
    r.add_async(verb::get, "/file", [content = file_content](const Request&, std::shared_ptr<ResponseWriter> w) {
      UniqueFd fd(::memfd_create("session-test", MFD_CLOEXEC));
      if (::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size()))
        throw Error("write");
      Response head;
      head.headers.set(field::content_type, "application/octet-stream");
      w->send_file(std::move(head), std::move(fd), 0, content.size());
    });
    return r;
  }
};

struct Answer {
  unsigned status = 0;
  fields headers;
  std::string body;
  bool keep_alive = false;
};

// One connection: the session on one end of a test::stream pair, the test on the other.
class Connection {
 public:
  Connection(const Routes& routes, HttpServerOptions options = fast_options(), beast::test::fail_count* fc = nullptr)
      : Connection(routes.make(), std::move(options), fc) {
    routes.stream->io = &io_;
  }
  explicit Connection(Router routes, HttpServerOptions options = fast_options(), beast::test::fail_count* fc = nullptr)
      : ctx_(std::make_shared<ServerContext>(std::move(routes), std::move(options))), client_(io_) {
    TestStream server = fc ? TestStream(io_, *fc) : TestStream(io_);
    client_.connect(server);
    auto session = std::make_shared<TestSession>(std::move(server), ctx_, "test");
    session_ = session;
    session->start();
  }

  void send(std::string_view bytes) { asio::write(client_, asio::buffer(bytes)); }
  // The client leaves (its end of the connection: the session reads end of file).
  void leave() { client_.close(); }

  // Runs the session's work until pred() holds or `within` passes; pred's last value.
  bool run_until(const std::function<bool()>& pred, std::chrono::milliseconds within = 3s) {
    const auto deadline = Clock::now() + within;
    while (!pred() && Clock::now() < deadline) {
      io_.restart();
      io_.run_for(5ms);
    }
    return pred();
  }
  // Until the session has ended and nothing is left to run.
  bool run_to_end(std::chrono::milliseconds within = 3s) {
    return run_until([&] { return session_.expired() && ctx_->sessions.size() == 0; }, within);
  }
  bool gone() const { return session_.expired(); }

  // Everything the session wrote so far, and the answers in it, parsed as a client would.
  std::string written() const { return std::string(client_.str()); }
  std::vector<Answer> answers() const {
    std::vector<Answer> out;
    beast::flat_buffer in;
    const std::string raw = written();
    asio::buffer_copy(in.prepare(raw.size()), asio::buffer(raw));
    in.commit(raw.size());
    while (in.size() > 0) {
      response_parser<string_body> p;
      p.body_limit(boost::none);
      beast::error_code ec;
      while (!p.is_done() && !ec) {
        const auto used = p.put(in.data(), ec);
        in.consume(used);
        if (ec == error::need_more) ec = {};
        if (used == 0 || in.size() == 0) break;  // what is left (if anything) is cut short
      }
      if (!p.is_done()) break;
      out.push_back({p.get().result_int(), p.get().base(), p.get().body(), p.get().keep_alive()});
    }
    return out;
  }
  bool answered(std::size_t n) {
    return run_until([&] { return answers().size() >= n; });
  }

  const HttpCounters& counters() const { return ctx_->counters; }
  TestStream& client() { return client_; }

 private:
  asio::io_context io_;
  std::shared_ptr<ServerContext> ctx_;
  TestStream client_;
  std::weak_ptr<TestSession> session_;
};

std::string get(std::string_view path) {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: t\r\n" + kAuth + "\r\n";
}
std::string post(std::string_view path, std::string_view body) {
  return "POST " + std::string(path) + " HTTP/1.1\r\nHost: t\r\n" + kAuth +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

// ---------------------------------------------------------------- the request cycle

TEST(HttpSession, KeepAliveServesRequestsOneAfterAnotherUntilIdle) {
  Routes routes;
  Connection c(routes);
  c.send(get("/hello"));
  ASSERT_TRUE(c.answered(1));
  c.send(post("/echo", "second"));
  ASSERT_TRUE(c.answered(2));
  const auto a = c.answers();
  EXPECT_EQ(a[0].status, 200u);
  EXPECT_EQ(a[0].body, R"({"hello":"world"})");
  EXPECT_TRUE(a[0].keep_alive);
  EXPECT_EQ(a[1].body, "second");
  EXPECT_TRUE(a[1].keep_alive);
  EXPECT_FALSE(c.gone());       // kept for the next request...
  ASSERT_TRUE(c.run_to_end());  // ...until idle_timeout
  EXPECT_EQ(c.counters().requests.load(), 2u);
  EXPECT_EQ(c.counters().idle_timeouts.load(), 1u);
}

TEST(HttpSession, PipelinedRequestsAreAnsweredInOrder) {
  Routes routes;
  Connection c(routes);
  c.client().write_size(7);  // and arrive a few bytes at a time
  c.send(get("/hello") + post("/echo", "two") + post("/echo", "three") +
         "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + kAuth + "\r\n");
  ASSERT_TRUE(c.run_to_end());
  const auto a = c.answers();
  ASSERT_EQ(a.size(), 4u) << c.written();
  EXPECT_EQ(a[0].body, R"({"hello":"world"})");
  EXPECT_EQ(a[1].body, "two");
  EXPECT_EQ(a[2].body, "three");
  EXPECT_FALSE(a[3].keep_alive);  // the client asked to close: the session did
  EXPECT_EQ(c.counters().idle_timeouts.load(), 0u);
}

TEST(HttpSession, ABodyOverTheLimitIs413BeforeItIsReadAndTheConnectionCloses) {
  Routes routes;
  Connection c(routes);
  c.send(post("/limited", std::string(100, 'x')));
  ASSERT_TRUE(c.run_to_end());
  auto a = c.answers();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 413u);
  EXPECT_EQ(a[0].body, R"j({"detail":"Request body too large (limit 10 bytes)"})j");
  EXPECT_FALSE(a[0].keep_alive);

  // Chunked: no length to check up front; the parser stops at the limit.
  Connection chunked(routes);
  chunked.send("POST /limited HTTP/1.1\r\nHost: t\r\n" + kAuth +
               "Transfer-Encoding: chunked\r\n\r\n"
               "8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
  ASSERT_TRUE(chunked.run_to_end());
  a = chunked.answers();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 413u);
  EXPECT_EQ(chunked.counters().body_too_large.load(), 1u);
  // At the limit exactly: served.
  Connection fits(routes);
  fits.send(post("/limited", "0123456789"));
  ASSERT_TRUE(fits.answered(1));
  EXPECT_EQ(fits.answers()[0].status, 200u);
}

TEST(HttpSession, AHeadNotCompleteInTimeIs408AndTheConnectionCloses) {
  Routes routes;
  HttpServerOptions o = fast_options();
  o.header_timeout = 150ms;
  Connection c(routes, o);
  const auto started = Clock::now();
  c.send("GET /hello HTTP/1.1\r\nHost: t\r\n");  // and nothing more
  ASSERT_TRUE(c.run_to_end());
  EXPECT_GE(Clock::now() - started, 140ms);
  const auto a = c.answers();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 408u);
  EXPECT_EQ(a[0].body, R"({"detail":"Request header timeout"})");
  EXPECT_EQ(c.counters().header_timeouts.load(), 1u);
}

TEST(HttpSession, AConnectionThatSendsNothingIsClosedAtTheHeaderDeadline) {
  Routes routes;
  HttpServerOptions o = fast_options();
  o.header_timeout = 100ms;
  Connection c(routes, o);
  ASSERT_TRUE(c.run_to_end());
  EXPECT_EQ(c.written(), "");  // nothing to answer
  EXPECT_EQ(c.counters().header_timeouts.load(), 1u);
}

TEST(HttpSession, ABodyThatStallsIs408) {
  Routes routes;
  HttpServerOptions o = fast_options();
  o.body_timeout = 100ms;
  Connection c(routes, o);
  c.send("POST /echo HTTP/1.1\r\nHost: t\r\n" + kAuth + "Content-Length: 10\r\n\r\n123");
  ASSERT_TRUE(c.run_to_end());
  const auto a = c.answers();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 408u);
  EXPECT_EQ(a[0].body, R"({"detail":"Request body timeout"})");
  EXPECT_EQ(c.counters().body_timeouts.load(), 1u);
}

TEST(HttpSession, OversizedAndMalformedHeadsAre431And400) {
  Routes routes;
  HttpServerOptions o = fast_options();
  o.header_limit = 1024;
  Connection big(routes, o);
  big.send("GET /hello HTTP/1.1\r\nX-Big: " + std::string(4096, 'b') + "\r\n\r\n");
  ASSERT_TRUE(big.run_to_end());
  ASSERT_EQ(big.answers().size(), 1u);
  EXPECT_EQ(big.answers()[0].status, 431u);

  Connection bad(routes);
  bad.send("GET /hello HTTP/9.9 what\r\n\r\n");
  ASSERT_TRUE(bad.run_to_end());
  ASSERT_EQ(bad.answers().size(), 1u);
  EXPECT_EQ(bad.answers()[0].status, 400u);
  EXPECT_EQ(bad.counters().bad_requests.load(), 1u);
}

TEST(HttpSession, ExpectContinueGets100BeforeTheBodyIsSent) {
  Routes routes;
  Connection c(routes);
  c.send("POST /echo HTTP/1.1\r\nHost: t\r\n" + kAuth + "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(c.run_until([&] { return c.written().find("100 Continue") != std::string::npos; }));
  EXPECT_EQ(c.written(), "HTTP/1.1 100 Continue\r\n\r\n");
  c.send("hello");
  ASSERT_TRUE(c.run_until([&] { return c.written().find("hello") != std::string::npos; }));
  EXPECT_TRUE(c.written().ends_with("\r\n\r\nhello")) << c.written();
}

TEST(HttpSession, AClientThatLeavesMidRequestEndsTheSessionWithoutAnAnswer) {
  Routes routes;
  Connection c(routes);
  c.send("POST /echo HTTP/1.1\r\nHost: t\r\n" + kAuth + "Content-Length: 10\r\n\r\n123");
  ASSERT_TRUE(c.run_until([&] { return c.counters().requests.load() == 1; }));
  c.leave();
  ASSERT_TRUE(c.run_to_end());
  EXPECT_EQ(c.written(), "");
}

// ---------------------------------------------------------------- handlers

TEST(HttpSession, AHandlersExceptionGoesThroughTheRoutersErrorMap) {
  Routes routes;
  Connection plain(routes);
  plain.send(get("/boom"));
  ASSERT_TRUE(plain.answered(1));
  EXPECT_EQ(plain.answers()[0].status, 500u);
  EXPECT_EQ(plain.answers()[0].body, R"({"detail":"Internal Server Error"})");  // secret detail stays here
  EXPECT_EQ(plain.counters().internal_errors.load(), 1u);

  Router mapped = routes.make();
  mapped.map_errors([](std::exception_ptr, std::string_view context) {
    return error_response(status::service_unavailable, "mapped " + std::string(context));
  });
  Connection c(std::move(mapped));
  c.send(get("/boom"));
  ASSERT_TRUE(c.answered(1));
  EXPECT_EQ(c.answers()[0].status, 503u);
  EXPECT_EQ(c.answers()[0].body, R"({"detail":"mapped GET /boom"})");
}

// A route table's error shape under a prefix reaches every error answer there, whoever made it
// (the error map, the 401, the 404 of no route, the 405), and no answer elsewhere.
TEST(HttpSession, ErrorsUnderAShapedPrefixLeaveInThatShapeAndOthersDoNot) {
  Router r;
  r.add(verb::get, "/v1/boom", [](const Request&) -> Response { throw HttpError(status::not_found, "no", "gone"); });
  r.add(verb::get, "/v1/ok", [](const Request&) { return Response::json({{"detail", "not an error"}}); });
  r.add(verb::get, "/v1x/boom", [](const Request&) -> Response { throw HttpError(status::not_found, "no"); });
  r.shape_errors("/v1", [](Response& e) {
    e.status = status::gone;
    e.body = "shaped " + e.error->detail + " " + e.error->code;
  });
  Connection c(std::move(r));
  c.send(get("/v1/boom") + get("/v1/ok") + get("/v1x/boom") + get("/v1/nothing") +
         "POST /v1/ok HTTP/1.1\r\nHost: t\r\n" + kAuth + "Content-Length: 0\r\n\r\n" +
         "GET /v1/ok HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(c.answered(6));
  const auto a = c.answers();
  EXPECT_EQ(a[0].status, 410u);
  EXPECT_EQ(a[0].body, "shaped no gone");
  EXPECT_EQ(a[1].status, 200u);  // a handler's own JSON is no error, whatever its keys
  EXPECT_EQ(a[1].body, R"({"detail":"not an error"})");
  EXPECT_EQ(a[2].status, 404u);  // "/v1x" is not under "/v1"
  EXPECT_EQ(a[2].body, R"({"detail":"no"})");
  EXPECT_EQ(a[3].body, "shaped Not Found ");
  EXPECT_EQ(a[4].body, "shaped Method Not Allowed ");
  EXPECT_EQ(a[4].headers[field::allow], "GET");  // headers kept
  EXPECT_EQ(a[5].body, "shaped Invalid API key ");
  EXPECT_EQ(a[5].headers[field::www_authenticate], "Bearer");
}

TEST(HttpSession, StreamedAndFileBodiesArriveWhole) {
  Routes routes;
  Connection c(routes);
  c.send(get("/stream") + get("/file"));
  ASSERT_TRUE(c.answered(2));
  const auto a = c.answers();
  EXPECT_EQ(a[0].body, "one,two,three");
  EXPECT_EQ(a[0].headers[field::transfer_encoding], "chunked");
  EXPECT_EQ(a[1].body, routes.file_content);  // read and written in pieces: no sendfile here
  EXPECT_EQ(a[1].headers[field::content_length], std::to_string(routes.file_content.size()));
  EXPECT_TRUE(routes.stream->ended);
  EXPECT_FALSE(routes.stream->closed_early);
}

TEST(HttpSession, AKeyIsAskedOfEveryRouteThatIsNotPublic) {
  Routes routes;
  Connection c(routes);
  c.send("GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(c.run_to_end());
  ASSERT_EQ(c.answers().size(), 1u);
  EXPECT_EQ(c.answers()[0].status, 401u);
  EXPECT_EQ(c.answers()[0].headers[field::www_authenticate], "Bearer");
  EXPECT_EQ(c.counters().unauthorized.load(), 1u);
}

// ---------------------------------------------------------------- a failure at each step

// A keep-alive exchange that takes several reads and writes (a POST with its body in pieces,
// a streamed answer, a file answer); fail_count n makes the n-th read or write of the session's
// stream fail. Whatever step fails, the session ends: no crash, nothing left holding it, and a
// streaming handler whose answer the connection did not outlive is told so (and only then).
TEST(HttpSession, AFailureAtEachReadAndWriteEndsTheSessionCleanly) {
  const std::string exchange = post("/echo", std::string(40'000, 'e')) + get("/stream") + get("/file") +
                               "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + kAuth + "\r\n";
  bool whole = false;
  std::size_t failures = 0;
  for (std::size_t n = 1; n < 200 && !whole; ++n) {
    SCOPED_TRACE("failure at operation " + std::to_string(n));
    Routes routes;
    beast::test::fail_count fc(n);
    {
      Connection c(routes, fast_options(), &fc);
      c.client().write_size(16 * 1024);  // the body takes several reads
      c.send(exchange);
      ASSERT_TRUE(c.run_to_end()) << "the session did not end; it wrote:\n" << c.written().substr(0, 300);
      const auto a = c.answers();
      whole = a.size() == 4 && a[3].body == R"({"hello":"world"})";
      const StreamProbe& stream = *routes.stream;
      EXPECT_EQ(stream.closed_early, stream.started && !stream.ended);
      if (whole) {
        EXPECT_EQ(a[1].body, "one,two,three");
        EXPECT_EQ(a[2].body, routes.file_content);
        continue;
      }
      ++failures;
      // What was answered before the failure is whole and in order: the echo, or the 400 of a
      // body read that failed.
      if (a.size() >= 1) {
        EXPECT_TRUE(a[0].status == 400u || a[0].body == std::string(40'000, 'e'));
      }
      if (a.size() >= 2) {
        EXPECT_EQ(a[1].body, "one,two,three");
      }
    }
  }
  EXPECT_TRUE(whole) << "no run got past every step";
  EXPECT_GE(failures, 8u);  // the exchange has at least that many reads and writes
}

}  // namespace
}  // namespace agentbox::http
