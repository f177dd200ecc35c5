// The caller of a request: X-User-Id is required, names one account with its own home owned
// by its uid, and the session cwd is kept per (account, session), never across accounts. What
// the directory keeps in memory is bounded, however many user ids it has seen.
#include "accounts/directory.hpp"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "fs/fs_error.hpp"
#include "http/error.hpp"
#include "store/schema.hpp"

namespace agentbox::accounts {

using namespace agentbox::http;
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

struct CallerTest : ::testing::Test {
  std::filesystem::path state = [] {
    char tmpl[] = "/tmp/abx-caller-XXXXXX";
    return std::filesystem::path(::mkdtemp(tmpl));
  }();
  AccountStore accounts{open_state_db(state), UidRange{4100000, 1000}};
  accounts::AccountDirectory callers{accounts, state};

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
  accounts::Caller alice = callers.resolve(request("alice@example.com"));
  struct stat st {};
  ASSERT_EQ(::stat(callers.host_home(alice.account).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice.account.uid);
  EXPECT_EQ(st.st_gid, alice.account.gid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(alice.box_home, "/home/" + alice.account.name);
  EXPECT_EQ(alice.cwd, alice.box_home) << "without a session the cwd is the home";

  accounts::Caller again = callers.resolve(request("alice@example.com"));
  EXPECT_EQ(again.account.uid, alice.account.uid);
  EXPECT_EQ(again.home.get(), alice.home.get()) << "one ConfinedDir per account";

  accounts::Caller bob = callers.resolve(request("bob@example.com"));
  EXPECT_NE(bob.account.uid, alice.account.uid);
  EXPECT_NE(bob.account.name, alice.account.name);
}

TEST_F(CallerTest, ADeletedAccountIsRefusedUntilItsIdStartsAfresh) {
  accounts::Caller carol = callers.resolve(request("carol", "chat"));
  callers.begin_delete(carol.account);
  for (auto attempt : {+[](accounts::AccountDirectory& c) { c.resolve(request("carol")); },
                       +[](accounts::AccountDirectory& c) { c.resolve(request("carol", "chat")); }}) {
    try {
      attempt(callers);
      FAIL() << "a request for an account being deleted must be refused";
    } catch (const HttpError& e) {
      EXPECT_EQ(e.status(), http::status::conflict);
      EXPECT_THAT(std::string(e.detail()), HasSubstr("being deleted"));
    }
  }
  EXPECT_THROW(callers.volume_of(carol.account), HttpError) << "nor is its volume opened for anyone";
  EXPECT_EQ(callers.resolve(request("dave")).account.external_id, "dave") << "others are served";

  ASSERT_TRUE(accounts.remove(carol.account.name, 1));
  callers.end_delete(carol.account);
  accounts::Caller fresh = callers.resolve(request("carol", "chat"));
  EXPECT_NE(fresh.account.name, carol.account.name);
  EXPECT_NE(fresh.account.uid, carol.account.uid);
  EXPECT_EQ(fresh.cwd, fresh.box_home) << "the old session's cwd is forgotten";
  EXPECT_THROW(callers.home(carol.account), HttpError) << "the old account stays refused";
}

TEST_F(CallerTest, AnAccountKeepsABoundedNumberOfSessionCwdsForgettingTheOldest) {
  accounts::AccountDirectory bounded{accounts, state, {.session_cwds = 3}};
  accounts::Caller first = bounded.resolve(request("erin", "s0"));
  const std::string proj = bounded.host_home(first.account) + "/proj";
  ASSERT_EQ(::mkdir(proj.c_str(), 0755), 0);
  ASSERT_EQ(::chown(proj.c_str(), first.account.uid, first.account.gid), 0);
  const std::string in_proj = first.box_home + "/proj";
  for (const char* session : {"s1", "s2", "s3"}) bounded.set_cwd(bounded.resolve(request("erin", session)), in_proj);
  bounded.set_cwd(bounded.resolve(request("erin", "s1")), in_proj);  // s1 is now the most recent
  bounded.set_cwd(bounded.resolve(request("erin", "s4")), in_proj);  // a fourth: s2 goes
  EXPECT_EQ(bounded.resolve(request("erin", "s2")).cwd, first.box_home) << "forgotten: back to the home";
  for (const char* session : {"s1", "s3", "s4"}) EXPECT_EQ(bounded.resolve(request("erin", session)).cwd, in_proj);
  // Another account's sessions do not count against erin's.
  accounts::Caller frank = bounded.resolve(request("frank", "f1"));
  bounded.set_cwd(frank, ".");
  EXPECT_EQ(bounded.resolve(request("erin", "s3")).cwd, in_proj);
}

TEST_F(CallerTest, SessionCwdIsKeptPerAccountAndSession) {
  accounts::Caller alice = callers.resolve(request("alice", "chat-1"));
  ASSERT_EQ(::mkdir((callers.host_home(alice.account) + "/proj").c_str(), 0755), 0);
  ASSERT_EQ(::chown((callers.host_home(alice.account) + "/proj").c_str(), alice.account.uid, alice.account.gid), 0);
  EXPECT_EQ(callers.set_cwd(alice, "proj"), alice.box_home + "/proj");

  EXPECT_EQ(callers.resolve(request("alice", "chat-1")).cwd, alice.box_home + "/proj");
  EXPECT_EQ(callers.resolve(request("alice", "chat-2")).cwd, alice.box_home);
  EXPECT_EQ(callers.resolve(request("alice")).cwd, alice.box_home);
  // Another account naming the same session id does not inherit it.
  accounts::Caller bob = callers.resolve(request("bob", "chat-1"));
  EXPECT_EQ(bob.cwd, bob.box_home);
}

TEST_F(CallerTest, SessionCwdMustBeAnExistingDirectoryInsideTheHome) {
  accounts::Caller alice = callers.resolve(request("alice", "chat-1"));
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
  accounts::Caller bob = callers.resolve(request("bob", "chat-1"));
  try {
    callers.set_cwd(alice, bob.box_home);
    FAIL() << "another account's home is outside this home";
  } catch (const FsError& e) {
    EXPECT_EQ(e.kind(), FsErrorKind::forbidden);
  }
  accounts::Caller no_session = callers.resolve(request("alice"));
  EXPECT_THROW(callers.set_cwd(no_session, "."), HttpError);
}

// A request that only reads makes no volume for an account without one: it is served an empty
// home no account can write into; the first request that may write makes the volume, and reads
// from then on see it.
TEST_F(CallerTest, AReadOfANewUserMakesNoVolumeAndTheFirstWriteDoes) {
  accounts::Caller reader = callers.resolve(request("dora"), false, HomeUse::read);
  const std::string volume = callers.volumes().paths(reader.account.name).root;
  EXPECT_EQ(reader.volume, nullptr);
  EXPECT_FALSE(callers.volumes().exists(reader.account.name));
  EXPECT_FALSE(std::filesystem::exists(volume)) << "a read made the volume";
  EXPECT_EQ(reader.box_home, "/home/" + reader.account.name);
  try {
    struct stat st {};
    reader.home->existing_entry(reader.home->path("notes.txt"), st);
    FAIL() << "the empty home holds nothing";
  } catch (const FsError& e) {
    EXPECT_EQ(e.kind(), FsErrorKind::not_found);
  }
  {
    FsIdentity as_dora = reader.home->as_user();
    EXPECT_THROW(reader.home->open(reader.home->path("notes.txt"), O_WRONLY | O_CREAT, 0600), FsError)
        << "the empty home is read-only to the account";
  }
  EXPECT_TRUE(std::filesystem::is_empty(state / "empty-home"));

  accounts::Caller writer = callers.resolve(request("dora"));
  EXPECT_EQ(writer.account.uid, reader.account.uid);
  ASSERT_NE(writer.volume, nullptr);
  EXPECT_TRUE(callers.volumes().exists(writer.account.name));
  EXPECT_TRUE(std::filesystem::is_directory(callers.host_home(writer.account)));
  accounts::Caller later = callers.resolve(request("dora"), false, HomeUse::read);
  EXPECT_NE(later.volume, nullptr);
  EXPECT_EQ(later.home.get(), writer.home.get()) << "a read of an account with a volume gets its home";
}

// A session's cwd removed behind its back: the session goes on from the home, and set_cwd works.
TEST_F(CallerTest, ADeletedSessionCwdFallsBackToTheHome) {
  accounts::Caller alice = callers.resolve(request("alice", "chat-1"));
  const std::string proj = callers.host_home(alice.account) + "/proj";
  ASSERT_EQ(::mkdir(proj.c_str(), 0755), 0);
  ASSERT_EQ(::chown(proj.c_str(), alice.account.uid, alice.account.gid), 0);
  callers.set_cwd(alice, "proj");
  ASSERT_EQ(::rmdir(proj.c_str()), 0);
  EXPECT_EQ(callers.resolve(request("alice", "chat-1")).cwd, alice.box_home);
}

// Open WebUI's generic tool servers name the user in X-OpenWebUI-User-Id, its terminal proxy in
// ?user_id= (WebSockets): the same value is the same account; X-Terminal-Context-Id keys the
// session where X-Session-Id is absent.
TEST_F(CallerTest, UserAndSessionComeFromEachOfOpenWebUIsHeaders) {
  const accounts::Caller by_ours = callers.resolve(request("carol", "chat-9"));
  Request theirs;
  theirs.headers.set("X-OpenWebUI-User-Id", "carol");
  theirs.headers.set("X-Terminal-Context-Id", "chat-9");
  const accounts::Caller by_theirs = callers.resolve(theirs);
  EXPECT_EQ(by_theirs.account.name, by_ours.account.name);
  EXPECT_EQ(by_theirs.session_id, "chat-9");
  Request both;
  both.headers.set("X-User-Id", "carol");
  both.headers.set("X-OpenWebUI-User-Id", "carol");
  EXPECT_EQ(callers.resolve(both).account.name, by_ours.account.name);
  Request by_query;
  by_query.query.push_back({"user_id", "carol"});
  EXPECT_EQ(callers.resolve(by_query, /*query_user_allowed=*/true).account.name, by_ours.account.name);
  EXPECT_THROW(callers.resolve(by_query), HttpError) << "user_id is only for the routes that allow it";
}

// Whoever can add a header must not be able to pick the account: two sources that disagree, or
// one repeated (a proxy that appends instead of replacing), are refused and create nothing.
TEST_F(CallerTest, DisagreeingOrRepeatedUserIdsAreRefused) {
  auto refused = [&](const Request& req, bool query) {
    try {
      callers.resolve(req, query);
      return false;
    } catch (const HttpError& e) {
      return e.status() == http::status::bad_request;
    }
  };
  Request two;
  two.headers.set("X-User-Id", "mallory");
  two.headers.set("X-OpenWebUI-User-Id", "alice");
  EXPECT_TRUE(refused(two, false));
  Request repeated;
  repeated.headers.insert("X-User-Id", "mallory");
  repeated.headers.insert("X-User-Id", "alice");
  EXPECT_TRUE(refused(repeated, false));
  Request repeated_theirs;
  repeated_theirs.headers.insert("X-OpenWebUI-User-Id", "alice");
  repeated_theirs.headers.insert("X-OpenWebUI-User-Id", "alice");
  EXPECT_TRUE(refused(repeated_theirs, false));
  Request header_and_query;
  header_and_query.headers.set("X-User-Id", "mallory");
  header_and_query.query.push_back({"user_id", "alice"});
  EXPECT_TRUE(refused(header_and_query, true));
  EXPECT_FALSE(accounts.find("mallory").has_value()) << "a refused request created an account";
}

// Small caches over a uid range large enough for thousands of accounts.
struct CallerBoundsTest : ::testing::Test {
  std::filesystem::path state = [] {
    char tmpl[] = "/tmp/abx-caller-bounds-XXXXXX";
    return std::filesystem::path(::mkdtemp(tmpl));
  }();
  AccountStore accounts{open_state_db(state), UidRange{4200000, 10000}};

  ~CallerBoundsTest() override { std::filesystem::remove_all(state); }

  static Request request(const std::string& user) {
    Request req;
    req.headers.set("X-User-Id", user);
    return req;
  }

  static size_t open_fds() {
    return static_cast<size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator()));
  }

