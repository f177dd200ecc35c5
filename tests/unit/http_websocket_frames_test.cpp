// The terminal WebSocket's frames after the upgrade (http/websocket_frames.hpp), against a
// client written here byte by byte (RFC 6455 frames, masked as a client's must be): messages
// arrive whole however the bytes are split, a ping is answered, a close is echoed, a message over
// the limit closes with 1009, text that is not UTF-8 with 1007, an unmasked frame with 1002, and
// a frame we send goes out in one piece (its head and payload in one send).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "http/websocket_frames.hpp"

namespace agentbox::http {
namespace {

// A client's frame: FIN, opcode, masked with a fixed key unless `masked` is false.
std::string client_frame(uint8_t opcode, std::string_view payload, bool masked = true, bool fin = true) {
  std::string f;
  f += static_cast<char>((fin ? 0x80 : 0) | opcode);
  const uint8_t mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    f += static_cast<char>(mask_bit | payload.size());
  } else if (payload.size() <= 0xFFFF) {
    f += static_cast<char>(mask_bit | 126);
    f += static_cast<char>(payload.size() >> 8);
    f += static_cast<char>(payload.size() & 0xFF);
  } else {
    f += static_cast<char>(mask_bit | 127);
    for (int i = 7; i >= 0; --i) f += static_cast<char>((static_cast<uint64_t>(payload.size()) >> (8 * i)) & 0xFF);
  }
  const char key[4] = {0x12, 0x34, 0x56, 0x78};
  if (masked) f.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) f += masked ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i];
  return f;
}

// The server's frames as the client parses them: (opcode, payload).
std::vector<std::pair<int, std::string>> server_frames(std::string_view bytes) {
  std::vector<std::pair<int, std::string>> out;
  while (bytes.size() >= 2) {
    const int opcode = static_cast<uint8_t>(bytes[0]) & 0x0F;
    EXPECT_EQ(static_cast<uint8_t>(bytes[1]) & 0x80, 0) << "a server's frames are not masked";
    size_t len = static_cast<uint8_t>(bytes[1]) & 0x7F, at = 2;
    if (len == 126) {
      len = (static_cast<uint8_t>(bytes[2]) << 8) | static_cast<uint8_t>(bytes[3]);
      at = 4;
    }
    out.emplace_back(opcode, std::string(bytes.substr(at, len)));
    bytes.remove_prefix(at + len);
  }
  return out;
}

uint16_t close_code(const std::string& payload) {
  return static_cast<uint16_t>((static_cast<uint8_t>(payload[0]) << 8) | static_cast<uint8_t>(payload[1]));
}

struct Peer {
  std::string in;  // what the client sent, not read yet
  size_t piece = 1 << 20;
  bool ended = false;         // the client closed its side once `in` is read
  std::string out;            // what the server sent
  std::vector<size_t> sends;  // bytes per send call
  std::vector<std::pair<bool, std::string>> messages;

  WebSocketFrames frames{
      [this](uint8_t* buf, size_t len) -> long {
        if (in.empty()) return ended ? 0 : -1;
        const size_t n = std::min({len, piece, in.size()});
        in.copy(reinterpret_cast<char*>(buf), n);
        in.erase(0, n);
        return static_cast<long>(n);
      },
      [this](std::string_view head, std::string_view payload) -> long {
        out.append(head).append(payload);
        sends.push_back(head.size() + payload.size());
        return static_cast<long>(head.size() + payload.size());
      },
      [this](bool text, std::string_view payload) { messages.emplace_back(text, std::string(payload)); }, 64 * 1024};
};

