// make_zip_archive against real files, as root, with the account's uid doing the reading: the
// archive holds exactly the files of the home asked for (read back with libzip), links leading
// out of the home are left out or refused, the account's permissions apply, and the archive
// never appears under any name.
#include "fs/zip_archive.hpp"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "fs/fs_error.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;
using ::testing::HasSubstr;

constexpr uid_t kUid = 1999998;
constexpr gid_t kGid = 1999998;

// Entry name → contents ("/"-terminated names are directories, contents empty).
using Entries = std::map<std::string, std::string>;

Entries unzip(int fd) {
  // Read the archive through a copy of the descriptor's bytes: libzip may not share our fd.
  std::string bytes;
  char buf[65536];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    off += n;
  }
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  EXPECT_NE(za, nullptr) << zip_error_strerror(&err);
  Entries out;
  if (!za) {
    zip_source_free(src);
    return out;
  }
  for (zip_int64_t i = 0; i < zip_get_num_entries(za, 0); ++i) {
    std::string name = zip_get_name(za, static_cast<zip_uint64_t>(i), 0);
    std::string data;
    zip_file_t* f = zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0);
    EXPECT_NE(f, nullptr) << name;
    for (zip_int64_t n; f && (n = zip_fread(f, buf, sizeof buf)) > 0;) data.append(buf, static_cast<size_t>(n));
    if (f) zip_fclose(f);
    out[name] = data;
  }
  zip_close(za);
  zip_error_fini(&err);
  return out;
}

class ZipArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-zip-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ASSERT_EQ(::chmod(base_.c_str(), 0755), 0);
    home_ = base_ + "/home";
    spool_ = base_ + "/spool";
    ASSERT_EQ(::mkdir(spool_.c_str(), 0700), 0);
    owned_dir(home_, 0700);
    owned_dir(base_ + "/outside", 0777);
    file(base_ + "/outside/secret", "OUTSIDE SECRET");
    dir_ = std::make_unique<ConfinedDir>(ConfinedDir::open_home(home_, "/home/alice", kUid, kGid));
  }
  void TearDown() override {
    dir_.reset();
    stdfs::remove_all(base_);
  }

  static void owned_dir(const std::string& path, mode_t mode = 0755) {
    ASSERT_EQ(::mkdir(path.c_str(), mode), 0) << path;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), kUid, kGid), 0);
  }
  static void file(const std::string& path, const std::string& data, mode_t mode = 0644) {
    std::ofstream(path, std::ios::binary) << data;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), kUid, kGid), 0);
  }
  void link(const std::string& rel, const std::string& target) {
    ASSERT_EQ(::symlink(target.c_str(), (home_ + "/" + rel).c_str()), 0);
    ASSERT_EQ(::lchown((home_ + "/" + rel).c_str(), kUid, kGid), 0);
  }
  std::vector<HomePath> paths(std::initializer_list<const char*> ps) {
    std::vector<HomePath> out;
    for (const char* p : ps) out.push_back(dir_->path(p));
    return out;
  }
  ZipArchive zip(std::initializer_list<const char*> ps, const ArchiveOptions& opt = {}) {
    return make_zip_archive(*dir_, paths(ps), spool_, opt);
  }
  FsErrorKind error_of(std::initializer_list<const char*> ps, std::string* message = nullptr,
                       const ArchiveOptions& opt = {}) {
    try {
      zip(ps, opt);
    } catch (const FsError& e) {
      if (message) *message = e.what();
      return e.kind();
    }
    ADD_FAILURE() << "no FsError";
    return FsErrorKind::bad_request;
  }

  std::string base_, home_, spool_;
  std::unique_ptr<ConfinedDir> dir_;
};

TEST_F(ZipArchiveTest, DirectoryTreeAndSingleFileRoundTrip) {
  owned_dir(home_ + "/proj");
  owned_dir(home_ + "/proj/src");
  owned_dir(home_ + "/proj/empty");
  file(home_ + "/proj/README.md", "# readme\n");
  file(home_ + "/proj/src/main.c", "int main(void) { return 0; }\n");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  file(home_ + "/proj/src/blob.bin", big);
  file(home_ + "/notes.txt", "note");

  ZipArchive a = zip({"proj", "~/notes.txt"});
  EXPECT_EQ(a.name, "download.zip");
  EXPECT_EQ(a.files, 4u);
  Entries e = unzip(a.fd.get());
  EXPECT_EQ(e, (Entries{{"proj/", ""},
                        {"proj/README.md", "# readme\n"},
                        {"proj/empty/", ""},
                        {"proj/src/", ""},
                        {"proj/src/blob.bin", big},
                        {"proj/src/main.c", "int main(void) { return 0; }\n"},
                        {"notes.txt", "note"}}));

  ZipArchive one = zip({"/home/alice/proj/README.md"});
  EXPECT_EQ(one.name, "README.md.zip");
  EXPECT_EQ(unzip(one.fd.get()), (Entries{{"README.md", "# readme\n"}}));
  struct stat st {};
  ASSERT_EQ(::fstat(one.fd.get(), &st), 0);
  EXPECT_EQ(st.st_nlink, 0u) << "the archive never has a name";
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), one.size);
  EXPECT_TRUE(stdfs::is_empty(spool_));
}

