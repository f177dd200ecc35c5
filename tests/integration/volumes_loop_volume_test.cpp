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
#include <string>
#include <thread>
#include <vector>

#include "util/capabilities.hpp"
#include "util/error.hpp"
#include "util/loop_image_probe.hpp"
#include "util/run_program.hpp"
#include "volumes/account_volumes.hpp"
#include "volumes/ext4_superblock.hpp"
#include "volumes/volume_backend.hpp"

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
  // Whether dir is the root of a mount (a bind of a directory onto itself is one too).
  static bool mount_root(const std::string& dir) {
    struct statx stx {};
    if (::statx(AT_FDCWD, dir.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) return false;
    return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
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
  // Full within ext4's own reserve: without resize_inode (ext4_image.cpp) a 32 MiB volume
  // reports ~0.8 MiB more blocks, and what can be written is the same 26.6 MB as with it.
  EXPECT_GE(u.bytes_used + (2 << 20), u.bytes_limit);
  EXPECT_GE(u.bytes_used, 26ull << 20);
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

// A volume whose ext4 went read-only on an error (its image could not grow: the state disk was
// full) keeps EXT4_ERROR_FS until e2fsck: checked at its next mount, it comes back clean.
TEST_F(LoopVolumeTest, AVolumeWhoseExt4RecordedAnErrorIsCheckedBeforeItIsMountedAgain) {
  const std::string dir = base_ + "/v", image = dir + ".img";
  backend_->prepare(dir, {32ull << 20, 2000});
  { std::ofstream(dir + "/keep") << "kept\n"; }
  backend_->release(dir);
  ASSERT_FALSE(mounted(dir));
  ASSERT_EQ(run_program({"tune2fs", "-E", "force_fsck", image}).status, 0);  // the error flag, as ext4 sets it
  ASSERT_TRUE(ext4_image_has_errors(image));

  backend_->prepare(dir, {32ull << 20, 2000});
  EXPECT_TRUE(mounted(dir));
  EXPECT_TRUE(stdfs::exists(dir + "/keep"));
  backend_->release(dir);
  EXPECT_FALSE(ext4_image_has_errors(image)) << "mounted again without e2fsck";
  EXPECT_TRUE(ext4_image_settled(image));
}

TEST_F(LoopVolumeTest, AccountVolumesMakeTheHomeTrashAndDaemonDirectories) {
  {
    AccountVolumes volumes(base_, make_volume_backend(true), [](const std::string&) {
      return DiskQuota{32ull << 20, 2000};
    });
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

// A daemon stopping while something still holds the volumes directory (a box's teardown in
// flight) must not leave its bind mount behind: the unmount is detached, freed when let go.
TEST_F(LoopVolumeTest, AVolumesDirectoryStillInUseIsUnmountedWhenTheDaemonLetsGo) {
  const std::string root = base_ + "/volumes";
  int held = -1;
  {
    AccountVolumes volumes(base_, make_volume_backend(true), [](const std::string&) {
      return DiskQuota{32ull << 20, 2000};
    });
    volumes.open({"bob-1", 1999996, 1999996});
    EXPECT_TRUE(mount_root(root));
    held = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(held, 0);
  }
  EXPECT_FALSE(mount_root(root));
  EXPECT_FALSE(mounted(root + "/bob-1"));
  ::close(held);
}

TEST_F(LoopVolumeTest, AnIdleVolumesUsageIsReadFromItsImageAsStatvfsWouldSayIt) {
  const std::string dir = base_ + "/v";
  backend_->prepare(dir, DiskQuota{32ull << 20, 2000});
  std::ofstream(dir + "/data") << std::string(3 << 20, 'x');
  std::ofstream(dir + "/more") << "y";
  ::sync();
  const VolumeUsage mounted_view = backend_->usage(dir);
  backend_->release(dir);
  ASSERT_FALSE(mounted(dir));
  const VolumeUsage idle_view = backend_->usage(dir);
  EXPECT_EQ(idle_view.bytes_limit, mounted_view.bytes_limit);
  EXPECT_EQ(idle_view.bytes_used, mounted_view.bytes_used);
  EXPECT_GE(idle_view.bytes_used, 3ull << 20);
  EXPECT_EQ(idle_view.inodes_limit, mounted_view.inodes_limit);
  EXPECT_EQ(idle_view.inodes_used, mounted_view.inodes_used);
  EXPECT_FALSE(mounted(dir)) << "reading the usage mounts nothing";
}

TEST_F(LoopVolumeTest, ARetiredVolumeMovesAsideIsRefusedAndIsPurgedAfterItsTime) {
  AccountVolumes volumes(base_, make_volume_backend(true), [](const std::string&) {
    return DiskQuota{32ull << 20, 2000};
  });
  VolumePaths p = volumes.open({"bob-1", 1999996, 1999996});
  std::ofstream(p.home + "/notes") << "kept for a while";
  volumes.open({"carol-1", 1999995, 1999995});

  const std::string kept = volumes.retire("bob-1");
  EXPECT_FALSE(stdfs::exists(p.root)) << "nothing left under the account's name";
  EXPECT_FALSE(stdfs::exists(p.root + ".img"));
  EXPECT_TRUE(stdfs::is_regular_file(kept + "/bob-1.img"));
  EXPECT_EQ(stdfs::path(kept).parent_path(), stdfs::path(base_ + "/volumes/.deleted"));
  EXPECT_EQ(volumes.opened(), std::vector<std::string>{"carol-1"});
  EXPECT_THROW(volumes.open({"bob-1", 1999996, 1999996}), Error) << "never mounted again in this run";
  EXPECT_FALSE(stdfs::exists(p.root)) << "the refusal made nothing";

  // Its image still holds the files until the purge (an operator can mount it by hand).
  EXPECT_GE(volumes.usage("carol-1").inodes_used, 1u);
  EXPECT_EQ(volumes.purge_retired(::time(nullptr) - 60), 0u) << "younger than the cutoff: kept";
  EXPECT_TRUE(stdfs::exists(kept));
  EXPECT_EQ(volumes.purge_retired(::time(nullptr) + 60), 1u);
  EXPECT_FALSE(stdfs::exists(kept));
  EXPECT_TRUE(mounted(base_ + "/volumes/carol-1")) << "other accounts' volumes are untouched";
}

}  // namespace
}  // namespace agentbox