TEST(WebSocketFrames, MessagesArriveWholeHoweverTheBytesAreSplit) {
  Peer p;
  p.piece = 1;  // one byte per recv: wslay returns for more after a partial frame, as on a socket
  p.in = client_frame(0x2, "ls\r") + client_frame(0x1, R"({"type":"resize","cols":100,"rows":30})") +
         client_frame(0x2, "ab", true, /*fin=*/false) + client_frame(0x0, "cd") +
         client_frame(0x2, std::string(70000, 'x').substr(0, 300));
  for (int wakeups = 0; !p.in.empty() && wakeups < 100000; ++wakeups) EXPECT_TRUE(p.frames.read());
  ASSERT_EQ(p.messages.size(), 4u);
  EXPECT_EQ(p.messages[0], std::make_pair(false, std::string("ls\r")));
  EXPECT_TRUE(p.messages[1].first);
  EXPECT_EQ(p.messages[2], std::make_pair(false, std::string("abcd")));
  EXPECT_EQ(p.messages[3].second.size(), 300u);
}

TEST(WebSocketFrames, APingIsAnsweredAndOurFramesGoOutInOneSendEach) {
  Peer p;
  p.in = client_frame(0x9, "hi");
  EXPECT_TRUE(p.frames.read());
  p.frames.queue_binary("echo");
  EXPECT_TRUE(p.frames.flush());
  auto frames = server_frames(p.out);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0], std::make_pair(0xA, std::string("hi")));  // the pong
  EXPECT_EQ(frames[1], std::make_pair(0x2, std::string("echo")));
  ASSERT_EQ(p.sends.size(), 2u);
  EXPECT_EQ(p.sends[1], 2u + 4u);  // head and payload together
  EXPECT_FALSE(p.frames.wants_write());
}

TEST(WebSocketFrames, AClientsCloseIsEchoedAndReadingEnds) {
  Peer p;
  p.in = client_frame(0x8, std::string("\x03\xe8", 2) + "bye");
  EXPECT_FALSE(p.frames.read());
  EXPECT_TRUE(p.frames.close_received());
  EXPECT_FALSE(p.frames.peer_gone());
  EXPECT_TRUE(p.frames.flush());
  EXPECT_TRUE(p.frames.close_sent());
  auto frames = server_frames(p.out);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].first, 0x8);
  EXPECT_EQ(close_code(frames[0].second), 1000);
}

TEST(WebSocketFrames, OurCloseCarriesItsCodeAndReasonAfterTheOutputQueuedBeforeIt) {
  Peer p;
  p.frames.queue_binary("last words");
  p.frames.queue_close(4004, "Session not found");
  p.frames.queue_binary("too late");  // nothing after a close
  EXPECT_TRUE(p.frames.flush());
  auto frames = server_frames(p.out);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].second, "last words");
  EXPECT_EQ(frames[1].first, 0x8);
  EXPECT_EQ(close_code(frames[1].second), 4004);
  EXPECT_EQ(frames[1].second.substr(2), "Session not found");
}

struct Refusal {
  std::string frame;
  uint16_t code;
};

TEST(WebSocketFrames, BadFramesCloseWithTheCodeThatSaysWhy) {
  const std::vector<Refusal> cases = {
      {client_frame(0x2, std::string(64 * 1024 + 1, 'x')), 1009},  // over the limit
      {client_frame(0x1, "\xff\xfe"), 1007},                       // text, not UTF-8
      {client_frame(0x2, "ls", /*masked=*/false), 1002},           // a client's frame unmasked
  };
  for (const Refusal& c : cases) {
    Peer p;
    p.in = c.frame + client_frame(0x2, "after");
    EXPECT_FALSE(p.frames.read());
    EXPECT_FALSE(p.frames.peer_gone());
    EXPECT_TRUE(p.frames.flush());
    auto frames = server_frames(p.out);
    ASSERT_EQ(frames.size(), 1u) << c.code;
    EXPECT_EQ(frames[0].first, 0x8);
    EXPECT_EQ(close_code(frames[0].second), c.code);
    EXPECT_TRUE(p.messages.empty()) << c.code;  // nothing of it, nor what came after
  }
}

TEST(WebSocketFrames, TheClientsEndStopsReading) {
  Peer p;
  p.in = client_frame(0x2, "x");
  p.ended = true;
  EXPECT_FALSE(p.frames.read());
  EXPECT_TRUE(p.frames.peer_gone());
  ASSERT_EQ(p.messages.size(), 1u);
}

}  // namespace
}  // namespace agentbox::http
