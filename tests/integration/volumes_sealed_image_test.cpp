// SealedImage on this host (root, loop devices, mkfs.ext4, debugfs): a file or a directory
// sealed into a read-only image of its own, whose mount names only paths inside the image (the
// mountinfo root field a box's bind from it shows), made once per content and shared, an old
// content's image removed once nobody holds it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "util/error.hpp"
#include "util/loop_image_probe.hpp"
#include "volumes/sealed_image.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// This process's mountinfo line whose mount point is `point`, or "" (the last one: what is seen).
std::string mountinfo_line(const std::string& point) {
  std::istringstream in(slurp("/proc/self/mountinfo"));
  std::string found;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    fields >> id >> parent >> dev >> root >> mount_point;
    if (mount_point == point) found = line;
  }
  return found;
}

class SealedImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!loop_images_supported(&why)) GTEST_SKIP() << why;
    char tmpl[] = "/tmp/abx-sealed-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    stdfs::create_directories(base_ + "/host/install/bin");
    std::ofstream(base_ + "/host/install/bin/tool") << "#!/bin/sh\necho sealed tool\n";
    ::chmod((base_ + "/host/install/bin/tool").c_str(), 0755);
    stdfs::create_directories(base_ + "/host/skills/demo");
    std::ofstream(base_ + "/host/skills/demo/SKILL.md") << "# demo\n";
    ::symlink("demo/SKILL.md", (base_ + "/host/skills/link").c_str());
  }
  void TearDown() override {
    if (base_.empty()) return;
    for (const char* point : {"/state/agent/tool", "/state/agent/skills"})
      while (::umount2((base_ + point).c_str(), MNT_DETACH) == 0) {
      }
    stdfs::remove_all(base_);
  }
  std::string cache() const { return base_ + "/cache"; }
  std::string point(const char* name) const { return base_ + "/state/agent/" + name; }

  std::string base_;
};

TEST_F(SealedImageTest, AFileIsSealedReadOnlyAndItsMountNamesNoHostPath) {
  const std::string source = base_ + "/host/install/bin/tool";
  SealedImage image(source, "tool", cache(), point("tool"));
  EXPECT_TRUE(image.built());
  EXPECT_EQ(image.path(), point("tool") + "/tool");
  EXPECT_EQ(slurp(image.path()), slurp(source));
  struct stat st {};
  ASSERT_EQ(::stat(image.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, 0u);
  // Read-only, whatever the file's mode says.
  EXPECT_LT(::open(image.path().c_str(), O_WRONLY | O_CLOEXEC), 0);
  EXPECT_EQ(errno, EROFS);
  // The mount's root is the image's own root on a loop device: nothing of where the file lies.
  const std::string line = mountinfo_line(point("tool"));
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.find(base_ + "/host"), std::string::npos) << line;
  EXPECT_NE(line.find(" / " + point("tool") + " ro,"), std::string::npos) << line;
  EXPECT_NE(line.find("/dev/loop"), std::string::npos) << line;
}

TEST_F(SealedImageTest, ADirectoryIsTheImagesRootWithItsLinksAsLinks) {
  SealedImage image(base_ + "/host/skills", "skills", cache(), point("skills"));
  EXPECT_EQ(image.path(), point("skills"));
  EXPECT_EQ(slurp(image.path() + "/demo/SKILL.md"), "# demo\n");
  EXPECT_EQ(stdfs::read_symlink(image.path() + "/link"), "demo/SKILL.md");
}

// One image per content, shared: the next daemon (or start) reuses it; a changed source makes a
// new one, and the old is removed once nobody holds it, never while someone does.
TEST_F(SealedImageTest, AnImageIsMadeOncePerContentAndAnOldOneGoesWhenNobodyHoldsIt) {
  const std::string source = base_ + "/host/install/bin/tool";
  std::optional<SealedImage> first(std::in_place, source, "tool", cache(), point("tool"));
  const std::string old_image = first->image();
  {
    SealedImage again(source, "tool", cache(), point("tool"));  // over the first's mount
    EXPECT_FALSE(again.built());
    EXPECT_EQ(again.image(), old_image);
  }
  std::ofstream(source, std::ios::app) << "echo upgraded\n";
  {
    // The first still holds the old image: a new one is made beside it, the old one stays.
    SealedImage upgraded(source, "tool", cache(), point("tool"));
    EXPECT_TRUE(upgraded.built());
    EXPECT_NE(upgraded.image(), old_image);
    EXPECT_NE(slurp(upgraded.path()).find("upgraded"), std::string::npos);
    EXPECT_TRUE(stdfs::exists(old_image));
  }
  first.reset();  // nobody holds the old image now
  SealedImage again(source, "tool", cache(), point("tool"));
  EXPECT_FALSE(again.built());
  std::ofstream(source, std::ios::app) << "echo once more\n";
  SealedImage newest(source, "tool", cache(), point("tool"));
  EXPECT_TRUE(newest.built());
  EXPECT_FALSE(stdfs::exists(old_image)) << "an image nobody held was kept";
  EXPECT_TRUE(stdfs::exists(again.image())) << "an image in use was removed";
}

TEST_F(SealedImageTest, ASourceThatIsNeitherFileNorDirectoryIsRefused) {
  EXPECT_THROW(SealedImage(base_ + "/host/missing", "x", cache(), point("tool")), Error);
  EXPECT_THROW(SealedImage("/dev/null", "x", cache(), point("tool")), Error);
}

}  // namespace
}  // namespace agentbox
