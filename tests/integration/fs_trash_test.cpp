// fs/trash.hpp against real files, as root, with the account's uid: what a delete keeps, what
// restore brings back (also over a name that exists again), and what retention and pressure
// delete first.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fs/confined_dir.hpp"
#include "fs/fs_error.hpp"
#include "fs/trash.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;

constexpr uid_t kUid = 1999998;
constexpr gid_t kGid = 1999998;

class TrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-trash-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    for (const char* d : {"/home", "/trash"}) {
      ASSERT_EQ(::mkdir((base_ + d).c_str(), 0700), 0);
      ASSERT_EQ(::chown((base_ + d).c_str(), kUid, kGid), 0);
    }
    home_ = std::make_unique<ConfinedDir>(ConfinedDir::open_home(base_ + "/home", "/home/alice", kUid, kGid));
    trash_ = std::make_unique<Trash>(base_ + "/trash", *home_);
  }
  void TearDown() override {
    trash_.reset();
    home_.reset();
    stdfs::remove_all(base_);
  }

  void put_file(const std::string& rel, const std::string& text, mode_t mode = 0640) {
    const std::string path = base_ + "/home/" + rel;
    // Parents as the account would have made them.
    for (auto dir = stdfs::path(rel).parent_path(); !dir.empty(); dir = dir.parent_path()) {
      const std::string host = base_ + "/home/" + dir.string();
      stdfs::create_directories(host);
      ASSERT_EQ(::chown(host.c_str(), kUid, kGid), 0);
    }
    std::ofstream(path) << text;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), kUid, kGid), 0);
  }
  std::string read_home(const std::string& rel) {
    std::ifstream in(base_ + "/home/" + rel);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool in_home(const std::string& rel) {
    struct stat st;
    return ::lstat((base_ + "/home/" + rel).c_str(), &st) == 0;
  }
  HomePath p(const std::string& rel) { return home_->path(rel); }

  std::string base_;
  std::unique_ptr<ConfinedDir> home_;
  std::unique_ptr<Trash> trash_;
};

TEST_F(TrashTest, DeleteKeepsTheEntryAndRestoreBringsItBackWithItsBytesAndMode) {
  put_file("notes/a.txt", "first draft\n", 0604);
  TrashPut put = trash_->put(p("notes/a.txt"));
  EXPECT_TRUE(put.trashed);
  EXPECT_TRUE(is_trash_id(put.item.id)) << put.item.id;
  EXPECT_EQ(put.item.path, "/home/alice/notes/a.txt");
  EXPECT_EQ(put.item.type, "file");
  EXPECT_EQ(put.item.size, 12u);
  EXPECT_FALSE(in_home("notes/a.txt"));

  auto items = trash_->list();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].id, put.item.id);
  EXPECT_EQ(items[0].path, "/home/alice/notes/a.txt");

  TrashRestore r = trash_->restore(put.item.id, std::nullopt);
  EXPECT_EQ(r.path, "/home/alice/notes/a.txt");
  EXPECT_FALSE(r.replaced);
  EXPECT_EQ(read_home("notes/a.txt"), "first draft\n");
  struct stat st;
  ASSERT_EQ(::stat((base_ + "/home/notes/a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  EXPECT_EQ(st.st_uid, kUid);
  EXPECT_TRUE(trash_->list().empty());
}

TEST_F(TrashTest, ADirectoryGoesWholeAndComesBackIntoMissingParents) {
  put_file("proj/src/main.c", "int main(){}\n");
  put_file("proj/README", "hello\n");
  TrashPut put = trash_->put(p("proj"));
  EXPECT_EQ(put.item.type, "directory");
  EXPECT_EQ(put.item.size, 13u + 6u);
  EXPECT_FALSE(in_home("proj"));
  TrashRestore r = trash_->restore(put.item.id, p("old/projects/proj"));
  EXPECT_EQ(r.path, "/home/alice/old/projects/proj");
  EXPECT_EQ(read_home("old/projects/proj/src/main.c"), "int main(){}\n");
}

TEST_F(TrashTest, RestoreOverANameThatExistsAgainKeepsTheNewerOneInTheTrash) {
  put_file("a.txt", "old\n");
  TrashPut first = trash_->put(p("a.txt"));
  put_file("a.txt", "new\n");
  TrashRestore r = trash_->restore(first.item.id, std::nullopt);
  EXPECT_EQ(read_home("a.txt"), "old\n");
  ASSERT_TRUE(r.replaced);
  auto items = trash_->list();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].id, *r.replaced);
  trash_->restore(*r.replaced, p("a-new.txt"));
  EXPECT_EQ(read_home("a-new.txt"), "new\n");
}

