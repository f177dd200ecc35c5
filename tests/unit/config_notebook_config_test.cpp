// The [notebooks] keys and [files] preview_timeout: defaults, values read from a file, and the
// values refused with a sentence naming the key.
#include "config/notebook_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "config/server_config.hpp"
#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;

class NotebookConfigTest : public ::testing::Test {
 protected:
  ServerConfig load(const std::string& toml) {
    std::string path = scratch_.path() + "/config.toml";
    std::ofstream(path) << toml;
    return load_server_config(path, [](const char*) -> const char* { return nullptr; });
  }
  testing::ScratchDir scratch_{"agentbox-notebook-config"};
};

TEST_F(NotebookConfigTest, DefaultsWithoutAFile) {
  ServerConfig c = load_server_config(std::nullopt, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(c.notebooks.per_account, 4u);
  EXPECT_EQ(c.notebooks.idle_timeout, std::chrono::seconds(3600));
  EXPECT_EQ(c.notebooks.cell_timeout, std::chrono::seconds(300));
  EXPECT_EQ(c.notebooks.preview_timeout, std::chrono::seconds(60));
}

TEST_F(NotebookConfigTest, ReadsEveryKey) {
  ServerConfig c = load(
      "[notebooks]\nper_account = 2\nidle_timeout = 6\ncell_timeout = 3\n"
      "[files]\npreview_timeout = 1\n");
  EXPECT_EQ(c.notebooks.per_account, 2u);
  EXPECT_EQ(c.notebooks.idle_timeout, std::chrono::seconds(6));
  EXPECT_EQ(c.notebooks.cell_timeout, std::chrono::seconds(3));
  EXPECT_EQ(c.notebooks.preview_timeout, std::chrono::seconds(1));
}

TEST_F(NotebookConfigTest, RefusesBadValuesAndUnknownKeys) {
  for (const char* bad :
       {"[notebooks]\nper_account = 0\n", "[notebooks]\ncell_timeout = 0\n", "[notebooks]\nidle_timeout = \"soon\"\n",
        "[files]\npreview_timeout = -1\n", "[notebooks]\nkernels = 3\n"}) {
    try {
      load(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_TRUE(what.find("notebooks.") != std::string::npos || what.find("files.") != std::string::npos)
          << bad << " -> " << what;
    }
  }
}

}  // namespace
}  // namespace agentbox
