// fs/ against real files, as root, with operations run under an unprivileged account uid:
// confinement to the home (symlinks, "..", /proc, races), ownership and permissions of what is
// written, atomic replacement, and the Open Terminal semantics of each operation.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fs/atomic_file.hpp"
#include "fs/confined_dir.hpp"
#include "fs/content_type.hpp"
#include "fs/dir_list.hpp"
#include "fs/entry_ops.hpp"
#include "fs/file_read.hpp"
#include "fs/file_write.hpp"
#include "fs/fs_error.hpp"
#include "fs/fs_identity.hpp"
#include "fs/glob_search.hpp"
#include "fs/grep_search.hpp"
#include "fs/upload_writer.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;

constexpr uid_t kUid = 1999999;
constexpr gid_t kGid = 1999999;
constexpr const char* kBoxHome = "/home/alice";

// Runs `stmt`, expecting an FsError of `kind`; evaluates to its message.
#define EXPECT_FS_ERROR(stmt, expected_kind)                                                               \
  [&]() -> std::string {                                                                                   \
    try {                                                                                                  \
      stmt;                                                                                                \
    } catch (const FsError& e) {                                                                           \
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(expected_kind)) << #stmt << ": " << e.what(); \
      return e.what();                                                                                     \
    }                                                                                                      \
    ADD_FAILURE() << #stmt << " did not throw";                                                            \
    return {};                                                                                             \
  }()

