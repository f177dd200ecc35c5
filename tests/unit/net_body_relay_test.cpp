// The body relay on Beast's in-memory streams: every framing in and out, pieces smaller than a
// message, a held body, a HEAD's answer, and an error injected at each read and each write.
#include "net/body_relay.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <optional>
#include <string>
#include <vector>

#include "net/hop_by_hop.hpp"

namespace agentbox::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using beast::test::stream;

// The body of a whole response as a client would read it; "" and done=false when it is not one
// (nothing may follow it: the relay must not add bytes past the message).
std::string parse_response(const std::string& raw, bool& done) {
  http::response_parser<http::string_body> p;
  p.eager(true);
  beast::error_code ec;
  const std::size_t used = p.put(asio::buffer(raw), ec);
  done = !ec && p.is_done() && used == raw.size();
  return done ? p.get().body() : "";
}

// A relay of one message from `input` (read in pieces of read_size bytes) to what a peer of
// the output stream receives.
template <bool isRequest>
struct Relay {
  asio::io_context io;
  stream from{io};
  stream to{io};
  stream to_peer{io};
  beast::flat_buffer from_buffer;
  http::parser<isRequest, http::buffer_body> parser;
  std::optional<http::serializer<isRequest, http::buffer_body>> serializer;
  std::vector<char> buffer = std::vector<char>(7);  // small: a body takes many turns
  std::vector<std::string> pieces;                  // as the watch saw them
  int reads = 0, writes = 0;
  std::optional<RelayEnd> end;

  Relay(std::string input, std::size_t read_size, beast::test::fail_count* fc = nullptr)
      : from(fc ? stream(io, *fc) : stream(io)), to(fc ? stream(io, *fc) : stream(io)) {
    to.connect(to_peer);
    from.read_size(read_size);
    from.append(input);  // what the peer sent, then its end of the connection
    from.close_remote();
  }

  // Reads the head, lets edit() change it, and relays the rest.
  template <class Edit = void (*)(http::message<isRequest, http::buffer_body>&)>
  std::string run(
      RelayOptions options = {}, Edit edit = [](auto&) {}) {
    parser.body_limit(boost::none);
    beast::error_code ec;
    http::read_header(from, from_buffer, parser, ec);
    EXPECT_FALSE(ec) << ec.message();
    edit(parser.get());
    serializer.emplace(parser.get());
    if (options.buffer.empty()) options.buffer = buffer;
    auto watch = [this](RelayStep step, std::string_view piece) {
      if (step == RelayStep::read) return void(++reads);
      ++writes;
      pieces.emplace_back(piece);
    };
    async_relay_message(from, from_buffer, parser, to, *serializer, options, watch, [this](RelayEnd e) { end = e; });
    io.run();
    return std::string(to_peer.str());
  }
};

