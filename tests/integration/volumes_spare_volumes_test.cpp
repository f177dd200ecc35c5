// Spare volumes (volumes/spare_volumes.hpp) on this host (root, loop devices, mkfs.ext4): the
// pool fills to its bound with blank volumes already mounted; taking one renames its image into
// place and moves its mount onto the volume's directory at once, and the refill replaces it; a
// quota other than the spares' gets none; a new pool on the same directory mounts the old spares
// again instead of making new ones and deletes what is not its own; a stopped pool leaves its
// images and no loop device. Then the loop_image backend giving a new account a spare.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "support/eventually.hpp"
#include "support/log_capture.hpp"
#include "support/scratch_dir.hpp"
#include "util/file_io.hpp"
#include "util/loop_image_probe.hpp"
#include "volumes/account_volumes.hpp"
#include "volumes/spare_volumes.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr DiskQuota kQuota{32ull << 20, 2000};

// A spare's mkfs and mount take a while on a loaded machine: 30 s by default here.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds within = 30s) {
  return testing::eventually(done, within);
}

bool mounted(const std::string& dir) {
  struct stat a {
  }, b{};
  return ::stat(dir.c_str(), &a) == 0 && ::stat(stdfs::path(dir).parent_path().c_str(), &b) == 0 &&
         a.st_dev != b.st_dev;
}

// The spares' images, by name.
std::set<std::string> images_in(const std::string& spare_dir) {
  std::set<std::string> out;
  for (const auto& e : stdfs::directory_iterator(spare_dir)) out.insert(e.path().filename().string());
  return out;
}

// Loop devices whose backing file is under `dir`.
int loops_backing(const std::string& dir) {
  int n = 0;
  for (const auto& e : stdfs::directory_iterator("/sys/block")) {
    auto backing = read_file_if_exists(e.path().string() + "/loop/backing_file", 8192);
    if (backing && backing->starts_with(dir)) ++n;
  }
  return n;
}

class SpareVolumesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!loop_images_supported(&why)) GTEST_FAIL() << "this test needs loop devices and mkfs.ext4: " << why;
    volumes_ = scratch_.path() + "/volumes";
    ASSERT_EQ(::mkdir(volumes_.c_str(), 0711), 0);
    spare_dir_ = volumes_ + "/.spare";
    images_ = std::make_unique<Ext4Images>(volumes_);
  }
  SparePolicy policy(size_t count, DiskQuota quota = kQuota) { return {count, quota}; }

  testing::ScratchDir scratch_{"agentbox-spares"};
  std::unique_ptr<Ext4Images> images_;  // of volumes_, once it is made
  std::string volumes_, spare_dir_;
  testing::LogCapture log_;  // what the spares say went wrong (util/log.hpp)
};

TEST_F(SpareVolumesTest, TheBoundIsKeptAndATakenSpareIsAMountedVolumeAtOnce) {
  SpareVolumes spares(volumes_, policy(2), *images_);
  ASSERT_TRUE(eventually([&] { return spares.ready() == 2; })) << log_.text();
  EXPECT_EQ(images_in(spare_dir_).size(), 2u);
  EXPECT_EQ(loops_backing(spare_dir_), 2) << "each spare is mounted already (a loop device each)";

  const std::string dir = volumes_ + "/alice-1a2b3c", image = dir + ".img";
  ASSERT_EQ(::mkdir(dir.c_str(), 0711), 0);
  const auto t0 = Clock::now();
  EXPECT_EQ(spares.take(kQuota, image, dir), SpareVolumes::Taken::mounted);
  const auto took = Clock::now() - t0;
  EXPECT_LT(took, 200ms) << "a rename and a move_mount";
  EXPECT_TRUE(mounted(dir));
  EXPECT_TRUE(stdfs::exists(image));
  struct statvfs s {};
  ASSERT_EQ(::statvfs(dir.c_str(), &s), 0);
  EXPECT_LE(s.f_blocks * s.f_frsize, kQuota.bytes);
  EXPECT_GE(s.f_blocks * s.f_frsize, kQuota.bytes * 3 / 4);
  { std::ofstream(dir + "/hello") << "hi\n"; }
  EXPECT_EQ(read_file_if_exists(dir + "/hello").value_or(""), "hi\n");

  ASSERT_TRUE(eventually([&] { return spares.ready() == 2; })) << "refilled behind it";
  EXPECT_EQ(images_in(spare_dir_).size(), 2u);
  EXPECT_EQ(spares.take({64ull << 20, 2000}, volumes_ + "/b.img", volumes_ + "/b"), SpareVolumes::Taken::none)
      << "another quota makes its own";
  EXPECT_EQ(spares.ready(), 2u);
  EXPECT_TRUE(log_.lines_now().empty()) << log_.text();
  ASSERT_EQ(::umount2(dir.c_str(), 0), 0);
}