// A temporary tree: base/home (the account's home, 0700, owned by kUid) and base/outside, a
// directory the account could read and write if confinement failed (owned by kUid too), so
// only confinement stands between the two.
class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-fs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ASSERT_EQ(::chmod(base_.c_str(), 0755), 0);
    home_ = base_ + "/home";
    outside_ = base_ + "/outside";
    make_owned_dir(home_, 0700);
    make_owned_dir(outside_, 0777);
    write_host(outside_ + "/secret.txt", "SECRET\n");
    dir_ = std::make_unique<ConfinedDir>(ConfinedDir::open_home(home_, kBoxHome, kUid, kGid));
  }
  void TearDown() override {
    dir_.reset();
    stdfs::remove_all(base_);
  }

  static void make_owned_dir(const std::string& path, mode_t mode) {
    ASSERT_EQ(::mkdir(path.c_str(), mode), 0) << path;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), kUid, kGid), 0);
  }
  static void write_host(const std::string& path, const std::string& data, mode_t mode = 0644, uid_t uid = kUid,
                         gid_t gid = kGid) {
    std::ofstream(path, std::ios::binary) << data;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), uid, gid), 0);
  }
  static std::string read_host(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Creates files and directories in the home as the account would have.
  void put(const std::string& rel, const std::string& data, mode_t mode = 0644) { write_host(host(rel), data, mode); }
  void put_dir(const std::string& rel) { make_owned_dir(host(rel), 0755); }
  void put_link(const std::string& rel, const std::string& target) {
    ASSERT_EQ(::symlink(target.c_str(), host(rel).c_str()), 0) << rel;
    ASSERT_EQ(::lchown(host(rel).c_str(), kUid, kGid), 0);
  }
  std::string host(const std::string& rel) const { return home_ + "/" + rel; }
  HomePath p(std::string_view user_path, std::string_view cwd = {}) const { return dir_->path(user_path, cwd); }
  std::string read(std::string_view user_path) { return read_text(*dir_, p(user_path)).content; }
  std::vector<std::string> home_names(const std::string& rel = "") {
    std::vector<std::string> names;
    for (const auto& e : stdfs::directory_iterator(rel.empty() ? home_ : host(rel)))
      names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  static struct stat lstat_of(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return st;
  }

  std::string base_, home_, outside_;
  std::unique_ptr<ConfinedDir> dir_;
};

// --- identity --------------------------------------------------------------------------------

TEST_F(FsTest, IdentityGuardSwitchesOnlyThisThreadAndRestores) {
  ASSERT_EQ(FsIdentity::current_fsuid(), 0u);
  // A thread that exists already (as the server's workers do) keeps its own identity.
  std::atomic<int> step{0};
  uid_t other_thread_fsuid = 1;
  std::thread other([&] {
    while (step != 1) std::this_thread::yield();
    other_thread_fsuid = FsIdentity::current_fsuid();
    step = 2;
  });
  {
    FsIdentity as_user(kUid, kGid);
    EXPECT_EQ(FsIdentity::current_fsuid(), kUid);
    EXPECT_EQ(FsIdentity::current_fsgid(), kGid);
    step = 1;
    while (step != 2) std::this_thread::yield();
  }
  other.join();
  EXPECT_EQ(other_thread_fsuid, 0u);
  EXPECT_EQ(FsIdentity::current_fsuid(), 0u);
  EXPECT_EQ(FsIdentity::current_fsgid(), 0u);
}

TEST_F(FsTest, CreatedFilesAndDirectoriesBelongToTheAccount) {
  write_atomic(*dir_, p("new/deeper/file.txt"), "hello");
  make_dir(*dir_, p("made/here"));
  for (const char* rel : {"new", "new/deeper", "new/deeper/file.txt", "made", "made/here"}) {
    struct stat st = lstat_of(host(rel));
    EXPECT_EQ(st.st_uid, kUid) << rel;
    EXPECT_EQ(st.st_gid, kGid) << rel;
  }
  UploadWriter up(*dir_, p("uploads"), "u.bin", 1 << 20);
  up.append("data");
  up.commit();
  EXPECT_EQ(lstat_of(host("uploads/u.bin")).st_uid, kUid);
  EXPECT_EQ(lstat_of(host("uploads")).st_uid, kUid);
}

TEST_F(FsTest, PermissionsAreTheAccountsNotRoots) {
  // A root-owned 0600 file in the home: root could read it, the account cannot.
  write_host(host("root-only"), "root\n", 0600, 0, 0);
  EXPECT_FS_ERROR(read_text(*dir_, p("root-only")), FsErrorKind::forbidden);
  make_owned_dir(host("locked"), 0555);
  EXPECT_FS_ERROR(write_atomic(*dir_, p("locked/x"), "x"), FsErrorKind::forbidden);
  EXPECT_TRUE(home_names("locked").empty());
}

TEST_F(FsTest, SupplementaryGroupsOfTheDaemonThreadDoNotApply) {
  constexpr gid_t kDaemonGroup = 4242;
  write_host(host("group-file"), "group\n", 0640, 0, kDaemonGroup);
  // Give this thread (only) a supplementary group that could read the file.
  gid_t groups[] = {kDaemonGroup};
  ASSERT_EQ(::syscall(SYS_setgroups, 1, groups), 0);
  EXPECT_FS_ERROR(read_text(*dir_, p("group-file")), FsErrorKind::forbidden);
  gid_t now[4];
  EXPECT_EQ(::getgroups(4, now), 1);  // restored after the operation
  EXPECT_EQ(now[0], kDaemonGroup);
  ASSERT_EQ(::syscall(SYS_setgroups, 0, nullptr), 0);
}

// --- basic reads, writes, lists --------------------------------------------------------------

TEST_F(FsTest, WriteListReadRoundTrip) {
  auto w = write_atomic(*dir_, p("docs/a.txt"), "one\ntwo\nthree");
  EXPECT_EQ(w.path, "/home/alice/docs/a.txt");
  EXPECT_EQ(w.size, 13u);
  put_dir("docs/sub");

  ListResult list = list_dir(*dir_, p("docs"));
  EXPECT_EQ(list.dir, "/home/alice/docs");
  ASSERT_EQ(list.entries.size(), 2u);
  EXPECT_EQ(list.entries[0].name, "a.txt");
  EXPECT_EQ(list.entries[0].info.type, "file");
  EXPECT_EQ(list.entries[0].info.size, 13u);
  EXPECT_TRUE(list.entries[0].info.writable);
  EXPECT_GT(list.entries[0].info.modified, 1.6e9);
  EXPECT_EQ(list.entries[1].name, "sub");
  EXPECT_EQ(list.entries[1].info.type, "directory");

  ReadResult r = read_text(*dir_, p("~/docs/a.txt"));
  EXPECT_EQ(r.kind, ReadResult::Kind::text);
  EXPECT_EQ(r.path, "/home/alice/docs/a.txt");
  EXPECT_EQ(r.total_lines, 3u);
  EXPECT_EQ(r.content, "one\ntwo\nthree");
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(read_text(*dir_, p("a.txt", "/home/alice/docs")).content, "one\ntwo\nthree");
  EXPECT_FS_ERROR(list_dir(*dir_, p("nope")), FsErrorKind::not_found);
  EXPECT_FS_ERROR(list_dir(*dir_, p("docs/a.txt")), FsErrorKind::not_found);
  EXPECT_FS_ERROR(read_text(*dir_, p("docs")), FsErrorKind::not_found);
  EXPECT_TRUE(is_directory(*dir_, p("docs/sub")));
  EXPECT_TRUE(is_regular_file(*dir_, p("docs/a.txt")));
  EXPECT_FALSE(is_regular_file(*dir_, p("docs/none")));
}

TEST_F(FsTest, ReadLineRangesAndBudget) {
  put("n.txt", "l1\nl2\nl3\nl4\nl5\n");
  ReadOptions o;
  o.start_line = 2;
  o.end_line = 3;
  ReadResult r = read_text(*dir_, p("n.txt"), o);
  EXPECT_EQ(r.total_lines, 5u);
  EXPECT_EQ(r.content, "l2\nl3\n");
  o.end_line.reset();
  o.start_line = 9;
  EXPECT_EQ(read_text(*dir_, p("n.txt"), o).content, "");
  o = {};
  o.byte_budget = 7;  // two whole lines fit, the third does not
  r = read_text(*dir_, p("n.txt"), o);
  EXPECT_EQ(r.content, "l1\nl2\n");
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.next_line, 3u);
  EXPECT_EQ(r.total_lines, 5u);
  // One line longer than the budget is cut on a character boundary, and read on from there.
  put("long.txt", std::string(10, 'x') + "\xE2\x82\xAC" + "\nend\n");
  o.byte_budget = 12;
  r = read_text(*dir_, p("long.txt"), o);
  EXPECT_EQ(r.content, std::string(10, 'x'));
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.next_line, 1u);
  EXPECT_EQ(r.next_column, 11u);
  o.start_line = r.next_line;
  o.start_column = r.next_column;
  r = read_text(*dir_, p("long.txt"), o);
  EXPECT_EQ(r.content, "\xE2\x82\xAC\nend\n");
  EXPECT_FALSE(r.truncated);
  o = {};
  o.start_line = 0;
  EXPECT_FS_ERROR(read_text(*dir_, p("n.txt"), o), FsErrorKind::bad_request);
  o = {};
  o.max_text_bytes = 4;
  EXPECT_FS_ERROR(read_text(*dir_, p("n.txt"), o), FsErrorKind::too_large);
}

