// A download link opens one path for one user until it expires, and nothing else.
#include "http/signed_links.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentbox::http {
namespace {

TEST(SignedLinks, OpensOnlyItsUserAndPathUntilItExpires) {
  SignedLinks links("daemon-secret");
  const std::string token = links.sign("alice", "/home/alice/chats/c1/report.csv", 1000);
  EXPECT_TRUE(links.verify("alice", "/home/alice/chats/c1/report.csv", token, 999));
  EXPECT_FALSE(links.verify("alice", "/home/alice/chats/c1/report.csv", token, 1000));  // expired
  EXPECT_FALSE(links.verify("bob", "/home/alice/chats/c1/report.csv", token, 999));
  EXPECT_FALSE(links.verify("alice", "/home/alice/chats/c1/other.csv", token, 999));
  // The boundary between user and path is part of what is signed.
  EXPECT_FALSE(links.verify("alice/", "home/alice/chats/c1/report.csv", token, 999));
}

TEST(SignedLinks, AnotherKeyOrAnEditedTokenIsRefused) {
  SignedLinks links("daemon-secret");
  const std::string token = links.sign("alice", "a.txt", 1000);
  EXPECT_FALSE(SignedLinks("other-secret").verify("alice", "a.txt", token, 1));
  std::string later = token;
  later.replace(0, later.find('.'), "2000");  // a longer life is not for the holder to choose
  EXPECT_FALSE(links.verify("alice", "a.txt", later, 1));
  std::string flipped = token;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(links.verify("alice", "a.txt", flipped, 1));
  for (const std::string& bad : std::vector<std::string>{"", ".", "1000.", "x.00", "1000." + std::string(63, 'a'),
                                                         "1000." + std::string(64, 'G')})
    EXPECT_FALSE(links.verify("alice", "a.txt", bad, 1)) << bad;
}

}  // namespace
}  // namespace agentbox::http
