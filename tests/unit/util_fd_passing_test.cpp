// Descriptors over a Unix socket: what is sent arrives owned, close-on-exec, and working; more
// than one message may carry is refused before anything is sent.
#include "util/fd_passing.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentbox {
namespace {

struct Pair {
  Pair() {
    int p[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p), 0);
    a.reset(p[0]);
    b.reset(p[1]);
  }
  UniqueFd a, b;
};

TEST(FdPassing, DescriptorsArriveWithTheDataOwnedAndCloseOnExec) {
  Pair s;
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd r(p[0]), w(p[1]);
  const int fds[2] = {r.get(), w.get()};
  ASSERT_EQ(send_with_fds(s.a.get(), "hello", fds), 5);

  char buf[16];
  std::vector<UniqueFd> got;
  int flags = -1;
  ASSERT_EQ(recv_with_fds(s.b.get(), buf, sizeof buf, got, 0, &flags), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(flags & (MSG_TRUNC | MSG_CTRUNC), 0);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& fd : got) EXPECT_TRUE(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC);
  // The received write end writes into the original read end.
  ASSERT_EQ(::write(got[1].get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(r.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST(FdPassing, AMessageWithoutDescriptorsHasNone) {
  Pair s;
  ASSERT_EQ(send_with_fds(s.a.get(), "plain", {}), 5);
  char buf[16];
  std::vector<UniqueFd> got;
  ASSERT_EQ(recv_with_fds(s.b.get(), buf, sizeof buf, got), 5);
  EXPECT_TRUE(got.empty());
}

TEST(FdPassing, MoreDescriptorsThanAMessageCarriesAreRefused) {
  Pair s;
  std::vector<int> many(kMaxPassedFds + 1, s.a.get());
  errno = 0;
  EXPECT_EQ(send_with_fds(s.b.get(), "x", many), -1);
  EXPECT_EQ(errno, EINVAL);
  char buf[4];
  std::vector<UniqueFd> got;
  EXPECT_EQ(recv_with_fds(s.a.get(), buf, sizeof buf, got, MSG_DONTWAIT), -1);  // nothing was sent
  EXPECT_EQ(errno, EAGAIN);
}

}  // namespace
}  // namespace agentbox