// The refill thread starts before the daemon blocks its stop signals (daemon/serve.cpp): were
// SIGTERM deliverable there, a second one while the daemon stops would kill it with every
// volume still mounted.
TEST_F(SpareVolumesTest, TheRefillThreadTakesNoSignalMeantForTheDaemon) {
  SpareVolumes spares(volumes_, policy(1), *images_);
  std::string status;
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& task : stdfs::directory_iterator("/proc/self/task"))
          if (read_file_if_exists(task.path().string() + "/comm").value_or("") == "spare-volumes\n") {
            status = read_file_if_exists(task.path().string() + "/status").value_or("");
            return true;
          }
        return false;
      },
      5s))
      << "no thread named spare-volumes";
  const size_t at = status.find("SigBlk:\t");
  ASSERT_NE(at, std::string::npos) << status;
  const uint64_t blocked = std::stoull(status.substr(at + 8, 16), nullptr, 16);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD})
    EXPECT_TRUE(blocked & (uint64_t{1} << (sig - 1))) << "signal " << sig << " deliverable to the refill";
  EXPECT_FALSE(blocked & (uint64_t{1} << (SIGSEGV - 1))) << "a fault of its own stays deliverable";
}

TEST_F(SpareVolumesTest, ARestartMountsTheOldSparesAgainAndDeletesWhatIsNotItsOwn) {
  std::set<std::string> made;
  {
    SpareVolumes spares(volumes_, policy(2), *images_);
    ASSERT_TRUE(eventually([&] { return spares.ready() == 2; })) << log_.text();
    made = images_in(spare_dir_);
  }
  EXPECT_EQ(images_in(spare_dir_), made) << "a stop keeps the images";
  EXPECT_TRUE(eventually([&] { return loops_backing(spare_dir_) == 0; }, 10s)) << "and leaves no loop device";

  { std::ofstream(spare_dir_ + "/99-1-1.img") << "another quota's"; }
  { std::ofstream(spare_dir_ + "/" + *made.begin() + ".new") << "half made"; }
  {
    SpareVolumes spares(volumes_, policy(2), *images_);
    ASSERT_TRUE(eventually([&] { return spares.ready() == 2; })) << log_.text();
    EXPECT_EQ(images_in(spare_dir_), made) << "the same spares, mounted again: no mkfs";
  }
  {
    SpareVolumes spares(volumes_, policy(1, {48ull << 20, 2000}), *images_);
    ASSERT_TRUE(eventually([&] { return spares.ready() == 1; })) << log_.text();
    const std::set<std::string> now = images_in(spare_dir_);
    ASSERT_EQ(now.size(), 1u) << "the old quota's spares are gone";
    EXPECT_TRUE(now.begin()->starts_with(std::to_string(48ull << 20) + "-2000-")) << *now.begin();
  }
}

TEST_F(SpareVolumesTest, ANewAccountOfTheDefaultQuotaGetsASpare) {
  std::set<ino_t> spare_inodes;
  {
    AccountVolumes volumes(scratch_.path(), make_volume_backend(true, policy(1)), [](const std::string& name) {
      return name == "big" ? DiskQuota{64ull << 20, 2000} : kQuota;
    });
    const SpareVolumes* spares = volumes.backend().spares();
    ASSERT_NE(spares, nullptr);
    ASSERT_TRUE(eventually([&] { return spares->ready() == 1; })) << log_.text();
    for (const std::string& name : images_in(spare_dir_)) {
      struct stat st {};
      ASSERT_EQ(::stat((spare_dir_ + "/" + name).c_str(), &st), 0);
      spare_inodes.insert(st.st_ino);
    }

    const VolumePaths p = volumes.open({"carol-1a2b3c", 4400001, 4400001});
    struct stat image {
    }, home{};
    ASSERT_EQ(::stat((p.root + ".img").c_str(), &image), 0);
    EXPECT_TRUE(spare_inodes.contains(image.st_ino)) << "carol's image is the spare's";
    EXPECT_TRUE(mounted(p.root));
    ASSERT_EQ(::stat(p.home.c_str(), &home), 0);
    EXPECT_EQ(home.st_uid, 4400001u);
    EXPECT_EQ(home.st_mode & 07777, 0700u);

    const VolumePaths big = volumes.open({"big", 4400002, 4400002});
    ASSERT_EQ(::stat((big.root + ".img").c_str(), &image), 0);
    EXPECT_FALSE(spare_inodes.contains(image.st_ino)) << "another quota: made for it";
    EXPECT_EQ(image.st_size, 64 << 20);
    ASSERT_TRUE(eventually([&] { return spares->ready() == 1; })) << "refilled";
  }
  EXPECT_FALSE(mounted(scratch_.path() + "/volumes/carol-1a2b3c")) << "unmounted when the daemon lets go";
  EXPECT_TRUE(eventually([&] { return loops_backing(scratch_.path()) == 0; }, 10s));
  EXPECT_TRUE(log_.lines_now().empty()) << log_.text();
}

}  // namespace
}  // namespace agentbox
