// AtomicFile on a real ext4 (an image mounted through a loop device, commit=600 so the journal
// commits only when asked): what commit() returned for survives a crash that loses the journal's
// running transaction (EXT4_IOC_SHUTDOWN without a log flush, as xfstests' godown does). The
// soak's full state disk (tests/soak) lost acknowledged renames this way; the control shows the
// same crash does lose a rename whose directory was not synced.
#include "fs/atomic_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fs/confined_dir.hpp"
#include "util/unique_fd.hpp"

#ifndef EXT4_IOC_SHUTDOWN
#define EXT4_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#endif

namespace agentbox {
namespace {

constexpr uint32_t kGoingNoLogFlush = 2;  // EXT4_GOING_FLAGS_NOLOGFLUSH

int shell(const std::string& command) { return std::system(command.c_str()); }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class AtomicFileCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-atomic-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    image_ = dir_ + "/image";
    mnt_ = dir_ + "/mnt";
    std::filesystem::create_directory(mnt_);
    ASSERT_EQ(shell("truncate -s 32M " + image_ + " && mkfs.ext4 -q -F " + image_), 0);
    mount();
  }
  void TearDown() override {
    if (mounted_) shell("umount " + mnt_);
    std::filesystem::remove_all(dir_);
  }
  void mount() {
    ASSERT_EQ(shell("mount -o loop,commit=600 " + image_ + " " + mnt_), 0);
    mounted_ = true;
  }
  // The crash: the filesystem stops where it is, its running transaction never written; then
  // it is mounted again (the journal replayed).
  void crash_and_mount_again() {
    {
      UniqueFd root(::open(mnt_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      uint32_t flags = kGoingNoLogFlush;
      ASSERT_EQ(::ioctl(root.get(), EXT4_IOC_SHUTDOWN, &flags), 0) << std::strerror(errno);
    }
    ASSERT_EQ(shell("umount " + mnt_), 0);
    mounted_ = false;
    mount();
  }
  // Transactions the filesystem's journal has committed (/proc/fs/jbd2/loopN-8/info): a sync(2)
  // anywhere on the host (a test beside this one) commits every journal.
  uint64_t journal_commits() const {
    struct stat st {};
    if (::stat(mnt_.c_str(), &st) != 0) return 0;
    const std::string block = std::filesystem::read_symlink("/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                                                            std::to_string(minor(st.st_dev)))
                                  .filename();
    std::istringstream info(read_file("/proc/fs/jbd2/" + block + "-8/info"));
    uint64_t commits = 0;
    info >> commits;
    return commits;
  }
  void write_atomically(const std::string& name, const std::string& data) {
    AtomicFile f(EntryRef{UniqueFd(::open(mnt_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)), name}, name);
    f.write(data);
    f.commit();
  }

  std::string dir_, image_, mnt_;
  bool mounted_ = false;
};

TEST_F(AtomicFileCrashTest, WhatCommitReturnedForSurvivesACrash) {
  write_atomically("file", "old");
  ::sync();
  write_atomically("file", "new");
  crash_and_mount_again();
  EXPECT_EQ(read_file(mnt_ + "/file"), "new");
}

// Unless something else committed the journal between the rename and the crash (a sync(2) by a
// test running beside this one): that attempt proves nothing and is made again.
TEST_F(AtomicFileCrashTest, ControlTheSameCrashLosesARenameWhoseDirectoryWasNotSynced) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    write_atomically("file", "old");
    ::sync();
    {
      UniqueFd fd(::open((mnt_ + "/tmp").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      ASSERT_TRUE(fd);
      ASSERT_EQ(::write(fd.get(), "new", 3), 3);
      ASSERT_EQ(::fsync(fd.get()), 0);
    }
    const uint64_t before = journal_commits();
    ASSERT_EQ(::rename((mnt_ + "/tmp").c_str(), (mnt_ + "/file").c_str()), 0);
    const bool committed_meanwhile = journal_commits() != before;
    crash_and_mount_again();
    if (committed_meanwhile) continue;
    EXPECT_EQ(read_file(mnt_ + "/file"), "old");
    return;
  }
  GTEST_SKIP() << "the journal was committed by someone else during each of 5 attempts";
}

}  // namespace
}  // namespace agentbox