// A line of 300,000 characters (a minified bundle, a JSON dump) comes in budget-sized pieces
// that together are the whole line: none of it is out of reach.
TEST_F(FsTest, ALineLongerThanTheBudgetIsReadOnPieceByPiece) {
  std::string line;
  for (int i = 0; line.size() < 300000; ++i)
    line += (i % 7 == 0) ? "\xC3\xA9" : std::string(1, static_cast<char>('a' + i % 26));
  put("min.js", "first\n" + line + "\nlast\n");
  ReadOptions o;
  o.start_line = 2;
  o.end_line = 2;
  std::string got;
  for (int pieces = 0; pieces < 10; ++pieces) {
    ReadResult r = read_text(*dir_, p("min.js"), o);
    EXPECT_EQ(r.total_lines, 3u);
    got += r.content;
    if (!r.truncated) break;
    EXPECT_EQ(r.next_line, 2u);
    ASSERT_GT(r.next_column, 1u);
    o.start_column = r.next_column;
  }
  EXPECT_EQ(got, line + "\n");
  // A column inside a character begins at the next whole one; past the end, the line is empty.
  o.start_column = 2 + line.find("\xC3\xA9", 1);  // the byte after 0xC3
  EXPECT_EQ(read_text(*dir_, p("min.js"), o).content.substr(0, 1), std::string(1, line[line.find("\xC3\xA9", 1) + 2]));
  o.start_column = line.size() + 10;
  EXPECT_EQ(read_text(*dir_, p("min.js"), o).content, "\n");
  o.start_column = 0;
  EXPECT_FS_ERROR(read_text(*dir_, p("min.js"), o), FsErrorKind::bad_request);
}

// Text that is not UTF-8 (Latin-1 or Windows-1252, as older tools write it) is decoded, not
// refused as binary; a NUL still makes a file binary.
TEST_F(FsTest, TextInASingleByteEncodingIsDecoded) {
  put("latin1.txt",
      "caf\xE9 cr\xE8me br\xFBl\xE9"
      "e\nprix: 5 \x80\n");
  ReadResult r = read_text(*dir_, p("latin1.txt"));
  EXPECT_EQ(r.kind, ReadResult::Kind::text);
  EXPECT_EQ(r.content,
            "caf\xC3\xA9 cr\xC3\xA8me br\xC3\xBBl\xC3\xA9"
            "e\nprix: 5 \xE2\x82\xAC\n");
  EXPECT_EQ(r.encoding, "windows-1252");
  EXPECT_EQ(r.total_lines, 2u);
  put("utf8.txt", "caf\xC3\xA9\n");
  EXPECT_EQ(read_text(*dir_, p("utf8.txt")).encoding, "utf-8");
  put("nul.txt", std::string("caf\xE9"
                             "\0\n",
                             6));
  EXPECT_FS_ERROR(read_text(*dir_, p("nul.txt")), FsErrorKind::unsupported_media);
}