TEST_F(TrashTest, ASymlinkIsTrashedAsALinkAndItsTargetStays) {
  put_file("target.txt", "stay\n");
  ASSERT_EQ(::symlink("/etc/passwd", (base_ + "/home/out").c_str()), 0);
  ASSERT_EQ(::lchown((base_ + "/home/out").c_str(), kUid, kGid), 0);
  TrashPut put = trash_->put(p("out"));
  EXPECT_EQ(put.item.type, "file");
  EXPECT_EQ(put.item.size, 0u);
  EXPECT_FALSE(in_home("out"));
  struct stat st;
  EXPECT_EQ(::stat("/etc/passwd", &st), 0);
  trash_->restore(put.item.id, std::nullopt);
  char buf[64] = {};
  ASSERT_GT(::readlink((base_ + "/home/out").c_str(), buf, sizeof buf - 1), 0);
  EXPECT_STREQ(buf, "/etc/passwd");
}

TEST_F(TrashTest, UnknownOrForgedIdsAreNotFound) {
  EXPECT_THROW(trash_->restore("0000000000001-deadbeef", std::nullopt), FsError);
  EXPECT_THROW(trash_->restore("../home", std::nullopt), FsError);
  EXPECT_THROW(trash_->remove("../home"), FsError);
  EXPECT_FALSE(is_trash_id("../../etc/x-aaaaaaaa"));
  EXPECT_FALSE(is_trash_id("0000000000001-DEADBEEF"));
  EXPECT_THROW(trash_->put(p("")), FsError);  // the home itself
  EXPECT_THROW(trash_->put(p("missing")), FsError);
}

TEST_F(TrashTest, RetentionDeletesOnlyItemsOlderThanTheCutoff) {
  put_file("one", "1");
  put_file("two", "2");
  TrashPut one = trash_->put(p("one"));
  ::usleep(2000);
  TrashPut two = trash_->put(p("two"));
  EXPECT_EQ(trash_->purge_before(one.item.deleted_at - 1), 0u);
  EXPECT_EQ(trash_->list().size(), 2u);
  EXPECT_EQ(trash_->purge_before(two.item.deleted_at + 1), 2u);
  EXPECT_TRUE(trash_->list().empty());
}

TEST_F(TrashTest, PressureDeletesTheOldestFirst) {
  put_file("old", "o");
  put_file("mid", "m");
  put_file("new", "n");
  TrashPut old = trash_->put(p("old"));
  ::usleep(2000);
  TrashPut mid = trash_->put(p("mid"));
  ::usleep(2000);
  TrashPut neu = trash_->put(p("new"));
  ASSERT_TRUE(trash_->purge_oldest());
  auto items = trash_->list();
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].id, neu.item.id);  // newest first
  EXPECT_EQ(items[1].id, mid.item.id);
  EXPECT_EQ(trash_->clear(), 2u);
  EXPECT_FALSE(trash_->purge_oldest());
}

TEST_F(TrashTest, TrashedFilesBelongToTheAccount) {
  put_file("f", "x");
  TrashPut put = trash_->put(p("f"));
  struct stat st;
  ASSERT_EQ(::stat((base_ + "/trash/" + put.item.id).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUid);
  ASSERT_EQ(::stat((base_ + "/trash/" + put.item.id + "/info").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUid);
}

}  // namespace
}  // namespace agentbox