  // A file the account wrote into its home, read back through caller.home.
  static std::string read_through_home(const accounts::Caller& caller, const std::string& name) {
    UniqueFd fd = caller.home->open(caller.home->path(name), O_RDONLY);
    char buf[64];
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
  }
};

TEST_F(CallerBoundsTest, ThousandsOfUsersKeepOpenDescriptorsBounded) {
  accounts::AccountDirectory callers(accounts, state, {.open_homes = 50});
  callers.resolve(request("warm-up"));  // the database's own files are open from here on
  const size_t before = open_fds();
  for (int i = 0; i < 2000; ++i) callers.resolve(request("user-" + std::to_string(i)));
  const size_t after = open_fds();
  EXPECT_LE(after, before + 50) << "one descriptor per user ever seen: " << before << " -> " << after;
  EXPECT_EQ(callers.cache_sizes().open_homes, 50u);
  EXPECT_EQ(accounts.list().size(), 2001u) << "every user still got an account";
}

TEST_F(CallerBoundsTest, AnEvictedHomeOpensAgainAndAHeldOneKeepsWorking) {
  accounts::AccountDirectory callers(accounts, state, {.open_homes = 10});
  accounts::Caller first = callers.resolve(request("first"));
  { std::ofstream(callers.host_home(first.account) + "/note") << "kept"; }
  for (int i = 0; i < 50; ++i) callers.resolve(request("other-" + std::to_string(i)));

  // A request still holding the evicted home (in flight) keeps a working descriptor.
  EXPECT_EQ(read_through_home(first, "note"), "kept");
  // The next request opens it again: same account, same home.
  accounts::Caller again = callers.resolve(request("first"));
  EXPECT_NE(again.home.get(), first.home.get()) << "evicted, so opened anew";
  EXPECT_EQ(again.account.name, first.account.name);
  EXPECT_EQ(again.account.uid, first.account.uid);
  EXPECT_EQ(again.box_home, first.box_home);
  EXPECT_EQ(read_through_home(again, "note"), "kept");
  EXPECT_EQ(callers.resolve(request("first")).home.get(), again.home.get()) << "cached again";
}

TEST_F(CallerBoundsTest, KnownIdsAreBoundedAndAMissAsksTheStore) {
  accounts::AccountDirectory callers(accounts, state, {.open_homes = 10, .known_ids = 20});
  accounts::Caller first = callers.resolve(request("first"));
  for (int i = 0; i < 100; ++i) callers.resolve(request("other-" + std::to_string(i)));
  EXPECT_EQ(callers.cache_sizes().known_ids, 20u);
  EXPECT_EQ(callers.cache_sizes().open_homes, 10u);

  accounts::Caller again = callers.resolve(request("first"));
  EXPECT_EQ(again.account.name, first.account.name) << "the store, not a new account";
  EXPECT_EQ(again.account.uid, first.account.uid);
  EXPECT_EQ(accounts.list().size(), 101u);
}

TEST_F(CallerBoundsTest, RecentlyUsedHomesStayWhileOthersAreEvicted) {
  accounts::AccountDirectory callers(accounts, state, {.open_homes = 4});
  accounts::Caller busy = callers.resolve(request("busy"));
  for (int i = 0; i < 20; ++i) {
    callers.resolve(request("other-" + std::to_string(i)));
    ASSERT_EQ(callers.resolve(request("busy")).home.get(), busy.home.get()) << i;
  }
}

TEST_F(CallerBoundsTest, AnIdleHomeIsClosedEvenBelowTheBound) {
  accounts::AccountDirectory callers(accounts, state, {.home_idle = 1s});
  std::weak_ptr<const ConfinedDir> idle = callers.resolve(request("idle")).home;
  ASSERT_FALSE(idle.expired());
  std::this_thread::sleep_for(1100ms);
  callers.resolve(request("someone-else"));
  EXPECT_TRUE(idle.expired()) << "unused for longer than home_idle: its descriptor is closed";
  EXPECT_EQ(callers.cache_sizes().open_homes, 1u);
}

}  // namespace
}  // namespace agentbox::accounts