TEST_F(FsTest, ReadBinaryImagesFifosAndInvalidUtf8) {
  std::string png("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
  put("pic.png", png);
  ReadResult r = read_text(*dir_, p("pic.png"));
  EXPECT_EQ(r.kind, ReadResult::Kind::image);
  EXPECT_EQ(r.mime, "image/png");
  EXPECT_EQ(r.bytes, png);
  put("blob.bin", std::string("\x7f"
                              "ELF\0\0\0",
                              7));
  std::string msg = EXPECT_FS_ERROR(read_text(*dir_, p("blob.bin")), FsErrorKind::unsupported_media);
  EXPECT_EQ(msg, "Unsupported binary file type: application/octet-stream (7 bytes)");
  // Invalid UTF-8 past the sniffed head is repaired, not passed on.
  put("late.txt", std::string(9000, 'a') + "\n\xFF\n");
  r = read_text(*dir_, p("late.txt"));
  EXPECT_EQ(r.kind, ReadResult::Kind::text);
  EXPECT_NE(r.content.find("\xEF\xBF\xBD"), std::string::npos);
  // A FIFO must not hang the worker.
  ASSERT_EQ(::mkfifo(host("pipe").c_str(), 0666), 0);
  ASSERT_EQ(::lchown(host("pipe").c_str(), kUid, kGid), 0);
  EXPECT_FS_ERROR(read_text(*dir_, p("pipe")), FsErrorKind::not_found);
  EXPECT_FS_ERROR(open_for_read(*dir_, p("pipe")), FsErrorKind::not_found);
}

TEST_F(FsTest, OpenForReadGivesDescriptorSizeAndType) {
  put_dir("site");
  put("site/index.html", "<h1>hi</h1>");
  FileStream s = open_for_read(*dir_, p("site/index.html"));
  EXPECT_EQ(s.size, 11u);
  EXPECT_EQ(s.content_type, "text/html; charset=utf-8");
  char buf[32];
  ASSERT_EQ(::pread(s.fd.get(), buf, sizeof buf, 4), 7);
  EXPECT_EQ(std::string(buf, 7), "hi</h1>");
}

// --- confinement -----------------------------------------------------------------------------

TEST_F(FsTest, PathStringsLeavingTheHomeAreRefused) {
  for (const char* bad : {"../outside/secret.txt", "/etc/hostname", "/proc/self/root/etc/hostname",
                          "~/../outside/secret.txt", "/home/alice/../outside/secret.txt"}) {
    EXPECT_FS_ERROR(read_text(*dir_, p(bad)), FsErrorKind::forbidden);
  }
  // The host path of the home is not a path in the box.
  EXPECT_FS_ERROR(read_text(*dir_, p(host("x"))), FsErrorKind::forbidden);
  EXPECT_FS_ERROR(write_atomic(*dir_, p("../outside/new.txt"), "x"), FsErrorKind::forbidden);
  EXPECT_FALSE(stdfs::exists(outside_ + "/new.txt"));
}

TEST_F(FsTest, SymlinksInsideTheHomeKeepWorking) {
  put("real.txt", "real\n");
  put_dir("realdir");
  put("realdir/f.txt", "in dir\n");
  put_link("rel-link", "real.txt");
  put_link("abs-link", "/home/alice/real.txt");  // as `ln -s ~/real.txt` writes it in the box
  put_link("dir-link", "realdir");
  put_link("abs-dir-link", "/home/alice/realdir");
  put_link("up-link", "realdir/../real.txt");
  EXPECT_EQ(read("rel-link"), "real\n");
  EXPECT_EQ(read("abs-link"), "real\n");
  EXPECT_EQ(read("up-link"), "real\n");
  EXPECT_EQ(read("dir-link/f.txt"), "in dir\n");
  EXPECT_EQ(read("abs-dir-link/f.txt"), "in dir\n");

  // A write through a link lands on its target; the link stays a link.
  write_atomic(*dir_, p("abs-link"), "rewritten\n");
  EXPECT_EQ(read_host(host("real.txt")), "rewritten\n");
  EXPECT_TRUE(S_ISLNK(lstat_of(host("abs-link")).st_mode));
  write_atomic(*dir_, p("abs-dir-link/new.txt"), "new\n");
  EXPECT_EQ(read_host(host("realdir/new.txt")), "new\n");

  ListResult list = list_dir(*dir_, p("~"));
  auto find = [&](std::string_view name) {
    for (auto& e : list.entries)
      if (e.name == name) return e.info;
    ADD_FAILURE() << name;
    return EntryInfo{};
  };
  EXPECT_EQ(find("dir-link").type, "directory");
  EXPECT_TRUE(find("dir-link").symlink);
  EXPECT_EQ(find("abs-link").type, "file");
  EXPECT_EQ(find("abs-link").size, 10u);  // the target's size
}

TEST_F(FsTest, LinksLeadingOutAreRefusedForReadAndWriteButListedMovedAndDeleted) {
  put_link("to-hostname", "/etc/hostname");
  put_link("to-secret-abs", outside_ + "/secret.txt");
  put_link("to-secret-rel", "../outside/secret.txt");
  put_link("to-proc", "/proc/self/root/etc/hostname");
  put_link("out-dir", "../outside");
  put_dir("d");
  put_link("d/deep-out", "../../outside/secret.txt");
  const std::string hostname_before = read_host("/etc/hostname");

  for (const char* link :
       {"to-hostname", "to-secret-abs", "to-secret-rel", "to-proc", "out-dir/secret.txt", "d/deep-out"}) {
    EXPECT_FS_ERROR(read_text(*dir_, p(link)), FsErrorKind::forbidden);
    EXPECT_FS_ERROR(open_for_read(*dir_, p(link)), FsErrorKind::forbidden);
    EXPECT_FS_ERROR(write_atomic(*dir_, p(link), "PWNED"), FsErrorKind::forbidden);
    EXPECT_FS_ERROR(replace_in_file(*dir_, p(link), {{"SECRET", "PWNED"}}), FsErrorKind::forbidden);
  }
  EXPECT_FS_ERROR(write_atomic(*dir_, p("out-dir/planted.txt"), "x"), FsErrorKind::forbidden);
  EXPECT_FS_ERROR(list_dir(*dir_, p("out-dir")), FsErrorKind::forbidden);
  EXPECT_FS_ERROR(make_dir(*dir_, p("out-dir/sub")), FsErrorKind::forbidden);
  EXPECT_EQ(read_host(outside_ + "/secret.txt"), "SECRET\n");
  EXPECT_EQ(read_host("/etc/hostname"), hostname_before);
  EXPECT_FALSE(stdfs::exists(outside_ + "/planted.txt"));
  EXPECT_FALSE(stdfs::exists(outside_ + "/sub"));

  // Listed as entries of their own.
  ListResult list = list_dir(*dir_, p("~"));
  int links = 0;
  for (auto& e : list.entries) {
    if (e.name.starts_with("to-") || e.name == "out-dir") {
      ++links;
      EXPECT_TRUE(e.info.symlink) << e.name;
      EXPECT_EQ(e.info.type, "file") << e.name;
      EXPECT_FALSE(e.info.writable) << e.name;
    }
  }
  EXPECT_EQ(links, 5);

  // Moved and deleted as links; their targets stay.
  MoveResult m = move_entry(*dir_, p("to-secret-abs"), p("d/moved-link"));
  EXPECT_EQ(m.destination, "/home/alice/d/moved-link");
  EXPECT_TRUE(S_ISLNK(lstat_of(host("d/moved-link")).st_mode));
  EXPECT_EQ(stdfs::read_symlink(host("d/moved-link")), outside_ + "/secret.txt");
  RemoveResult rm = remove_entry(*dir_, p("d/moved-link"));
  EXPECT_EQ(rm.type, "file");
  EXPECT_EQ(remove_entry(*dir_, p("out-dir")).type, "file");
  EXPECT_EQ(remove_entry(*dir_, p("to-hostname")).type, "file");
  EXPECT_FALSE(stdfs::exists(stdfs::symlink_status(host("out-dir"))));
  EXPECT_EQ(read_host(outside_ + "/secret.txt"), "SECRET\n");
  EXPECT_EQ(read_host("/etc/hostname"), hostname_before);
}

TEST_F(FsTest, SearchesDoNotFollowLinksOut) {
  put("mine.txt", "nothing here\n");
  put_link("out-dir", "../outside");
  put_link("secret-link", outside_ + "/secret.txt");
  GrepOptions g;
  g.query = "SECRET";
  EXPECT_TRUE(grep_files(*dir_, p("~"), g).matches.empty());
  EXPECT_FS_ERROR(grep_files(*dir_, p("out-dir"), g), FsErrorKind::forbidden);
  GlobOptions o;
  o.pattern = "**";
  for (const auto& m : glob_files(*dir_, p("~"), o).matches)
    EXPECT_EQ(m.path.find("secret.txt"), std::string::npos) << m.path;
}

TEST_F(FsTest, RemovingATreeRemovesLinksNotWhatTheyPointTo) {
  put_dir("tree");
  put_dir("tree/a");
  put("tree/a/f.txt", "f");
  put_link("tree/a/out", "../../../outside");
  put_link("tree/secret", outside_ + "/secret.txt");
  RemoveResult r = remove_entry(*dir_, p("tree"));
  EXPECT_EQ(r.type, "directory");
  EXPECT_FALSE(stdfs::exists(host("tree")));
  EXPECT_EQ(read_host(outside_ + "/secret.txt"), "SECRET\n");
  EXPECT_TRUE(stdfs::exists(outside_));
  EXPECT_FS_ERROR(remove_entry(*dir_, p("tree")), FsErrorKind::not_found);
  EXPECT_FS_ERROR(remove_entry(*dir_, p("~")), FsErrorKind::forbidden);
  EXPECT_TRUE(stdfs::exists(home_));
}

// A thread swaps a path component between a real directory and a symlink leading out while
// another resolves through it: the reader sees the inside file or a refusal, never the outside.
void race_component_swap(const std::string& home, const std::string& link_target,
                         const std::function<std::string()>& attempt, int rounds) {
  ASSERT_EQ(::symlink(link_target.c_str(), (home + "/swap-b").c_str()), 0);
  std::atomic<bool> done{false};
  std::thread swapper([&] {
    for (int i = 0; i < rounds || !done; ++i)
      ASSERT_EQ(
          ::renameat2(AT_FDCWD, (home + "/swap-a").c_str(), AT_FDCWD, (home + "/swap-b").c_str(), RENAME_EXCHANGE), 0);
  });
  int inside = 0, refused = 0;
  for (int i = 0; i < rounds; ++i) {
    std::string got = attempt();
    ASSERT_EQ(got.find("SECRET"), std::string::npos) << "read outside content at round " << i;
    if (got.empty())
      ++refused;
    else
      ++inside;
  }
  done = true;
  swapper.join();
  // Leave swap-a the directory again and drop the link.
  struct stat st;
  ASSERT_EQ(::lstat((home + "/swap-a").c_str(), &st), 0);
  if (S_ISLNK(st.st_mode)) {
    ASSERT_EQ(::renameat2(AT_FDCWD, (home + "/swap-a").c_str(), AT_FDCWD, (home + "/swap-b").c_str(), RENAME_EXCHANGE),
              0);
  }
  ASSERT_EQ(::unlink((home + "/swap-b").c_str()), 0);
  // Both states were seen: the race really happened.
  EXPECT_GT(inside, 0);
  EXPECT_GT(refused, 0);
}

TEST_F(FsTest, RacingSwapOfDirectoryAndOutsideLinkNeverReadsOutside) {
  put_dir("swap-a");
  put("swap-a/secret.txt", "inside\n");
  auto attempt = [&]() -> std::string {
    try {
      return read_text(*dir_, p("swap-a/secret.txt")).content;
    } catch (const FsError&) {
      return {};
    }
  };
  race_component_swap(home_, "../outside", attempt, 10000);  // the kernel refuses
  race_component_swap(home_, outside_, attempt, 10000);      // the walk refuses
}

TEST_F(FsTest, RacingSwapNeverWritesOutside) {
  put_dir("swap-a");
  auto attempt = [&]() -> std::string {
    try {
      write_atomic(*dir_, p("swap-a/planted.txt"), "x", false);
      return "ok";
    } catch (const FsError&) {
      return {};
    }
  };
  race_component_swap(home_, "../outside", attempt, 10000);
  EXPECT_FALSE(stdfs::exists(outside_ + "/planted.txt"));
  std::vector<std::string> names;
  for (const auto& e : stdfs::directory_iterator(outside_)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"secret.txt"});  // no temp files either
}

