// The caller of a request: X-User-Id is required, names one account with its own home owned
// by its uid, and the session cwd is kept per (account, session), never across accounts.
#include "server/caller.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "fs/fs_error.hpp"
#include "server/http_error.hpp"
#include "store/schema.hpp"

namespace agentbox::server {
namespace {

using ::testing::HasSubstr;

struct CallerTest : ::testing::Test {
  std::filesystem::path state = [] {
    char tmpl[] = "/tmp/abx-caller-XXXXXX";
    return std::filesystem::path(::mkdtemp(tmpl));
  }();
  AccountStore accounts{open_state_db(state), UidRange{4100000, 1000}};
  CallerDirectory callers{accounts, state};

  ~CallerTest() override { std::filesystem::remove_all(state); }

  static Request request(std::string user, std::string session = {}) {
    Request req;
    if (!user.empty()) req.headers.set("X-User-Id", user);
    if (!session.empty()) req.headers.set("X-Session-Id", session);
    return req;
  }
};

TEST_F(CallerTest, RequestWithoutUserIsRefusedWith400) {
  try {
    callers.resolve(request(""));
    FAIL() << "no X-User-Id must be refused";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), http::status::bad_request);
    EXPECT_THAT(std::string(e.detail()), HasSubstr("X-User-Id"));
  }
  EXPECT_TRUE(accounts.list().empty()) << "a refused request must create nothing";
}

TEST_F(CallerTest, FirstSightCreatesAPrivateHomeOwnedByTheAccount) {
  Caller alice = callers.resolve(request("alice@example.com"));
  struct stat st {};
  ASSERT_EQ(::stat(callers.host_home(alice.account).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice.account.uid);
  EXPECT_EQ(st.st_gid, alice.account.gid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(alice.box_home, "/home/" + alice.account.name);
  EXPECT_EQ(alice.cwd, alice.box_home) << "without a session the cwd is the home";

  Caller again = callers.resolve(request("alice@example.com"));
  EXPECT_EQ(again.account.uid, alice.account.uid);
  EXPECT_EQ(again.home.get(), alice.home.get()) << "one ConfinedDir per account";

  Caller bob = callers.resolve(request("bob@example.com"));
  EXPECT_NE(bob.account.uid, alice.account.uid);
  EXPECT_NE(bob.account.name, alice.account.name);
}

TEST_F(CallerTest, SessionCwdIsKeptPerAccountAndSession) {
  Caller alice = callers.resolve(request("alice", "chat-1"));
  ASSERT_EQ(::mkdir((callers.host_home(alice.account) + "/proj").c_str(), 0755), 0);
  ASSERT_EQ(::chown((callers.host_home(alice.account) + "/proj").c_str(), alice.account.uid,
                    alice.account.gid), 0);
  EXPECT_EQ(callers.set_cwd(alice, "proj"), alice.box_home + "/proj");

  EXPECT_EQ(callers.resolve(request("alice", "chat-1")).cwd, alice.box_home + "/proj");
  EXPECT_EQ(callers.resolve(request("alice", "chat-2")).cwd, alice.box_home);
  EXPECT_EQ(callers.resolve(request("alice")).cwd, alice.box_home);
  // Another account naming the same session id does not inherit it.
  Caller bob = callers.resolve(request("bob", "chat-1"));
  EXPECT_EQ(bob.cwd, bob.box_home);
}

TEST_F(CallerTest, SessionCwdMustBeAnExistingDirectoryInsideTheHome) {
  Caller alice = callers.resolve(request("alice", "chat-1"));
  try {
    callers.set_cwd(alice, "missing");
    FAIL();
  } catch (const FsError& e) {
    EXPECT_EQ(e.kind(), FsErrorKind::not_found);
  }
  try {
    callers.set_cwd(alice, "/etc");
    FAIL();
  } catch (const FsError& e) {
    EXPECT_EQ(e.kind(), FsErrorKind::forbidden);
  }
  Caller bob = callers.resolve(request("bob", "chat-1"));
  try {
    callers.set_cwd(alice, bob.box_home);
    FAIL() << "another account's home is outside this home";
  } catch (const FsError& e) {
    EXPECT_EQ(e.kind(), FsErrorKind::forbidden);
  }
  Caller no_session = callers.resolve(request("alice"));
  EXPECT_THROW(callers.set_cwd(no_session, "."), HttpError);
}

}  // namespace
}  // namespace agentbox::server
