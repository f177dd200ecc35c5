// The whole-file helpers that config, procfs and cgroupfs readers share.
#include "util/file_io.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

class FileIoTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-file-io"};
  const std::string dir_ = scratch_.path();
};

TEST_F(FileIoTest, AnOptionalFileThatIsMissingIsNulloptAndOneThatExistsIsReadUpToMax) {
  EXPECT_FALSE(read_file_if_exists(dir_ + "/missing"));
  std::ofstream(dir_ + "/present") << "0123456789";
  EXPECT_EQ(read_file_if_exists(dir_ + "/present").value_or("?"), "0123456789");
  EXPECT_EQ(read_file_if_exists(dir_ + "/present", 4).value_or("?"), "0123");
  // An empty file exists: it is "", not missing.
  std::ofstream(dir_ + "/empty").flush();
  EXPECT_EQ(read_file_if_exists(dir_ + "/empty").value_or("?"), "");
}

TEST_F(FileIoTest, AnOptionalFileThatCannotBeReadIsStillAnError) {
  // Only "does not exist" is quiet: a directory in its place, or a parent that is a file, is a
  // mistake the caller must hear about.
  std::filesystem::create_directories(dir_ + "/dir");
  EXPECT_THROW(read_file_if_exists(dir_ + "/dir"), Error);
  std::ofstream(dir_ + "/file") << "x";
  try {
    read_file_if_exists(dir_ + "/file/below");
    ADD_FAILURE() << "a path below a regular file was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ENOTDIR);
  }
}

}  // namespace
}  // namespace agentbox
