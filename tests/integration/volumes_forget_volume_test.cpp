// Forgetting an account's volume on this host (root, loop devices, mkfs.ext4): a detached
// volume whose image holds nothing but a new account's is deleted (image and mount point), one
// with anything in it stays whatever happens, an attached one is never touched, and the next
// lease makes a new, empty volume.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "support/volumes_fixture.hpp"
#include "volumes/account_volumes.hpp"
#include "volumes/ext4_superblock.hpp"
#include "volumes/idle_volumes.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;
using namespace std::chrono_literals;

class ForgetVolumeTest : public testing::VolumesTest {
 protected:
  ForgetVolumeTest() : VolumesTest("abx-forget") {}
  // Every volume no lease holds is detached, as the idle detacher does after its window.
  void detach_all() {
    IdleVolumes idle(
        *volumes_, {.idle = 1s, .max_attached = 0, .tick = 1h},
        [] { return std::optional<std::set<std::string>>(std::set<std::string>{}); }, [](const std::string&) {});
    idle.stop();
    idle.run_once(IdleVolumes::Clock::now() + 10s);
  }
  std::string image(const std::string& name) const { return base_ + "/volumes/" + name + ".img"; }
};

TEST_F(ForgetVolumeTest, AnEmptyDetachedVolumeIsDeletedAndTheNextLeaseMakesANewOne) {
  const VolumeOwner alice{"alice-1", 1999997, 1999997};
  { VolumeLease lease = volumes_->lease(alice); }
  EXPECT_FALSE(volumes_->forget_if_empty("alice-1")) << "attached: never forgotten";
  EXPECT_TRUE(stdfs::exists(image("alice-1")));
  detach_all();
  ASSERT_TRUE(ext4_image_settled(image("alice-1")));
  EXPECT_EQ(volumes_->usage("alice-1").inodes_used, kEmptyVolumeInodes) << "the skeleton's count is what we rely on";
  std::optional<uint64_t> freed = volumes_->forget_if_empty("alice-1");
  ASSERT_TRUE(freed);
  EXPECT_GT(*freed, 0u);
  EXPECT_FALSE(stdfs::exists(image("alice-1")));
  EXPECT_FALSE(stdfs::exists(base_ + "/volumes/alice-1"));

  VolumeLease again = volumes_->lease(alice);  // the user comes back
  EXPECT_TRUE(stdfs::is_directory(again.paths().home));
  EXPECT_TRUE(stdfs::is_empty(again.paths().home));
  std::ofstream(again.paths().home + "/new") << "written\n";
  EXPECT_TRUE(stdfs::exists(again.paths().home + "/new"));
}

TEST_F(ForgetVolumeTest, AVolumeWithAFileAnywhereStays) {
  for (const char* dir : {"home", "trash", "daemon/logs"}) {
    const std::string where = dir;
    const std::string name = "bob-" + where.substr(0, 1);
    {
      VolumeLease lease = volumes_->lease({name, 1999996, 1999996});
      std::ofstream(lease.paths().root + "/" + where + "/kept") << "x";
    }
    detach_all();
    EXPECT_FALSE(volumes_->forget_if_empty(name)) << where;
    EXPECT_TRUE(stdfs::exists(image(name))) << where;
    VolumeLease back = volumes_->lease({name, 1999996, 1999996});
    EXPECT_TRUE(stdfs::exists(back.paths().root + "/" + where + "/kept")) << where;
  }
}

TEST_F(ForgetVolumeTest, AFileWrittenThenDeletedLeavesItEmpty) {
  {
    VolumeLease lease = volumes_->lease({"carol-1", 1999995, 1999995});
    std::ofstream(lease.paths().home + "/gone") << std::string(1 << 20, 'x');
    stdfs::create_directories(lease.paths().home + "/a/b");
    stdfs::remove_all(lease.paths().home + "/a");
    stdfs::remove(lease.paths().home + "/gone");
  }
  detach_all();
  EXPECT_TRUE(volumes_->forget_if_empty("carol-1"));
}

TEST_F(ForgetVolumeTest, AMountedImageIsNotSettledAndAMissingOneIsNothingToForget) {
  VolumeLease lease = volumes_->lease({"dan-1", 1999994, 1999994});
  EXPECT_FALSE(ext4_image_settled(image("dan-1"))) << "mounted: its journal marks it needs_recovery";
  EXPECT_FALSE(volumes_->forget_if_empty("nobody-1"));
}

}  // namespace
}  // namespace agentbox
