// The daemon <-> init transport (box/protocol.hpp) over its socketpair.
#include "box/protocol.hpp"

#include <gtest/gtest.h>

namespace agentbox::protocol {
namespace {

// An init that fails at its start sends its error and exits, possibly before it read what the
// daemon had already sent it (the cgroup confirmation, the first spawn request). Its error must
// still reach the daemon: the kernel reports that close as ECONNRESET, ahead of the message.
TEST(BoxProtocol, APeersLastMessageSurvivesItsCloseWithOursUnread) {
  auto [daemon, init] = socket_pair();
  send(daemon.get(), {{"t", "spawn"}, {"id", 1}});  // never read by init
  send(init.get(), {{"t", "error"}, {"message", "mounts: no such source"}});
  init.reset();

  Message m;
  ASSERT_EQ(recv(daemon.get(), m), RecvStatus::message);
  EXPECT_EQ(m.body.value("t", ""), "error");
  EXPECT_EQ(m.body.value("message", ""), "mounts: no such source");
  EXPECT_EQ(recv(daemon.get(), m), RecvStatus::eof);
  EXPECT_EQ(recv(daemon.get(), m, /*nonblocking=*/true), RecvStatus::eof);
}

TEST(BoxProtocol, APeerThatClosesWithNothingSentIsEndOfFile) {
  auto [daemon, init] = socket_pair();
  send(daemon.get(), {{"t", "spawn"}, {"id", 1}});  // unread: the close resets
  init.reset();
  Message m;
  EXPECT_EQ(recv(daemon.get(), m), RecvStatus::eof);
  EXPECT_EQ(recv(daemon.get(), m), RecvStatus::eof);
}

}  // namespace
}  // namespace agentbox::protocol
