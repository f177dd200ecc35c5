// Idle account volumes on this host (root, loop devices, mkfs.ext4): a lease pins its volume,
// one no lease holds is detached after its idle window (unmounted, its loop device released,
// its mount point gone) unless something holds a file in it, the cap detaches the least
// recently used first, and the next lease attaches it again with its files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "support/volumes_fixture.hpp"
#include "util/unique_fd.hpp"
#include "volumes/account_volumes.hpp"
#include "volumes/idle_volumes.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;
using namespace std::chrono_literals;

class IdleVolumesTest : public testing::VolumesTest {
 protected:
  IdleVolumesTest() : VolumesTest("abx-idle") {}
  static bool mounted(const std::string& dir) {
    struct stat a, b;
    return ::stat(dir.c_str(), &a) == 0 && ::stat(stdfs::path(dir).parent_path().c_str(), &b) == 0 &&
           a.st_dev != b.st_dev;
  }
  // One round of a detacher with no box running, as if `later` had passed.
  size_t round(IdleVolumePolicy policy, std::chrono::seconds later, std::set<std::string> pinned = {}) {
    IdleVolumes idle(
        *volumes_, {.idle = policy.idle, .max_attached = policy.max_attached, .tick = 1h},
        [pinned] { return std::optional<std::set<std::string>>(pinned); }, [](const std::string&) {});
    idle.stop();  // its own rounds stay out of the way; this one is the test's
    return idle.run_once(IdleVolumes::Clock::now() + later);
  }
};

TEST_F(IdleVolumesTest, ALeasedVolumeStaysAndAnIdleOneIsDetachedThenAttachedAgainWithItsFiles) {
  const VolumeOwner alice{"alice-1", 1999997, 1999997};
  std::string root;
  {
    VolumeLease lease = volumes_->lease(alice);
    root = lease.paths().root;
    { std::ofstream(lease.paths().home + "/note") << "kept\n"; }
    EXPECT_EQ(round({.idle = 1s}, 10s), 0u);  // pinned: however long ago
    EXPECT_TRUE(mounted(root));
  }
  EXPECT_EQ(round({.idle = 300s}, 10s), 0u);  // let go, but not idle long enough
  EXPECT_TRUE(mounted(root));
  EXPECT_EQ(round({.idle = 1s}, 10s, {"alice-1"}), 0u);  // a box runs: never detached
  EXPECT_TRUE(mounted(root));

  EXPECT_EQ(round({.idle = 1s}, 10s), 1u);
  EXPECT_FALSE(mounted(root));
  EXPECT_FALSE(stdfs::exists(root));  // no path into the state filesystem meanwhile
  EXPECT_EQ(volumes_->attached(), 0u);
  EXPECT_TRUE(volumes_->mirror_wanted("alice-1"));  // used, then detached: its last state to copy

  VolumeLease again = volumes_->lease(alice);
  EXPECT_TRUE(mounted(root));
  std::ifstream in(again.paths().home + "/note");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "kept");
}

TEST_F(IdleVolumesTest, AFileHeldOpenInAVolumeKeepsItMounted) {
  VolumePaths p = volumes_->open({"bob-1", 1999996, 1999996});
  UniqueFd held(::open(p.home.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(held);
  EXPECT_EQ(round({.idle = 1s}, 10s), 0u);  // the unmount is never forced
  EXPECT_TRUE(mounted(p.root));
  EXPECT_EQ(volumes_->attached(), 1u);
  held.reset();
  EXPECT_EQ(round({.idle = 1s}, 10s), 1u);
  EXPECT_FALSE(mounted(p.root));
}

TEST_F(IdleVolumesTest, OverTheCapTheLeastRecentlyUsedGoFirstAndLeasedOnesStay) {
  std::string roots[3];
  VolumeLease held;
  for (int i = 0; i < 3; ++i) {
    VolumeLease lease = volumes_->lease({"u" + std::to_string(i), 1999990u + i, 1999990u + i});
    roots[i] = lease.paths().root;
    if (i == 0) held = std::move(lease);  // u0 is in use throughout
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(volumes_->attached(), 3u);
  EXPECT_EQ(round({.idle = 3600s, .max_attached = 1}, 0s), 2u);
  EXPECT_TRUE(mounted(roots[0]));
  EXPECT_FALSE(mounted(roots[1]));
  EXPECT_FALSE(mounted(roots[2]));

  held = VolumeLease();
  (void)volumes_->open({"u1", 1999991, 1999991});  // used again: u0 is now the least recent
  EXPECT_EQ(round({.idle = 3600s, .max_attached = 1}, 0s), 1u);
  EXPECT_FALSE(mounted(roots[0]));
  EXPECT_TRUE(mounted(roots[1]));
}

}  // namespace
}  // namespace agentbox
