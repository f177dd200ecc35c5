// The e2fsprogs runner (volumes/e2fsprogs_runner.hpp) on this host (root): the programs it
// starts see none of the mounts below VOLUMES, made before it started or after, where the
// daemon sees them all; an image in VOLUMES is the same file for them; its thread holds none of
// the daemon's descriptors; they run at the priority of the thread that asked (a spare's refill
// at nice 19, a new user's volume at the daemon's).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.hpp"
#include "support/scratch_dir.hpp"
#include "util/file_io.hpp"
#include "util/thread_priority.hpp"
#include "util/unique_fd.hpp"
#include "volumes/e2fsprogs_runner.hpp"

namespace agentbox {
namespace {

using namespace std::chrono_literals;
namespace stdfs = std::filesystem;

using testing::eventually;

class E2fsprogsRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_FAIL() << "this test mounts: run it as root";
    volumes_ = scratch_.path() + "/volumes";
    ASSERT_EQ(::mkdir(volumes_.c_str(), 0711), 0);
    // As open_root makes VOLUMES: a mount of its own, shared.
    ASSERT_EQ(::mount(volumes_.c_str(), volumes_.c_str(), nullptr, MS_BIND, nullptr), 0);
    ASSERT_EQ(::mount(nullptr, volumes_.c_str(), nullptr, MS_SHARED, nullptr), 0);
  }
  void TearDown() override {
    for (const char* name : {"before", "after"}) ::umount2((volumes_ + "/" + name).c_str(), MNT_DETACH);
    ::umount2(volumes_.c_str(), MNT_DETACH);
  }
  void mount_tmpfs(const std::string& name) {
    const std::string dir = volumes_ + "/" + name;
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k"), 0) << dir;
  }

  testing::ScratchDir scratch_{"agentbox-e2fs-runner"};
  std::string volumes_;
};

TEST_F(E2fsprogsRunnerTest, TheProgramsSeeNoVolumeMountedBeforeOrAfterItStarted) {
  mount_tmpfs("before");
  E2fsprogsRunner runner(volumes_);
  mount_tmpfs("after");

  const std::string theirs = runner.mount_table();
  EXPECT_EQ(theirs.find(volumes_ + "/before"), std::string::npos) << theirs;
  EXPECT_EQ(theirs.find(volumes_ + "/after"), std::string::npos) << theirs;
  EXPECT_NE(theirs.find(" / / "), std::string::npos) << "the rest of the host is there:\n" << theirs;
  // The control: the daemon's own table holds both.
  const std::string ours = read_file("/proc/self/mountinfo", 64 << 20);
  EXPECT_NE(ours.find(volumes_ + "/before"), std::string::npos);
  EXPECT_NE(ours.find(volumes_ + "/after"), std::string::npos);

  // An image in VOLUMES is the same file for them: mkfs.ext4 writes the one the daemon reads.
  const std::string image = volumes_ + "/x.img";
  { std::ofstream(image).close(); }
  stdfs::resize_file(image, 8 << 20);
  runner.run_checked({"mkfs.ext4", "-q", "-F", image});
  std::ifstream in(image, std::ios::binary);
  in.seekg(1024 + 0x38);
  unsigned char magic[2] = {};
  in.read(reinterpret_cast<char*>(magic), 2);
  EXPECT_EQ(magic[0] | magic[1] << 8, 0xEF53) << "no ext4 superblock in " << image;
}

// Descriptors in the table of this process's thread named `comm`; -1 when there is none.
int descriptors_of_thread(const std::string& comm) {
  for (const auto& task : stdfs::directory_iterator("/proc/self/task")) {
    auto name = read_file_if_exists(task.path().string() + "/comm", 64);
    if (!name || name->substr(0, name->find('\n')) != comm) continue;
    int n = 0;
    for ([[maybe_unused]] const auto& fd : stdfs::directory_iterator(task.path() / "fd")) ++n;
    return n;
  }
  return -1;
}

// A program started copies the starting thread's descriptor table, which exec then walks: the
// daemon's thousands (5 a box) are not in the runner's.
TEST_F(E2fsprogsRunnerTest, TheThreadHoldsNoneOfTheDaemonsDescriptors) {
  std::vector<UniqueFd> daemons;
  for (int i = 0; i < 200; ++i) daemons.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  E2fsprogsRunner runner(volumes_);
  runner.run_checked({"true"});  // the thread has set itself up by the time it ran a program
  const int theirs = descriptors_of_thread("e2fsprogs");
  EXPECT_GE(theirs, 0) << "no thread named e2fsprogs";
  EXPECT_LE(theirs, 3) << "the runner's table holds more than stdin, stdout and stderr";
  int ours = 0;
  for ([[maybe_unused]] const auto& fd : stdfs::directory_iterator("/proc/self/fd")) ++ours;
  EXPECT_GT(ours, 200);  // the control: the process's own table holds them
}

// The copy holds nothing of anyone else's: a filesystem mounted elsewhere when the runner
// started, then unmounted by its owner, is gone (its superblock not kept alive here).
TEST_F(E2fsprogsRunnerTest, NothingMountedElsewhereIsKeptAliveByTheCopy) {
  const std::string elsewhere = scratch_.path() + "/elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(::mount("tmpfs", elsewhere.c_str(), "tmpfs", 0, "size=64k"), 0);
  struct stat st {};
  ASSERT_EQ(::stat(elsewhere.c_str(), &st), 0);
  const std::string device = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  E2fsprogsRunner runner(volumes_);
  EXPECT_EQ(runner.mount_table().find(" " + device + " "), std::string::npos) << "kept in the programs' namespace";
  ASSERT_EQ(::umount2(elsewhere.c_str(), 0), 0);
}

// The nice value of the running child of ours named `comm`, or -100 while there is none.
int nice_of_child(const std::string& comm) {
  for (const auto& e : stdfs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    auto stat = read_file_if_exists(e.path().string() + "/stat", 4096);
    if (!stat) continue;
    const size_t close = stat->rfind(')');
    if (close == std::string::npos || stat->substr(stat->find('(') + 1, close - stat->find('(') - 1) != comm) continue;
    std::istringstream fields(stat->substr(close + 2));
    std::string f[17];
    for (auto& x : f) fields >> x;  // state ppid ... priority nice: fields 3..19
    if (std::stoi(f[1]) != ::getpid()) continue;
    return std::stoi(f[16]);
  }
  return -100;
}

TEST_F(E2fsprogsRunnerTest, AProgramRunsAtThePriorityOfTheThreadThatAsked) {
  E2fsprogsRunner runner(volumes_);
  // A unique name to find it by: a copy of sleep.
  const std::string sleeper = scratch_.path() + "/e2fs-sleeper";
  stdfs::copy_file("/bin/sleep", sleeper);
  ::chmod(sleeper.c_str(), 0755);
  for (const int nice : {19, 0}) {
    auto finished = std::async(std::launch::async, [&] {
      if (nice == 19) lower_thread_priority();  // as the spares' refill does
      return runner.run({sleeper, "30"});
    });
    int seen = -100;
    EXPECT_TRUE(eventually([&] { return (seen = nice_of_child("e2fs-sleeper")) == nice; }))
        << "asked at nice " << nice << ", runs at " << seen;
    ::system(("pkill -KILL -x e2fs-sleeper -P " + std::to_string(::getpid())).c_str());
    EXPECT_EQ(finished.get().status, 128 + SIGKILL);
  }
}

}  // namespace
}  // namespace agentbox
