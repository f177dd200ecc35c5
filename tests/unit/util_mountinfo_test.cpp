// parse_mountinfo (util/mountinfo.hpp): the first five fields of each line, paths unescaped as
// the kernel escapes them; a line too short to hold them is skipped.
#include <gtest/gtest.h>

#include "util/mountinfo.hpp"

namespace agentbox {
namespace {

TEST(MountInfo, TheFirstFiveFieldsOfEachLineWithTheirPathsUnescaped) {
  const std::string text =
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
      "3050 27 7:12 /home\\040dir /srv/volumes/a\\134b\\011c rw - ext4 /dev/loop12 rw\n"
      "short line\n"
      "31 27 0:5 / /dev\\04 rw - devtmpfs udev rw\n";
  const std::vector<MountInfoEntry> entries = parse_mountinfo(text);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].id, "27");
  EXPECT_EQ(entries[0].parent, "1");
  EXPECT_EQ(entries[0].device, "254:0");
  EXPECT_EQ(entries[0].point, "/");
  EXPECT_EQ(entries[1].device, "7:12");
  EXPECT_EQ(entries[1].root, "/home dir");
  EXPECT_EQ(entries[1].point, "/srv/volumes/a\\b\tc");
  EXPECT_EQ(entries[2].point, "/dev\\04");  // not three octal digits: as written
}

}  // namespace
}  // namespace agentbox
