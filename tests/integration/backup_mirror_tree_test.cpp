// The mirror engine (backup/mirror_tree.hpp) and its service on scratch directories: what is copied, what is
// not copied again, what goes to .deleted and when it is purged, symlinks kept as links, modes,
// owners and times kept, and a file that changes while copied never published.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "backup/mirror_layout.hpp"
#include "backup/mirror_service.hpp"
#include "backup/mirror_tree.hpp"
#include "support/scratch_dir.hpp"
#include "support/text_file.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::backup {
namespace {

namespace fs = std::filesystem;
constexpr const char* kDay = "2026-01-01";

// Each test's small files.
void write(const std::string& path, const std::string& text) { testing::write_text_file(path, text); }
std::string read(const std::string& path) { return testing::read_text_file(path); }

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

void set_mtime(const std::string& path, time_t secs, long nsec = 0) {
  timespec times[2] = {{secs, nsec}, {secs, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
}

class MirrorTreeTest : public ::testing::Test {
 protected:
  MirrorTreeTest() : scratch_("mirror-tree") {
    fs::create_directories(src());
    fs::create_directories(account());
  }

  std::string src() const { return scratch_.path() + "/src"; }
  std::string account() const { return scratch_.path() + "/mirror/alice"; }
  std::string copy(const std::string& rel) const { return account() + "/home/" + rel; }
  std::string kept(const std::string& rel, const std::string& day = kDay) const {
    return account() + "/.deleted/" + day + "/" + rel;
  }

  MirrorStats pass(const std::string& day = kDay, const MirrorTreeOptions& options = {}) {
    UniqueFd s(::open(src().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    UniqueFd a(::open(account().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    MirrorStats stats = mirror_tree(s.get(), a.get(), day, options);
    for (const std::string& m : stats.error_messages) ADD_FAILURE() << m;
    return stats;
  }

  // Names in a mirror directory that are temporary copies.
  static int temps_in(const std::string& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().starts_with(kTempPrefix)) ++n;
    return n;
  }

  testing::ScratchDir scratch_;
};

TEST_F(MirrorTreeTest, FirstPassCopiesBytesModesOwnersAndTimes) {
  fs::create_directories(src() + "/dir/sub");
  write(src() + "/a.txt", "alpha");
  write(src() + "/dir/sub/b.sh", "#!/bin/sh\necho b\n");
  ASSERT_EQ(::chmod((src() + "/a.txt").c_str(), 0640), 0);
  ASSERT_EQ(::chmod((src() + "/dir/sub/b.sh").c_str(), 04755), 0);
  ASSERT_EQ(::chmod((src() + "/dir").c_str(), 0710), 0);
  ASSERT_EQ(::chown((src() + "/a.txt").c_str(), 4242, 4343), 0);
  set_mtime(src() + "/a.txt", 1'600'000'000, 123456789);
  set_mtime(src() + "/dir", 1'500'000'000);

  MirrorStats s = pass();
  EXPECT_EQ(s.files_copied, 2u);
  EXPECT_EQ(s.bytes_copied, 5u + 17u);
  EXPECT_EQ(read(copy("a.txt")), "alpha");
  EXPECT_EQ(read(copy("dir/sub/b.sh")), "#!/bin/sh\necho b\n");
  struct stat a = lstat_of(copy("a.txt"));
  EXPECT_EQ(a.st_mode & 07777, 0640u);
  EXPECT_EQ(a.st_uid, 4242u);
  EXPECT_EQ(a.st_gid, 4343u);
  EXPECT_EQ(a.st_mtim.tv_sec, 1'600'000'000);
  EXPECT_EQ(a.st_mtim.tv_nsec, 123456789);
  EXPECT_EQ(lstat_of(copy("dir/sub/b.sh")).st_mode & 07777, 04755u);
  struct stat d = lstat_of(copy("dir"));
  EXPECT_EQ(d.st_mode & 07777, 0710u);
  EXPECT_EQ(d.st_mtim.tv_sec, 1'500'000'000);  // set after its entries were written
  EXPECT_EQ(temps_in(copy("")), 0);
}

TEST_F(MirrorTreeTest, UnchangedFileIsNotCopiedAgain) {
  write(src() + "/a.txt", "alpha");
  write(src() + "/b.txt", "beta");
  pass();
  const ino_t inode = lstat_of(copy("a.txt")).st_ino;
  MirrorStats s = pass();
  EXPECT_EQ(s.files_copied, 0u);
  EXPECT_EQ(s.unchanged, 2u);
  EXPECT_EQ(lstat_of(copy("a.txt")).st_ino, inode);  // the same file, not a new copy
  // Control: a changed file is copied (and only it).
  write(src() + "/b.txt", "beta, longer");
  s = pass();
  EXPECT_EQ(s.files_copied, 1u);
  EXPECT_EQ(read(copy("b.txt")), "beta, longer");
}

TEST_F(MirrorTreeTest, OverwrittenFileKeepsItsOldVersionUnderDeleted) {
  write(src() + "/notes.md", "version 1");
  pass();
  write(src() + "/notes.md", "version 2!");
  MirrorStats s = pass();
  EXPECT_EQ(s.files_copied, 1u);
  EXPECT_EQ(s.kept_deleted, 1u);
  EXPECT_EQ(read(copy("notes.md")), "version 2!");
  EXPECT_EQ(read(kept("notes.md")), "version 1");
}

TEST_F(MirrorTreeTest, DeletedEntriesMoveToDeletedAtTheirPath) {
  fs::create_directories(src() + "/proj/src");
  write(src() + "/proj/src/main.c", "int main;");
  write(src() + "/proj/README", "readme");
  pass();
  fs::remove(src() + "/proj/src/main.c");
  fs::remove_all(src() + "/proj");
  MirrorStats s = pass("2026-01-02");
  EXPECT_EQ(s.kept_deleted, 1u);  // the whole directory, moved at once
  EXPECT_FALSE(fs::exists(copy("proj")));
  EXPECT_EQ(read(kept("proj/src/main.c", "2026-01-02")), "int main;");
  EXPECT_EQ(read(kept("proj/README", "2026-01-02")), "readme");
}

TEST_F(MirrorTreeTest, AHomesOwnDeletedEntryStaysInTheCopy) {
  fs::create_directories(src() + "/.deleted");
  write(src() + "/.deleted/mine", "the user's");
  pass();
  EXPECT_EQ(read(copy(".deleted/mine")), "the user's");
  EXPECT_FALSE(fs::exists(account() + "/.deleted"));
}

TEST_F(MirrorTreeTest, DeletedDaysArePurgedAfterKeepDays) {
  write(src() + "/old.txt", "old");
  pass("2026-01-01");
  fs::remove(src() + "/old.txt");
  pass("2026-01-01");
  ASSERT_EQ(read(kept("old.txt", "2026-01-01")), "old");
  UniqueFd a(::open(account().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  MirrorStats s;
  purge_deleted(a.get(), "2026-01-07", 7, s);  // six days on: kept
  EXPECT_TRUE(fs::exists(kept("old.txt", "2026-01-01")));
  purge_deleted(a.get(), "2026-01-08", 7, s);  // seven days on: gone
  EXPECT_FALSE(fs::exists(account() + "/.deleted/2026-01-01"));
  EXPECT_EQ(s.errors, 0u);
}

TEST_F(MirrorTreeTest, SymlinkToShadowIsCopiedAsALink) {
  ASSERT_EQ(::symlink("/etc/shadow", (src() + "/x").c_str()), 0);
  ASSERT_EQ(::lchown((src() + "/x").c_str(), 4242, 4242), 0);
  fs::create_directories(src() + "/real");
  write(src() + "/real/f", "inside");
  ASSERT_EQ(::symlink("/etc", (src() + "/etc-link").c_str()), 0);  // a directory link: not walked

  pass();
  struct stat x = lstat_of(copy("x"));
  ASSERT_TRUE(S_ISLNK(x.st_mode));
  EXPECT_EQ(fs::read_symlink(copy("x")).string(), "/etc/shadow");
  EXPECT_EQ(x.st_uid, 4242u);
  EXPECT_TRUE(S_ISLNK(lstat_of(copy("etc-link")).st_mode));
  // Control: a real directory next to them is copied with its contents.
  EXPECT_EQ(read(copy("real/f")), "inside");
}

TEST_F(MirrorTreeTest, FileChangingDuringCopyIsNotPublished) {
  write(src() + "/log", "line 1\n");
  pass();
  write(src() + "/log", "line 1\nline 2\n");
  MirrorTreeOptions grow;
  grow.after_copy = [&](const std::string& rel) {
    if (rel == "log") std::ofstream(src() + "/log", std::ios::app) << "line 3\n";
  };
  MirrorStats s = pass(kDay, grow);
  EXPECT_EQ(s.changing, 1u);
  EXPECT_EQ(s.files_copied, 0u);
  EXPECT_EQ(read(copy("log")), "line 1\n");  // the previous consistent copy stays
  EXPECT_EQ(temps_in(copy("")), 0);
  // The next pass, with the file quiet, publishes it.
  s = pass();
  EXPECT_EQ(s.files_copied, 1u);
  EXPECT_EQ(read(copy("log")), "line 1\nline 2\nline 3\n");
}

TEST_F(MirrorTreeTest, LeftoverTempFromAKilledPassIsRemoved) {
  write(src() + "/a", "a");
  pass();
  const std::string leftover = copy(std::string(kTempPrefix) + "0000dead-1");
  write(leftover, "half a fi");
  pass();
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_FALSE(fs::exists(account() + "/.deleted"));  // removed, not kept as a deletion
  EXPECT_EQ(read(copy("a")), "a");
}

// A restore copies from the mirror (moves/restore_all.cpp): a killed pass's temporary there is
// not copied into the home.
TEST_F(MirrorTreeTest, TemporariesInTheSourceAreSkippedWhenAsked) {
  write(src() + "/a", "a");
  write(src() + "/" + std::string(kTempPrefix) + "0000dead-1", "half a fi");
  pass(kDay, {.skip_temporaries = true});
  EXPECT_EQ(read(copy("a")), "a");
  EXPECT_EQ(temps_in(account() + "/home"), 0);
}

TEST_F(MirrorTreeTest, FifosAndSocketsAreSkipped) {
  ASSERT_EQ(::mkfifo((src() + "/pipe").c_str(), 0600), 0);
  write(src() + "/f", "f");
  MirrorStats s = pass();
  EXPECT_EQ(s.files_copied, 1u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(copy("pipe"))));
}

TEST_F(MirrorTreeTest, FileReplacedByDirectoryAndBack) {
  write(src() + "/thing", "a file");
  pass();
  fs::remove(src() + "/thing");
  fs::create_directories(src() + "/thing");
  write(src() + "/thing/inner", "inner");
  pass();
  EXPECT_EQ(read(copy("thing/inner")), "inner");
  EXPECT_EQ(read(kept("thing")), "a file");
}

}  // namespace
}  // namespace agentbox::backup

namespace agentbox::backup {
namespace {

// The service over two accounts, with its clock injected: what a pass records, and the purge of
// .deleted days by the pass that runs keep_deleted_days later.
TEST(MirrorServiceTest, PassesRecordStatusAndPurgeOnTheInjectedClock) {
  testing::ScratchDir scratch("mirror-service");
  const std::string homes = scratch.path() + "/homes", mirror = scratch.path() + "/mirror";
  fs::create_directories(homes + "/alice/docs");
  fs::create_directories(homes + "/bob");
  write(homes + "/alice/docs/a.txt", "alice's");
  write(homes + "/bob/b.txt", "bob's");
  auto now = std::chrono::system_clock::from_time_t(1'767'225'600);  // 2026-01-01 00:00 UTC
  MirrorServiceOptions o;
  o.dir = mirror;
  o.keep_deleted_days = 7;
  o.status_file = scratch.path() + "/status.json";
  o.homes = [&] {
    return std::vector<MirrorHome>{{"alice", homes + "/alice"}, {"bob", homes + "/bob"}, {"carol", homes + "/carol"}};
  };
  o.clock = [&] { return now; };
  {
    MirrorService service(o);
    PassReport first = service.run_pass();
    EXPECT_EQ(first.total.files_copied, 2u);
    EXPECT_EQ(first.accounts.size(), 2u);  // carol has no home yet: skipped, not an error
    EXPECT_EQ(read(mirror + "/bob/home/b.txt"), "bob's");
    fs::remove(homes + "/alice/docs/a.txt");
    service.run_pass();
    EXPECT_EQ(read(mirror + "/alice/.deleted/2026-01-01/docs/a.txt"), "alice's");

    now += std::chrono::hours(24 * 6);
    service.run_pass();
    EXPECT_TRUE(fs::exists(mirror + "/alice/.deleted/2026-01-01"));  // six days: kept
    now += std::chrono::hours(24);
    service.run_pass();
    EXPECT_FALSE(fs::exists(mirror + "/alice/.deleted/2026-01-01"));  // seven: purged

    nlohmann::json s = service.status();
    EXPECT_EQ(s["passes"], 4);
    EXPECT_EQ(s["running"], false);
    EXPECT_EQ(s["last_pass"]["started"], 1'767'225'600.0 + 7 * 86400);
    EXPECT_EQ(s["last_pass"]["errors"], 0);
  }
  // A new service (the daemon restarted) knows the last pass from the status file.
  MirrorService again(o);
  EXPECT_EQ(again.status()["last_pass"]["started"], 1'767'225'600.0 + 7 * 86400);
  EXPECT_EQ(again.status()["passes"], 0);
}

TEST(MirrorServiceTest, ADeletedAccountsMirrorIsKeptKeepDaysThenGoes) {
  testing::ScratchDir scratch("mirror-gone");
  const std::string homes = scratch.path() + "/homes", mirror = scratch.path() + "/mirror";
  fs::create_directories(homes + "/alice");
  fs::create_directories(homes + "/bob");
  write(homes + "/alice/a.txt", "alice's");
  write(homes + "/bob/b.txt", "bob's");
  auto now = std::chrono::system_clock::from_time_t(1'767'225'600);  // 2026-01-01 00:00 UTC
  std::vector<MirrorHome> accounts = {{"alice", homes + "/alice"}, {"bob", homes + "/bob"}};
  MirrorServiceOptions o;
  o.dir = mirror;
  o.keep_deleted_days = 7;
  o.homes = [&] { return accounts; };
  o.clock = [&] { return now; };
  MirrorService service(o);
  service.run_pass();
  fs::create_directories(mirror + "/.not-an-account");

  accounts.pop_back();  // bob's account is deleted
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_FALSE(fs::exists(mirror + "/bob/home"));
  EXPECT_EQ(read(mirror + "/bob/.deleted/2026-01-01/.account-home/b.txt"), "bob's") << "kept like a deleted file";
  EXPECT_EQ(read(mirror + "/alice/home/a.txt"), "alice's") << "the living are untouched";

  now += std::chrono::hours(24 * 6);
  service.run_pass();
  EXPECT_TRUE(fs::exists(mirror + "/bob/.deleted/2026-01-01/.account-home/b.txt"));
  now += std::chrono::hours(24);
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_FALSE(fs::exists(mirror + "/bob")) << "after keep_deleted_days nothing of bob's is left";
  EXPECT_TRUE(fs::exists(mirror + "/alice/home/a.txt"));
  EXPECT_TRUE(fs::exists(mirror + "/.not-an-account"));
}

TEST(MirrorServiceTest, WorkspacesAreMirroredBesideTheHomeKeptApartAndPutAwayWithIt) {
  testing::ScratchDir scratch("mirror-workspaces");
  const std::string vol = scratch.path() + "/vol", mirror = scratch.path() + "/mirror";
  const std::string ws = vol + "/workspaces/chats/0123abcd";
  fs::create_directories(vol + "/home");
  fs::create_directories(ws);
  write(vol + "/home/notes.txt", "the home's");
  write(ws + "/notes.txt", "chat a's");
  write(ws + ".json", R"({"context":"chat:a","created":1})");
  auto now = std::chrono::system_clock::from_time_t(1'767'225'600);  // 2026-01-01 00:00 UTC
  MirrorHome alice{"alice", vol + "/home"};
  alice.host_workspaces = vol + "/workspaces";
  MirrorHome bob{"bob", scratch.path() + "/bob-home"};
  bob.host_workspaces = scratch.path() + "/bob-workspaces";  // none yet: not an error
  fs::create_directories(bob.host_home);
  std::vector<MirrorHome> accounts = {alice, bob};
  MirrorServiceOptions o;
  o.dir = mirror;
  o.keep_deleted_days = 7;
  o.homes = [&] { return accounts; };
  o.clock = [&] { return now; };
  MirrorService service(o);
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_EQ(read(mirror + "/alice/home/notes.txt"), "the home's");
  EXPECT_EQ(read(mirror + "/alice/workspaces/chats/0123abcd/notes.txt"), "chat a's");
  EXPECT_EQ(read(mirror + "/alice/workspaces/chats/0123abcd.json"), R"({"context":"chat:a","created":1})");
  EXPECT_FALSE(fs::exists(mirror + "/bob/workspaces"));

  // Same relative path deleted in both: each kept, apart.
  fs::remove(vol + "/home/notes.txt");
  fs::remove(ws + "/notes.txt");
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_EQ(read(mirror + "/alice/.deleted/2026-01-01/notes.txt"), "the home's");
  EXPECT_EQ(read(mirror + "/alice/.deleted/2026-01-01/.account-workspaces/chats/0123abcd/notes.txt"), "chat a's");
  EXPECT_FALSE(fs::exists(mirror + "/alice/workspaces/chats/0123abcd/notes.txt"));

  accounts = {bob};  // alice's account is deleted: her workspaces go with her home
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_FALSE(fs::exists(mirror + "/alice/workspaces"));
  EXPECT_TRUE(fs::exists(mirror + "/alice/.deleted/2026-01-01/.account-home"));
  EXPECT_TRUE(fs::exists(mirror + "/alice/.deleted/2026-01-01/.account-workspaces-2/chats/0123abcd.json"));
  now += std::chrono::hours(24 * 7);
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_FALSE(fs::exists(mirror + "/alice")) << "nothing of alice's is left after keep_deleted_days";
}

}  // namespace
}  // namespace agentbox::backup
