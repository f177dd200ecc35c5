// The terminal WebSocket's frame reader (server/terminal_socket.cpp): a Beast websocket stream in
// the server role, accepted from a fixed upgrade request and configured as TerminalSocket does
// (read_message_max 64 KiB, no automatic fragmentation), reading messages with async_read from
// the input (the client's frames) until an error. Each text message then goes through the
// JSON parse of the auth frame and the resize message.
//
// Checks: no message is longer than read_message_max or than the input; a text message is
// valid UTF-8 (see valid_utf8_but_the_end for the one gap Beast leaves); the reading ends with an error (the input ends) and the stream is then no longer
// open, or it closed cleanly.
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace websocket = beast::websocket;

constexpr std::size_t kMaxMessage = 64 * 1024;  // TerminalSocketOptions::max_message_bytes
constexpr int kMaxMessages = 256;

// Valid UTF-8, but for a last character cut short: Beast (1.81) checks a text message's end only
// when its final frame has a payload, so a message ending in an empty continuation frame may end
// inside a character (regressions/websocket/text_ends_inside_a_character). Harmless here: text
// goes to a JSON parser or to the pty, as binary messages do. Anything else invalid is a finding.
bool valid_utf8_but_the_end(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if (i + k == s.size()) return true;  // cut short at the end
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

const http::request<http::empty_body>& upgrade() {
  static const auto req = [] {
    http::request<http::empty_body> r{http::verb::get, "/api/terminals/t1?user_id=alice", 11};
    r.set(http::field::host, "127.0.0.1:8000");
    r.set(http::field::upgrade, "websocket");
    r.set(http::field::connection, "Upgrade");
    r.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
    r.set(http::field::sec_websocket_version, "13");
    return r;
  }();
  return req;
}

// As TerminalSocket::on_text / on_auth_frame look at a text message.
void examine_text(const std::string& text) {
  auto msg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!msg.is_object()) return;
  (void)(msg.value("type", nlohmann::json()) == "auth");
  if (auto token = msg.find("token"); token != msg.end() && token->is_string()) (void)token->get<std::string>();
  for (const char* key : {"cols", "rows"}) {
    auto it = msg.find(key);
    if (it != msg.end() && it->is_number_integer()) (void)it->get<std::int64_t>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static net::io_context ioc;
  ioc.restart();
  beast::test::stream client(ioc), peer(ioc);
  client.connect(peer);
  client.append(std::string_view(reinterpret_cast<const char*>(data), size));
  client.close_remote();  // the client's frames, then EOF

  websocket::stream<beast::test::stream&> ws(client);
  ws.read_message_max(kMaxMessage);
  ws.auto_fragment(false);
  beast::error_code accepted;
  ws.async_accept(upgrade(), [&](beast::error_code ec) { accepted = ec; });
  ioc.run();
  FUZZ_CHECK(!accepted);

  beast::flat_buffer buffer;
  beast::error_code ec;
  int messages = 0;
  for (; !ec && messages < kMaxMessages; ++messages) {
    std::size_t n = 0;
    ws.async_read(buffer, [&](beast::error_code e, std::size_t got) {
      ec = e;
      n = got;
    });
    ioc.restart();
    ioc.run();
    if (ec) break;
    const std::string message = beast::buffers_to_string(buffer.data());
    buffer.consume(buffer.size());
    FUZZ_CHECK(message.size() == n);
    FUZZ_CHECK(message.size() <= kMaxMessage && message.size() <= size);
    if (ws.got_text()) {
      FUZZ_CHECK(valid_utf8_but_the_end(message));
      examine_text(message);
    }
  }
  if (messages < kMaxMessages) FUZZ_CHECK(ec && (!ws.is_open() || ec == websocket::error::closed));
  return 0;
}