TEST(BodyRelay, ALengthBodyGoesWithItsLengthInPiecesOfTheBuffer) {
  Relay<true> r("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 26\r\n\r\nabcdefghijklmnopqrstuvwxyz", 5);
  const std::string out = r.run();
  ASSERT_TRUE(r.end);
  EXPECT_FALSE(r.end->ec) << r.end->ec.message();
  EXPECT_EQ(r.end->bytes, 26u);
  EXPECT_EQ(out, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 26\r\n\r\nabcdefghijklmnopqrstuvwxyz");
  std::string joined;
  for (const auto& p : r.pieces) {
    EXPECT_LE(p.size(), 7u);
    joined += p;
  }
  EXPECT_EQ(joined, "abcdefghijklmnopqrstuvwxyz");
  EXPECT_GE(r.reads, 4);  // 26 bytes through a 7-byte buffer
}

TEST(BodyRelay, AChunkedBodyIsDecodedAndChunkedAgainWithoutItsExtensionsOrTrailers) {
  Relay<false> r(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n"
      "X-Trailer: t\r\n\r\n",
      64);
  const std::string out = r.run();
  ASSERT_TRUE(r.end);
  EXPECT_FALSE(r.end->ec);
  EXPECT_EQ(r.end->bytes, 11u);
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_TRUE(out.starts_with(head)) << out;
  EXPECT_TRUE(out.ends_with("0\r\n\r\n")) << out;
  EXPECT_EQ(out.find("ext=1"), std::string::npos);
  EXPECT_EQ(out.find("X-Trailer"), std::string::npos);
  bool done = false;
  EXPECT_EQ(parse_response(out, done), "hello world") << out;
  EXPECT_TRUE(done);
}

TEST(BodyRelay, ABodyThatEndsWithTheConnectionCanGoOutChunked) {
  Relay<false> r("HTTP/1.0 200 OK\r\n\r\nuntil the end", 4);
  const std::string out = r.run({}, [](auto& res) {
    res.version(11);
    res.chunked(true);
  });
  ASSERT_TRUE(r.end);
  EXPECT_FALSE(r.end->ec) << r.end->ec.message();
  EXPECT_EQ(r.end->bytes, 13u);
  bool done = false;
  EXPECT_EQ(parse_response(out, done), "until the end") << out;
  EXPECT_TRUE(done);
}

TEST(BodyRelay, TheEditedHeadIsWhatGoes) {
  Relay<true> r("GET /x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nX-Kept: 2\r\n\r\n", 100);
  const std::string out = r.run({}, [](auto& req) {
    remove_hop_by_hop(req);
    req.target("/y");
  });
  EXPECT_EQ(out, "GET /y HTTP/1.1\r\nHost: a\r\nX-Kept: 2\r\n\r\n");
  EXPECT_EQ(r.reads, 0);  // nothing to read past a head without a body
}

TEST(BodyRelay, AHeldBodyGoesWholeAsTheOnePieceAndIsCounted) {
  Relay<true> r("POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", 100);
  r.parser.body_limit(boost::none);
  beast::error_code ec;
  http::read_header(r.from, r.from_buffer, r.parser, ec);
  // As the gateway does: the body read whole by the caller, then relayed with the parser done.
  std::string held;
  while (!r.parser.is_done()) {
    char piece[3];
    r.parser.get().body().data = piece;
    r.parser.get().body().size = sizeof piece;
    http::read(r.from, r.from_buffer, r.parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    ASSERT_FALSE(ec) << ec.message();
    held.append(piece, sizeof piece - r.parser.get().body().size);
  }
  r.parser.get().content_length(held.size());
  r.serializer.emplace(r.parser.get());
  async_relay_message(
      r.from, r.from_buffer, r.parser, r.to, *r.serializer, {.buffer = r.buffer, .held = held},
      [](RelayStep, std::string_view) {}, [&](RelayEnd e) { r.end = e; });
  r.io.run();
  ASSERT_TRUE(r.end);
  EXPECT_FALSE(r.end->ec);
  EXPECT_EQ(r.end->bytes, 5u);
  EXPECT_EQ(r.to_peer.str(), "POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
}

TEST(BodyRelay, TheAnswerToAHeadIsItsHeadAloneWhateverItsFraming) {
  Relay<false> r("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 100);
  r.parser.skip(true);  // the request was a HEAD
  const std::string out = r.run();
  ASSERT_TRUE(r.end);
  EXPECT_FALSE(r.end->ec);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");  // no last chunk after it
}

TEST(BodyRelay, HeadFirstSendsTheHeadBeforeAnyOfTheBodyHasArrived) {
  asio::io_context io;
  stream from(io), from_peer(io), to(io), to_peer(io);
  from.connect(from_peer);
  to.connect(to_peer);
  from.append("POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  beast::flat_buffer from_buffer;
  http::request_parser<http::buffer_body> parser;
  beast::error_code ec;
  http::read_header(from, from_buffer, parser, ec);
  ASSERT_FALSE(ec);
  http::request_serializer<http::buffer_body> serializer(parser.get());
  std::vector<char> buffer(16);
  std::optional<RelayEnd> end;
  async_relay_message(
      from, from_buffer, parser, to, serializer, {.buffer = buffer, .head_first = true},
      [](RelayStep, std::string_view) {}, [&](RelayEnd e) { end = e; });
  io.run_for(std::chrono::milliseconds(50));  // the body has not come: the relay waits for it
  EXPECT_FALSE(end);
  EXPECT_EQ(to_peer.str(), "POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  asio::write(from_peer, asio::buffer(std::string_view("hello")));  // wakes the read waiting for it
  io.restart();
  io.run_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->ec);
  EXPECT_TRUE(std::string(to_peer.str()).ends_with("\r\n\r\nhello"));
}

TEST(BodyRelay, ABodyCutShortEndsTheRelayAtTheReadSide) {
  Relay<false> r("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part", 100);
  const std::string out = r.run();
  ASSERT_TRUE(r.end);
  EXPECT_TRUE(r.end->ec);
  EXPECT_EQ(r.end->failed, RelayStep::read);
  EXPECT_EQ(r.end->bytes, 9u);
  EXPECT_TRUE(out.ends_with("only part")) << out;  // what arrived went on before the end was seen
}

// fail_count n: the n-th operation on either stream fails. Every step of a relay that takes
// several reads and writes fails once; each time the relay ends with that error, says the
// side, and nothing crashes or hangs.
TEST(BodyRelay, AnErrorAtEachStepEndsTheRelayNamingItsSide) {
  const std::string input = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n01234567890123456789";
  bool completed_whole = false;
  for (std::size_t n = 1; n < 40 && !completed_whole; ++n) {
    SCOPED_TRACE("fail at operation " + std::to_string(n));
    beast::test::fail_count fc(n);
    Relay<true> r(input, 6, &fc);
    r.parser.body_limit(boost::none);
    beast::error_code ec;
    http::read_header(r.from, r.from_buffer, r.parser, ec);
    if (ec) continue;  // the failure hit the head's own read
    r.serializer.emplace(r.parser.get());
    async_relay_message(
        r.from, r.from_buffer, r.parser, r.to, *r.serializer, {.buffer = r.buffer}, [](RelayStep, std::string_view) {},
        [&](RelayEnd e) { r.end = e; });
    r.io.run();
    ASSERT_TRUE(r.end) << "the relay never completed";
    if (!r.end->ec) {
      completed_whole = true;  // n is past the last operation
      EXPECT_EQ(r.end->bytes, 20u);
      continue;
    }
    EXPECT_EQ(r.end->ec, beast::test::error::test_failure);
    EXPECT_LE(r.end->bytes, 20u);
  }
  EXPECT_TRUE(completed_whole);
}

}  // namespace
}  // namespace agentbox::net
