// Whose a mirrored home is (backup/mirror_record.hpp): the record each pass writes beside a copy,
// what the mirror lists for a restore, and that a node which never deleted an account (its state
// was lost) keeps that account's copy whole instead of putting it away.
#include "backup/mirror_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "backup/mirror_layout.hpp"
#include "backup/mirror_service.hpp"
#include "support/scratch_dir.hpp"
#include "support/text_file.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::backup {
namespace {

namespace fs = std::filesystem;

// Each test's small files.
void write(const std::string& path, const std::string& text) { testing::write_text_file(path, text); }
std::string read(const std::string& path) { return testing::read_text_file(path); }

UniqueFd open_dir(const std::string& path) {
  return UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

TEST(MirrorRecord, RoundTripsAndRefusesWhatIsNotARecord) {
  const MirrorRecord r{"ünï côdé@example.org", "u-3f2a9c", 2000001, 1767225600};
  EXPECT_EQ(parse_record(record_text(r)), r);
  EXPECT_FALSE(parse_record(""));
  EXPECT_FALSE(parse_record("{\"user\": \"a\", \"name\": \"a-1\"}"));                          // no uid
  EXPECT_FALSE(parse_record("{\"user\": 1, \"name\": \"a-1\", \"uid\": 1, \"created\": 1}"));  // user not text
  EXPECT_FALSE(parse_record("{\"user\": \"\", \"name\": \"a-1\", \"uid\": 1, \"created\": 1}"));
  EXPECT_FALSE(parse_record("{\"user\": \"a\", \"name\": \"a-1\", \"uid\": -1, \"created\": 1}"));
  EXPECT_FALSE(parse_record("[1, 2]"));
}

TEST(MirrorRecord, WrittenAtomicallyAndOnlyWhenItChanges) {
  testing::ScratchDir scratch("mirror-record");
  UniqueFd dir = open_dir(scratch.path());
  EXPECT_FALSE(read_record(dir.get()));
  const MirrorRecord r{"alice@example.org", "alice-3f2a9c", 2000001, 1};
  write_record(dir.get(), r);
  EXPECT_EQ(read_record(dir.get()), r);
  const std::string file = scratch.path() + "/account.json";
  struct stat before {};
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  write_record(dir.get(), r);  // the same: not written again
  struct stat same {};
  ASSERT_EQ(::stat(file.c_str(), &same), 0);
  EXPECT_EQ(same.st_ino, before.st_ino);
  write_record(dir.get(), MirrorRecord{r.user, r.name, 2000007, 1});  // a new uid: replaced by a rename
  struct stat after {};
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);
  EXPECT_EQ(read_record(dir.get())->uid, 2000007u);
  EXPECT_EQ(after.st_mode & 07777, 0600u);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(scratch.path())) ++files;
  EXPECT_EQ(files, 1u) << "no temporary file left";
  write(file, "{damaged");
  EXPECT_FALSE(read_record(dir.get()));
}

TEST(MirrorRecord, TheMirrorListsHomesRecordsAndPutAwayHomes) {
  testing::ScratchDir scratch("mirror-list");
  const std::string m = scratch.path();
  fs::create_directories(m + "/alice-1/home/docs");
  write(m + "/alice-1/account.json", record_text({"alice", "alice-1", 5, 1}));
  fs::create_directories(m + "/bob-2/.deleted/2026-01-01/.account-home");
  fs::create_directories(m + "/bob-2/.deleted/2026-01-03/x");
  write(m + "/bob-2/account.json", record_text({"bob", "bob-2", 6, 1}));
  fs::create_directories(m + "/old-3/home");  // mirrored before records existed
  fs::create_directories(m + "/.not-an-account/home");
  write(m + "/stray-file", "");
  UniqueFd root = open_dir(m);
  std::vector<MirroredAccount> all = mirrored_accounts(root.get());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].dir, "alice-1");
  EXPECT_TRUE(all[0].has_home);
  EXPECT_EQ(all[0].record->user, "alice");
  EXPECT_EQ(all[1].dir, "bob-2");
  EXPECT_FALSE(all[1].has_home);
  EXPECT_EQ(all[1].deleted_on, "2026-01-01");
  EXPECT_EQ(all[2].dir, "old-3");
  EXPECT_FALSE(all[2].record);
}

// The service writes the records; an account gone from its list is put away only when
// deleted_here says it was deleted on this node.
TEST(MirrorRecord, OnlyAccountsDeletedHereArePutAway) {
  testing::ScratchDir scratch("mirror-deleted-here");
  const std::string homes = scratch.path() + "/homes", mirror = scratch.path() + "/mirror";
  fs::create_directories(homes + "/alice");
  fs::create_directories(homes + "/bob");
  write(homes + "/alice/a.txt", "alice's");
  write(homes + "/bob/b.txt", "bob's");
  std::vector<MirrorHome> accounts = {{"alice", homes + "/alice", "alice@x", 2000001, 11},
                                      {"bob", homes + "/bob", "bob@x", 2000002, 12}};
  std::set<std::string> deleted;
  MirrorServiceOptions o;
  o.dir = mirror;
  o.homes = [&] { return accounts; };
  o.deleted_here = [&](const std::string& name) { return deleted.contains(name); };
  MirrorService service(o);
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  {
    UniqueFd a = open_dir(mirror + "/alice");
    EXPECT_EQ(read_record(a.get()), (MirrorRecord{"alice@x", "alice", 2000001, 11}));
  }

  accounts.clear();  // a new, empty state directory: nothing was deleted here
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_EQ(read(mirror + "/alice/home/a.txt"), "alice's");
  EXPECT_EQ(read(mirror + "/bob/home/b.txt"), "bob's");

  deleted.insert("bob");  // bob's account was deleted on this node
  EXPECT_EQ(service.run_pass().total.errors, 0u);
  EXPECT_FALSE(fs::exists(mirror + "/bob/home"));
  EXPECT_EQ(read(mirror + "/bob/.deleted/" + utc_date(std::chrono::system_clock::now()) + "/.account-home/b.txt"),
            "bob's");
  EXPECT_TRUE(fs::exists(mirror + "/bob/account.json")) << "says whose the kept home is";
  EXPECT_EQ(read(mirror + "/alice/home/a.txt"), "alice's");
}

}  // namespace
}  // namespace agentbox::backup
