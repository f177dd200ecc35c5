// Which loop device holds an image (volumes/loop_holders.hpp), on this host's loop devices
// (root): a device attached before the first question is found by the one scan; afterwards the
// table knows what it is told, forgets a device once it has freed itself (and never answers
// with a device that now holds another file), and does not keep every image it ever saw.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "support/eventually.hpp"
#include "support/scratch_dir.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"
#include "volumes/loop_device.hpp"
#include "volumes/loop_holders.hpp"

namespace agentbox {
namespace {

using namespace std::chrono_literals;

using testing::eventually;

class LoopHoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/dev/loop-control", R_OK | W_OK) != 0) GTEST_FAIL() << "this test needs /dev/loop-control (root)";
  }

  // A 1 MiB sparse file, open, its stat in `st`.
  UniqueFd image(const std::string& name, struct stat& st) {
    const std::string path = scratch_.path() + "/" + name;
    UniqueFd fd(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
    if (!fd || ::ftruncate(fd.get(), 1 << 20) != 0 || ::fstat(fd.get(), &st) != 0) throw sys_error("image " + path);
    return fd;
  }

  // The image attached to a loop device that frees itself when `loop` (returned) is closed.
  UniqueFd attach(const UniqueFd& image, const std::string& name, std::string& device) {
    return attach_loop(image, scratch_.path() + "/" + name, device);
  }

  testing::ScratchDir scratch_{"agentbox-loop-holders"};
};

TEST_F(LoopHoldersTest, ADeviceAttachedBeforeTheFirstQuestionIsFoundByTheScan) {
  struct stat st {};
  UniqueFd img = image("a.img", st);
  std::string device;
  UniqueFd loop = attach(img, "a.img", device);  // as a crashed predecessor's box would hold it

  LoopHolders holders;
  ASSERT_TRUE(holders.holder(st));
  EXPECT_EQ(holders.holder(st)->device, device);
}

// Between the answer and the mount the device could free itself (a box's teardown letting go of
// its last mount) and hold another image by the time it is mounted: the answer keeps it open.
TEST_F(LoopHoldersTest, TheAnswerKeepsTheDeviceHoldingTheFileUntilItIsClosed) {
  struct stat st {};
  UniqueFd img = image("a.img", st);
  std::string device;
  UniqueFd loop = attach(img, "a.img", device);
  LoopHolders holders;
  std::optional<LoopHolders::Held> held = holders.holder(st);
  ASSERT_TRUE(held);
  const std::string record = "/sys/block/" + device.substr(5) + "/loop/backing_file";

  loop.reset();  // its last other user goes
  EXPECT_EQ(::access(record.c_str(), F_OK), 0) << device << " freed itself while the answer held it";
  held.reset();
  EXPECT_TRUE(eventually([&] { return ::access(record.c_str(), F_OK) != 0; })) << device << " never freed";
}

TEST_F(LoopHoldersTest, AfterTheScanTheTableKnowsWhatItIsToldAndForgetsFreedDevices) {
  struct stat a {
  }, b{}, c{};
  UniqueFd img_a = image("a.img", a), img_b = image("b.img", b), img_c = image("c.img", c);
  LoopHolders holders;
  EXPECT_FALSE(holders.holder(a));         // the scan: nothing holds it
  const size_t scanned = holders.known();  // whatever else this host has attached

  std::string device_a;
  UniqueFd loop_a = attach(img_a, "a.img", device_a);
  holders.attached(a, device_a);
  ASSERT_TRUE(holders.holder(a));
  EXPECT_EQ(holders.holder(a)->device, device_a);

  // Attached behind its back (no daemon shares its volumes): not scanned for again.
  std::string device_c;
  UniqueFd loop_c = attach(img_c, "c.img", device_c);
  EXPECT_FALSE(holders.holder(c));

  // a's device frees itself once closed; b may well get the same device next.
  loop_a.reset();
  ASSERT_TRUE(eventually([&] { return !holders.holder(a); })) << device_a << " still held";
  std::string device_b;
  UniqueFd loop_b = attach(img_b, "b.img", device_b);
  EXPECT_FALSE(holders.holder(a)) << "a's old device " << device_a << " holds b now (" << device_b << ")";
  holders.attached(b, device_b);
  ASSERT_TRUE(holders.holder(b));
  EXPECT_EQ(holders.holder(b)->device, device_b);
  EXPECT_EQ(holders.known(), scanned + 1);  // b, and a no longer
}

TEST_F(LoopHoldersTest, TheTableHoldsAboutTheDevicesAttachedNotEveryImageItSaw) {
  LoopHolders holders(/*prune_from=*/4);
  const struct stat nothing {};
  EXPECT_FALSE(holders.holder(nothing));   // the scan, before any of ours
  const size_t scanned = holders.known();  // whatever else this host has attached
  std::string held_device;
  struct stat held {};
  UniqueFd held_img = image("held.img", held);
  UniqueFd held_loop = attach(held_img, "held.img", held_device);
  holders.attached(held, held_device);
  for (int i = 0; i < 12; ++i) {
    const std::string name = "gone" + std::to_string(i) + ".img";
    struct stat st {};
    UniqueFd img = image(name, st);
    std::string device;
    {
      UniqueFd loop = attach(img, name, device);
      holders.attached(st, device);
    }  // freed at once
    ASSERT_TRUE(eventually(
        [&] { return ::access(("/sys/block/" + device.substr(5) + "/loop/backing_file").c_str(), F_OK) != 0; }));
  }
  // Pruned whenever it reached twice what was still attached (at least 4): never all 12 kept.
  EXPECT_LE(holders.known(), std::max<size_t>(4, 2 * (scanned + 1)));
  EXPECT_LT(holders.known(), scanned + 1 + 12);
  ASSERT_TRUE(holders.holder(held));  // what is still attached stays
  EXPECT_EQ(holders.holder(held)->device, held_device);
}

}  // namespace
}  // namespace agentbox
