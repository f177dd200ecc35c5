// daemon/mcp_instance_dir: an ordinary user's `agentbox mcp` keeps its state in a directory of
// its own run, removed when it goes; a run that died without removing it (its lock free) loses
// it at the next start, and a run still alive (its lock held) keeps it.
#include "daemon/mcp_instance_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace agentbox::daemon {
namespace {

namespace fs = std::filesystem;

struct TempRoot {
  TempRoot() {
    char tmpl[] = "/tmp/mcp-instance-XXXXXX";
    path = ::mkdtemp(tmpl);
    root = path + "/agentbox/mcp";
  }
  ~TempRoot() { fs::remove_all(path); }
  std::set<std::string> entries() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(root)) out.insert(e.path().filename().string());
    return out;
  }
  std::string path, root;
};

// A run that ended without cleaning up: its directory, with a file, and its lock file, unheld.
void leave_a_dead_run(const std::string& root, const std::string& name) {
  fs::create_directories(root + "/" + name + "/volumes");
  std::ofstream(root + "/" + name + "/state.db") << "x";
  std::ofstream(root + "/" + name + ".lock");
}

TEST(McpInstanceDir, ItsDirectoryIsMadeAndGoesWithIt) {
  TempRoot t;
  const std::string me = std::to_string(::getpid());
  {
    McpInstanceDir dir(t.root);
    EXPECT_EQ(dir.path(), t.root + "/" + me);
    EXPECT_TRUE(fs::is_directory(dir.path()));
    std::ofstream(dir.path() + "/state.db") << "x";
    EXPECT_EQ(t.entries(), (std::set<std::string>{me, me + ".lock"}));
    EXPECT_EQ(fs::status(t.root).permissions() & fs::perms::all, fs::perms::owner_all);
  }
  EXPECT_TRUE(t.entries().empty());
}

TEST(McpInstanceDir, ADeadRunsStateIsRemovedAndALiveRunsKept) {
  TempRoot t;
  leave_a_dead_run(t.root, "999999991");
  leave_a_dead_run(t.root, "999999992");
  // The control: a run alive, whose lock is held (by another open file description).
  int held = ::open((t.root + "/999999992.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  {
    McpInstanceDir dir(t.root);
    const std::string me = std::to_string(::getpid());
    EXPECT_EQ(t.entries(), (std::set<std::string>{"999999992", "999999992.lock", me, me + ".lock"}));
  }
  EXPECT_EQ(t.entries(), (std::set<std::string>{"999999992", "999999992.lock"}));
  ::close(held);
}

}  // namespace
}  // namespace agentbox::daemon
