// The loop_image volume backend on this host (root, loop devices, mkfs.ext4): an account's
// volume is a filesystem of its quota's size, full is ENOSPC for root writes too, a volume
// mounted already is reused, a raised quota grows it, and it unmounts when released.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include "fs/account_volumes.hpp"
#include "fs/volume_backend.hpp"
#include "util/capabilities.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;

class LoopVolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!loop_images_supported(&why)) GTEST_SKIP() << why;
    char tmpl[] = "/tmp/abx-volume-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    backend_ = make_volume_backend(true);
  }
  void TearDown() override {
    if (backend_) backend_->release(base_ + "/v");
    if (!base_.empty()) stdfs::remove_all(base_);
  }
  static bool mounted(const std::string& dir) {
    struct stat a, b;
    return ::stat(dir.c_str(), &a) == 0 && ::stat(stdfs::path(dir).parent_path().c_str(), &b) == 0 &&
           a.st_dev != b.st_dev;
  }
  // Writes zeros until the filesystem refuses; returns errno of the refusal.
  static int fill(const std::string& path, uint64_t max_bytes) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    std::vector<char> buf(1 << 20, 0);
    int err = 0;
    for (uint64_t done = 0; done < max_bytes;) {
      ssize_t n = ::write(fd, buf.data(), buf.size());
      if (n < 0) {
        err = errno;
        break;
      }
      done += static_cast<uint64_t>(n);
    }
    if (!err && ::fsync(fd) != 0) err = errno;
    ::close(fd);
    return err;
  }

  std::string base_;
  std::unique_ptr<VolumeBackend> backend_;
};

TEST_F(LoopVolumeTest, AVolumeHoldsItsQuotaAndNoMoreEvenForRootWithoutSysResource) {
  const std::string dir = base_ + "/v";
  backend_->prepare(dir, {32ull << 20, 2000});
  ASSERT_TRUE(mounted(dir));
  VolumeUsage u = backend_->usage(dir);
  EXPECT_LE(u.bytes_limit, 32ull << 20);
  EXPECT_GE(u.bytes_limit, 24ull << 20);
  EXPECT_GE(u.inodes_limit, 1900u);  // mkfs rounds to whole inode tables
  EXPECT_LE(u.inodes_limit, 4096u);
  // The image is sparse: it takes host blocks only as they are written.
  struct stat img;
  ASSERT_EQ(::stat((dir + ".img").c_str(), &img), 0);
  EXPECT_EQ(img.st_size, 32 << 20);
  EXPECT_LT(static_cast<uint64_t>(img.st_blocks) * 512, 16ull << 20);

  // In a thread without CAP_SYS_RESOURCE, as the daemon runs: the volume's end is the end.
  int err = 0;
  std::thread([&] {
    drop_capability(CAP_SYS_RESOURCE);
    err = fill(dir + "/big", 64ull << 20);
  }).join();
  EXPECT_EQ(err, ENOSPC);
  u = backend_->usage(dir);
  EXPECT_GE(u.bytes_used + (1 << 20), u.bytes_limit);
}

TEST_F(LoopVolumeTest, AMountedVolumeIsReusedAndARaisedQuotaGrowsItAtItsNextMount) {
  const std::string dir = base_ + "/v";
  backend_->prepare(dir, {32ull << 20, 2000});
  { std::ofstream(dir + "/keep") << "kept\n"; }
  backend_->prepare(dir, {32ull << 20, 2000});  // again: nothing made anew
  EXPECT_TRUE(stdfs::exists(dir + "/keep"));
  const uint64_t before = backend_->usage(dir).bytes_limit;

  backend_->release(dir);
  EXPECT_FALSE(mounted(dir));
  backend_->prepare(dir, {64ull << 20, 2000});  // mounted again from its image, grown
  EXPECT_TRUE(mounted(dir));
  EXPECT_TRUE(stdfs::exists(dir + "/keep"));
  EXPECT_GT(backend_->usage(dir).bytes_limit, before + (24ull << 20));
}

TEST_F(LoopVolumeTest, AccountVolumesMakeTheHomeTrashAndDaemonDirectories) {
  {
    AccountVolumes volumes(base_, make_volume_backend(true),
                           [](const std::string&) { return DiskQuota{32ull << 20, 2000}; });
    VolumePaths p = volumes.open({"alice-1", 1999997, 1999997});
    struct stat st;
    ASSERT_EQ(::stat(p.home.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 1999997u);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    ASSERT_EQ(::stat(p.trash.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 1999997u);
    ASSERT_EQ(::stat(p.daemon.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    EXPECT_TRUE(mounted(p.root));
    EXPECT_EQ(AccountVolumes::home_dir("alice-1"), "volumes/alice-1/home");
    EXPECT_EQ(volumes.opened(), std::vector<std::string>{"alice-1"});
  }
  // Unmounted when the daemon lets go of them.
  EXPECT_FALSE(mounted(base_ + "/volumes/alice-1"));
}

}  // namespace
}  // namespace agentbox