// --- atomic writes ---------------------------------------------------------------------------

TEST_F(FsTest, FailedWritesLeaveNoPartialOrTemporaryFiles) {
  put("a-file", "content\n");
  EXPECT_FS_ERROR(write_atomic(*dir_, p("a-file/child.txt"), "x"), FsErrorKind::bad_request);
  EXPECT_FS_ERROR(write_atomic(*dir_, p("a-file/child.txt"), "x", false), FsErrorKind::not_found);
  put_dir("adir");
  EXPECT_FS_ERROR(write_atomic(*dir_, p("adir"), "x"), FsErrorKind::bad_request);
  EXPECT_EQ(home_names(), (std::vector<std::string>{"a-file", "adir"}));
  EXPECT_TRUE(home_names("adir").empty());
  EXPECT_EQ(read_host(host("a-file")), "content\n");
}

// A write that fails half-way (the file size limit cuts it) keeps the old file whole.
TEST_F(FsTest, WriteFailingMidwayKeepsTheOldFile) {
  put("keep.txt", "original\n", 0750);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = {64, old_limit.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string big(1000, 'x');
  EXPECT_FS_ERROR(write_atomic(*dir_, p("keep.txt"), big), FsErrorKind::too_large);
  {
    auto as_user = dir_->as_user();  // the fallback kind of temporary file, too
    AtomicFile f(dir_->write_target(p("keep.txt")), "/home/alice/keep.txt", AtomicFile::Mode::named);
    EXPECT_EQ(f.mode(), AtomicFile::Mode::named);
    EXPECT_FS_ERROR(f.write(big), FsErrorKind::too_large);
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(read_host(host("keep.txt")), "original\n");
  EXPECT_EQ(home_names(), std::vector<std::string>{"keep.txt"});
  // A successful rewrite keeps the permission bits.
  write_atomic(*dir_, p("keep.txt"), "new\n");
  EXPECT_EQ(lstat_of(host("keep.txt")).st_mode & 0777, 0750u);
  EXPECT_EQ(home_names(), std::vector<std::string>{"keep.txt"});
}

TEST_F(FsTest, NamedTemporaryFilesCommitAndVanishOnAbort) {
  auto as_user = dir_->as_user();
  {
    AtomicFile f(dir_->write_target(p("named.txt")), "/home/alice/named.txt", AtomicFile::Mode::named);
    f.write("abc");
    EXPECT_EQ(home_names().size(), 1u);  // the temporary file is visible while writing
  }
  EXPECT_TRUE(home_names().empty());
  AtomicFile f(dir_->write_target(p("named.txt")), "/home/alice/named.txt", AtomicFile::Mode::named);
  f.write("abc");
  f.commit();
  EXPECT_EQ(home_names(), std::vector<std::string>{"named.txt"});
  EXPECT_EQ(read_host(host("named.txt")), "abc");
}

TEST_F(FsTest, UploadsAppearOnlyOnCommit) {
  {
    UploadWriter up(*dir_, p("in"), "../../evil/a.txt", 100);  // only the last component counts
    up.append("part1 ");
    up.append("part2");
    EXPECT_TRUE(home_names("in").empty());
    WriteResult w = up.commit();
    EXPECT_EQ(w.path, "/home/alice/in/a.txt");
    EXPECT_EQ(w.size, 11u);
  }
  EXPECT_EQ(read_host(host("in/a.txt")), "part1 part2");
  {
    UploadWriter up(*dir_, p("in"), "dropped.txt", 100);
    up.append("never committed");
  }
  {
    UploadWriter up(*dir_, p("in"), "big.txt", 10);
    EXPECT_FS_ERROR(up.append(std::string(11, 'x')), FsErrorKind::too_large);
  }
  EXPECT_EQ(home_names("in"), std::vector<std::string>{"a.txt"});
  EXPECT_FS_ERROR(UploadWriter(*dir_, p("in"), "..", 10), FsErrorKind::bad_request);
}

// --- replace ---------------------------------------------------------------------------------

TEST_F(FsTest, ReplaceMatchesOpenTerminal) {
  put("code.py", "a = 1\nb = 1\nc = 2\n", 0755);
  std::string msg = EXPECT_FS_ERROR(replace_in_file(*dir_, p("code.py"), {{"zzz", "y"}}), FsErrorKind::bad_request);
  EXPECT_EQ(msg, "Target string not found: 'zzz'");
  msg = EXPECT_FS_ERROR(replace_in_file(*dir_, p("code.py"), {{"= 1", "= 9"}}), FsErrorKind::bad_request);
  EXPECT_EQ(msg, "Found 2 occurrences of target string but allow_multiple is false");
  msg = EXPECT_FS_ERROR(replace_in_file(*dir_, p("code.py"), {{std::string(150, 'q'), ""}}), FsErrorKind::bad_request);
  EXPECT_EQ(msg, "Target string not found: '" + std::string(100, 'q') + "'");
  EXPECT_EQ(read_host(host("code.py")), "a = 1\nb = 1\nc = 2\n");  // errors change nothing

  // Narrowed to line 2, the target is unique.
  WriteResult w = replace_in_file(*dir_, p("code.py"), {{"= 1", "= 5", 2, 2}});
  EXPECT_EQ(read_host(host("code.py")), "a = 1\nb = 5\nc = 2\n");
  EXPECT_EQ(w.size, 18u);
  replace_in_file(*dir_, p("code.py"), {{"=", ":=", {}, {}, true}, {"c", "d"}});
  EXPECT_EQ(read_host(host("code.py")), "a := 1\nb := 5\nd := 2\n");
  EXPECT_EQ(lstat_of(host("code.py")).st_mode & 0777, 0755u);
  EXPECT_FS_ERROR(replace_in_file(*dir_, p("none.py"), {{"a", "b"}}), FsErrorKind::not_found);
  put("bin", std::string("\0\1", 2));
  EXPECT_FS_ERROR(replace_in_file(*dir_, p("bin"), {{"a", "b"}}), FsErrorKind::unsupported_media);
}

// --- mkdir, move -----------------------------------------------------------------------------

TEST_F(FsTest, MakeDirAndMoveStatuses) {
  EXPECT_EQ(make_dir(*dir_, p("x/y/z")), "/home/alice/x/y/z");
  EXPECT_EQ(make_dir(*dir_, p("x/y/z")), "/home/alice/x/y/z");  // already there: fine
  put("x/file", "f");
  EXPECT_FS_ERROR(make_dir(*dir_, p("x/file")), FsErrorKind::bad_request);
  EXPECT_FS_ERROR(make_dir(*dir_, p("x/file/sub")), FsErrorKind::bad_request);

  EXPECT_FS_ERROR(move_entry(*dir_, p("missing"), p("x/m")), FsErrorKind::not_found);
  EXPECT_FS_ERROR(move_entry(*dir_, p("x/file"), p("nodir/m")), FsErrorKind::bad_request);
  EXPECT_FS_ERROR(move_entry(*dir_, p("x/file"), p("x/y")), FsErrorKind::conflict);
  EXPECT_FS_ERROR(move_entry(*dir_, p("x"), p("x/y/z/x")), FsErrorKind::bad_request);
  MoveResult m = move_entry(*dir_, p("x/file"), p("x/y/renamed"));
  EXPECT_EQ(m.source, "/home/alice/x/file");
  EXPECT_EQ(m.destination, "/home/alice/x/y/renamed");
  EXPECT_EQ(read_host(host("x/y/renamed")), "f");
  EXPECT_FALSE(stdfs::exists(host("x/file")));
}

// --- grep and glob ---------------------------------------------------------------------------

TEST_F(FsTest, GrepFindsLinesWithOptions) {
  put_dir("src");
  put("src/a.py", "import os\nprint('Hello')\n");
  put("src/b.txt", "hello world\r\nbye\n");
  put("src/c.bin", std::string("hello\0", 6));
  put("top.py", "x = 'hello'\n");
  GrepOptions o;
  o.query = "hello";
  GrepResult r = grep_files(*dir_, p("~"), o);
  ASSERT_EQ(r.matches.size(), 2u);  // binary skipped, case-sensitive; files before subdirs
  EXPECT_EQ(r.matches[0].file, "/home/alice/top.py");
  EXPECT_EQ(r.matches[1].file, "/home/alice/src/b.txt");
  EXPECT_EQ(r.matches[1].line, 1u);
  EXPECT_EQ(r.matches[1].content, "hello world");
  EXPECT_FALSE(r.truncated);

  o.case_insensitive = true;
  o.include = {"*.py"};
  r = grep_files(*dir_, p("~"), o);
  ASSERT_EQ(r.matches.size(), 2u);
  EXPECT_EQ(r.matches[1].file, "/home/alice/src/a.py");
  EXPECT_EQ(r.matches[1].line, 2u);

  o = {};
  o.query = "print('";  // regex metacharacters, taken literally
  o.regex = false;
  EXPECT_EQ(grep_files(*dir_, p("src/a.py"), o).matches.size(), 1u);
  o.regex = true;
  std::string msg = EXPECT_FS_ERROR(grep_files(*dir_, p("~"), o), FsErrorKind::bad_request);
  EXPECT_TRUE(msg.starts_with("Invalid regex: ")) << msg;

  o = {};
  o.query = "o";
  o.max_results = 2;
  r = grep_files(*dir_, p("~"), o);
  EXPECT_EQ(r.matches.size(), 2u);
  EXPECT_TRUE(r.truncated);
  o.match_per_line = false;
  o.max_results = 50;
  r = grep_files(*dir_, p("~"), o);
  EXPECT_EQ(r.matches.size(), 3u);  // one per file
  EXPECT_EQ(r.matches[0].line, 0u);
  o.max_results = 0;
  EXPECT_FS_ERROR(grep_files(*dir_, p("~"), o), FsErrorKind::bad_request);
  o.max_results = 501;
  EXPECT_FS_ERROR(grep_files(*dir_, p("~"), o), FsErrorKind::bad_request);
  o.max_results = 5;
  EXPECT_FS_ERROR(grep_files(*dir_, p("nope"), o), FsErrorKind::not_found);
}

TEST_F(FsTest, GrepCatastrophicRegexStaysLinear) {
  put("evil.txt", std::string(1 << 20, 'a') + "b\n");
  GrepOptions o;
  o.query = "(a+)+$";
  auto start = std::chrono::steady_clock::now();
  GrepResult r = grep_files(*dir_, p("evil.txt"), o);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(r.matches.empty());
  EXPECT_LT(elapsed, std::chrono::seconds(5));  // a backtracking engine would not finish
  o.query = "(a|aa)+b$";
  r = grep_files(*dir_, p("evil.txt"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].content.size(), 1000u);  // long lines are cut
}

// Grep reads files block by block (kGrepBlockBytes): lines that span blocks, end in "\r\n"
// split over two blocks, or end the file without "\n" are found as in one piece.
TEST_F(FsTest, GrepFindsLinesAcrossBlockBoundariesAndAtTheEnd) {
  const size_t block = kGrepBlockBytes;
  // Appends filler lines to `s` until it is exactly `size` bytes long.
  auto pad = [](std::string& s, size_t size) {
    while (s.size() + 10 <= size) s += "filler 00\n";
    if (s.size() < size) s += std::string(size - s.size() - 1, '.') + "\n";
  };
  std::string text;
  pad(text, block - 10);
  text += "xx needle-spans-the-block-end\n";  // starts in the first block, ends in the second
  pad(text, 2 * block - 10);
  text += "crlf $$$$\r";                                   // its '\r' is the second block's last byte,
  text += "\n";                                            // its '\n' the third block's first
  text += std::string(3 * block, 'y') + " needle long\n";  // one line over four blocks
  text += "last needle";                                   // no final newline
  ASSERT_EQ(text[2 * block - 1], '\r');
  put("blocks.txt", text);
  auto line_of = [&](const std::string& s, std::string_view needle) {
    return static_cast<uint64_t>(std::count(s.begin(), s.begin() + s.find(needle), '\n')) + 1;
  };

  GrepOptions o;
  o.query = "needle";
  GrepResult r = grep_files(*dir_, p("blocks.txt"), o);
  ASSERT_EQ(r.matches.size(), 3u);
  EXPECT_EQ(r.matches[0].line, line_of(text, "xx needle"));
  EXPECT_EQ(r.matches[0].content, "xx needle-spans-the-block-end");
  EXPECT_EQ(r.matches[1].line, line_of(text, "yyy"));
  EXPECT_EQ(r.matches[1].content, std::string(1000, 'y'));  // shown cut as before
  EXPECT_EQ(r.matches[2].line, line_of(text, "last needle"));
  EXPECT_EQ(r.matches[2].content, "last needle");

  // The "\r" of a "\r\n" split over two blocks is not part of the line: `$` matches before it.
  o.query = R"(\$\$\$\$$)";
  r = grep_files(*dir_, p("blocks.txt"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].line, line_of(text, "crlf"));
  EXPECT_EQ(r.matches[0].content, "crlf $$$$");

  // A last line without "\n" that ends in "\r"; a file that is one block exactly.
  put("crlf-end.txt", "a\r\nneedle\r");
  o.query = "needle$";
  r = grep_files(*dir_, p("crlf-end.txt"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].line, 2u);
  EXPECT_EQ(r.matches[0].content, "needle");
  std::string exact;
  pad(exact, block - 10);
  exact += "needle 00\n";
  put("exact.txt", exact);
  ASSERT_EQ(stdfs::file_size(host("exact.txt")), block);
  o.query = "needle";
  r = grep_files(*dir_, p("exact.txt"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].line, line_of(exact, "needle"));
}

TEST_F(FsTest, GrepSearchesOnlyTheFirstScannedBytesOfAVeryLongLine) {
  GrepOptions o;
  o.query = "needle";
  o.max_scanned_line_bytes = 100;
  put("long.txt", std::string(95, 'a') + "needle\n" +       // "needle" ends past the bound: not found
                      std::string(150, 'b') + "needle\n" +  // wholly past it: not found
                      "needle\n");                          // line numbers still count every line
  GrepResult r = grep_files(*dir_, p("long.txt"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].line, 3u);
  o.query = "a+need";
  r = grep_files(*dir_, p("long.txt"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].line, 1u);
  // By default a line is searched up to 2 MiB, across 32 blocks.
  o = {};
  o.query = "needle$";
  put("long2.txt", std::string((2 << 20) - 6, 'c') + "needle\n");
  r = grep_files(*dir_, p("long2.txt"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].line, 1u);
}

TEST_F(FsTest, GrepDecidesBinaryOnTheFirstBlockAlone) {
  // A NUL in the sniffed head: binary, however much text follows.
  put("nul-head.txt", "x\n" + std::string(1, '\0') + "\n" + std::string(1 << 20, 'z') + "\nneedle\n");
  // A NUL after it: text, the NUL is just a byte of its line.
  put("nul-later.txt", std::string(kSniffBytes, 'z') + "\n" + std::string(1, '\0') + "needle\n");
  GrepOptions o;
  o.query = "needle";
  GrepResult r = grep_files(*dir_, p("~"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].file, "/home/alice/nul-later.txt");
  EXPECT_EQ(r.matches[0].line, 2u);
  EXPECT_TRUE(grep_files(*dir_, p("nul-head.txt"), o).matches.empty());
}

TEST_F(FsTest, GrepSkipsSparseAndOversizedFilesBeforeReadingThem) {
  // Text, then a hole, then a matching line: sparse files cost a reader time and their owner no
  // disk, so grep skips them, whatever their head looks like.
  {
    UniqueFd fd(::open(host("sparse.txt").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    std::string head;
    while (head.size() < 64 << 10) head += "some text\n";
    ASSERT_EQ(::pwrite(fd.get(), head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
    const std::string tail = "needle after the hole\n";
    ASSERT_EQ(::pwrite(fd.get(), tail.data(), tail.size(), 4 << 20), static_cast<ssize_t>(tail.size()));
    ASSERT_EQ(::fchown(fd.get(), kUid, kGid), 0);
    // The test means nothing on a filesystem that stores the zeros.
    ASSERT_LT(::lseek(fd.get(), 0, SEEK_HOLE), (4 << 20) + static_cast<off_t>(tail.size()))
        << "the scratch filesystem does not keep holes";
  }
  put("dense.txt", "needle in a dense file\n");
  GrepOptions o;
  o.query = "needle";
  GrepResult r = grep_files(*dir_, p("~"), o);
  ASSERT_EQ(r.matches.size(), 1u);
  EXPECT_EQ(r.matches[0].file, "/home/alice/dense.txt");
  EXPECT_TRUE(grep_files(*dir_, p("sparse.txt"), o).matches.empty());
  o.query = "some text";
  EXPECT_TRUE(grep_files(*dir_, p("sparse.txt"), o).matches.empty());  // its head too

  // Larger than max_file_bytes: skipped, as before.
  o.query = "needle";
  o.max_file_bytes = 10;
  EXPECT_TRUE(grep_files(*dir_, p("dense.txt"), o).matches.empty());
}

TEST_F(FsTest, GlobWalksWithDoubleStarExcludeAndType) {
  put_dir("src");
  put_dir("src/deep");
  put_dir("node_modules");
  put("a.py", "");
  put("src/b.py", "");
  put("src/deep/c.py", "12345");
  put("src/deep/d.txt", "");
  put("node_modules/m.py", "");
  GlobOptions o;
  o.pattern = "**/*.py";
  o.exclude = {"node_modules"};
  GlobResult r = glob_files(*dir_, p("~"), o);
  std::vector<std::string> paths;
  for (auto& m : r.matches) paths.push_back(m.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"a.py", "src/b.py", "src/deep/c.py"}));
  EXPECT_EQ(r.matches[2].size, 5u);
  EXPECT_EQ(r.matches[2].type, "file");

  o = {};
  o.pattern = "*.py";  // no slash: any depth, as Open Terminal
  EXPECT_EQ(glob_files(*dir_, p("src"), o).matches.size(), 2u);
  o.pattern = "deep/*";
  r = glob_files(*dir_, p("src"), o);
  ASSERT_EQ(r.matches.size(), 2u);
  EXPECT_EQ(r.matches[0].path, "deep/c.py");
  o.pattern = "*";
  o.type = GlobType::directory;
  paths.clear();
  for (auto& m : glob_files(*dir_, p("~"), o).matches) paths.push_back(m.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"node_modules", "src", "src/deep"}));
  o.type = GlobType::any;
  o.max_results = 3;
  r = glob_files(*dir_, p("~"), o);
  EXPECT_EQ(r.matches.size(), 3u);
  EXPECT_TRUE(r.truncated);
  EXPECT_FS_ERROR(glob_files(*dir_, p("a.py"), o), FsErrorKind::not_found);
}

}  // namespace
}  // namespace agentbox
