// The terminal WebSocket's frame reader (http/websocket_frames.cpp): wslay in the server role,
// configured as TerminalSocket does (64 KiB per message), reading the client's frames from the
// input until it ends, the input handed over in pieces of the sizes its first byte picks (a
// frame split anywhere must read the same). Each text message then goes through the JSON parse
// of the auth frame and the resize message; what is queued in answer (pongs, a close) is sent.
//
// Checks: no message is longer than the limit or than the input; a text message is valid UTF-8;
// reading ends (the input's end, a close, or a protocol error) and, once ended, stays ended.
// wslay itself is Debian's build, not instrumented: coverage guides through our side of it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/websocket_frames.hpp"
#include "util/utf8.hpp"

namespace {

constexpr std::size_t kMaxMessage = 64 * 1024;  // TerminalSocketOptions::max_message_bytes

// As TerminalSocket::on_text / on_auth_frame look at a text message.
void examine_text(std::string_view text) {
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
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 64;  // bytes per recv, then "would block" between pieces
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  bool blocked = false;
  std::string sent;
  std::size_t messages = 0;
  agentbox::http::WebSocketFrames frames(
      [&](uint8_t* buf, std::size_t len) -> long {
        if (input.empty()) return 0;  // the client's end
        if (blocked) return -1;
        blocked = true;
        const std::size_t n = std::min({len, piece, input.size()});
        std::copy_n(input.data(), n, buf);
        input.remove_prefix(n);
        return static_cast<long>(n);
      },
      [&](std::string_view head, std::string_view payload) -> long {
        sent.append(head).append(payload);
        return static_cast<long>(head.size() + payload.size());
      },
      [&](bool text, std::string_view message) {
        ++messages;
        FUZZ_CHECK(message.size() <= kMaxMessage && message.size() <= size);
        if (text) {
          FUZZ_CHECK(agentbox::is_valid_utf8(message));
          examine_text(message);
        }
      },
      kMaxMessage);

  bool open = true;
  for (std::size_t rounds = 0; open && rounds <= size + 1; ++rounds) {
    blocked = false;
    open = frames.read();
    FUZZ_CHECK(frames.flush());
  }
  FUZZ_CHECK(!open);  // every input ends, at the latest with its last byte
  FUZZ_CHECK(!frames.read());
  FUZZ_CHECK(messages <= size);
  return 0;
}