TEST_F(ZipArchiveTest, WholeHomeIsArchivedUnderTheUserName) {
  file(home_ + "/a.txt", "A");
  ZipArchive a = zip({"~"});
  EXPECT_EQ(a.name, "alice.zip");
  EXPECT_EQ(unzip(a.fd.get()), (Entries{{"alice/", ""}, {"alice/a.txt", "A"}}));
}

TEST_F(ZipArchiveTest, LinksInsideAreFilesLinksOutAreLeftOut) {
  owned_dir(home_ + "/d");
  file(home_ + "/d/real.txt", "real");
  link("d/inside", "real.txt");
  link("d/inside_abs", "/home/alice/d/real.txt");
  link("d/out_abs", (base_ + "/outside/secret").c_str());
  link("d/out_rel", "../../outside/secret");
  link("d/out_dir", (base_ + "/outside").c_str());
  link("d/proc_root", "/proc/self/root/etc/passwd");
  link("d/loop", ".");
  link("d/dangling", "nowhere");
  ZipArchive a = zip({"d"});
  Entries e = unzip(a.fd.get());
  EXPECT_EQ(e, (Entries{{"d/", ""},
                        {"d/inside", "real"},
                        {"d/inside_abs", "real"},
                        {"d/real.txt", "real"}}));
  for (const auto& [name, data] : e) EXPECT_THAT(data, ::testing::Not(HasSubstr("SECRET")));
}

TEST_F(ZipArchiveTest, AskingForWhatIsOutsideIsRefused) {
  link("out", (base_ + "/outside").c_str());
  link("secret", (base_ + "/outside/secret").c_str());
  EXPECT_EQ(error_of({"secret"}), FsErrorKind::forbidden);
  EXPECT_EQ(error_of({"out"}), FsErrorKind::forbidden);
  EXPECT_THROW(dir_->path("/home/bob/x"), FsError);
  EXPECT_THROW(dir_->path("../outside/secret"), FsError);
  EXPECT_THROW(dir_->path("/proc/self/root/etc/passwd"), FsError);
}

TEST_F(ZipArchiveTest, EmptyListMissingPathAndLimits) {
  std::string msg;
  EXPECT_EQ(error_of({}, &msg), FsErrorKind::bad_request);
  EXPECT_EQ(msg, "No paths provided");
  EXPECT_EQ(error_of({"nope"}, &msg), FsErrorKind::not_found);
  EXPECT_EQ(msg, "Path not found: /home/alice/nope");

  owned_dir(home_ + "/many");
  for (int i = 0; i < 20; ++i) file(home_ + "/many/f" + std::to_string(i), std::string(1000, 'x'));
  ArchiveOptions small;
  small.max_input_bytes = 10000;
  EXPECT_EQ(error_of({"many"}, &msg, small), FsErrorKind::too_large);
  ArchiveOptions few;
  few.limits.max_entries = 5;
  EXPECT_EQ(error_of({"many"}, &msg, few), FsErrorKind::too_large);
  EXPECT_THAT(msg, HasSubstr("Too many entries"));
  EXPECT_TRUE(stdfs::is_empty(spool_));
}

TEST_F(ZipArchiveTest, TheAccountsPermissionsApply) {
  owned_dir(home_ + "/d");
  file(home_ + "/d/mine.txt", "mine");
  // A file in the home the account cannot read (root's, 0600): the daemon could, the user not.
  std::ofstream(home_ + "/d/roots.txt") << "root only";
  ASSERT_EQ(::chmod((home_ + "/d/roots.txt").c_str(), 0600), 0);
  EXPECT_EQ(error_of({"d/roots.txt"}), FsErrorKind::forbidden);
  // In a tree, libzip opens it as the account when it gets there: the archive fails as a whole.
  std::string msg;
  EXPECT_EQ(error_of({"d"}, &msg), FsErrorKind::forbidden);
  EXPECT_TRUE(stdfs::is_empty(spool_));
}

TEST_F(ZipArchiveTest, NothingToArchiveGivesAValidEmptyZip) {
  ASSERT_EQ(::mkfifo((home_ + "/pipe").c_str(), 0644), 0);  // would block a reader forever
  ZipArchive z = zip({"pipe"});
  EXPECT_EQ(z.files, 0u);
  EXPECT_EQ(z.size, 22u);
  EXPECT_TRUE(unzip(z.fd.get()).empty());
}

TEST_F(ZipArchiveTest, DuplicateNamesKeepTheFirst) {
  owned_dir(home_ + "/a");
  owned_dir(home_ + "/b");
  file(home_ + "/a/x.txt", "from a");
  file(home_ + "/b/x.txt", "from b");
  ZipArchive z = zip({"a/x.txt", "b/x.txt"});
  EXPECT_EQ(unzip(z.fd.get()), (Entries{{"x.txt", "from a"}}));
}

}  // namespace
}  // namespace agentbox
