// The workspaces' sweep decides from a workspace's record and its profile's keep_days and reset
// (accounts/workspace_sweep.hpp); the records and the listing are files in the volume
// (accounts/workspaces.hpp).
#include "accounts/workspace_sweep.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "accounts/context_id.hpp"
#include "store/box_key.hpp"

namespace agentbox::accounts {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kDay = 86400;
// 2026-12-09 (a Wednesday) 13:45:10 UTC.
constexpr int64_t kWednesday = 1796823910;

TEST(WorkspaceSweep, DailyResetsAtMidnightUtc) {
  EXPECT_EQ(last_reset(kWednesday, 24h), kWednesday - (13 * 3600 + 45 * 60 + 10));
  EXPECT_EQ(last_reset(kWednesday - kWednesday % kDay, 24h), kWednesday - kWednesday % kDay);  // at it: this one
}

TEST(WorkspaceSweep, HourlyResetsOnTheHour) { EXPECT_EQ(last_reset(kWednesday, 1h), kWednesday - (45 * 60 + 10)); }

TEST(WorkspaceSweep, WeeklyResetsOnSundayAsCron) {
  const int64_t sunday = kWednesday - kWednesday % kDay - 3 * kDay;  // 2026-12-06, 00:00 UTC
  EXPECT_EQ(last_reset(kWednesday, 24h * 7), sunday);
  EXPECT_EQ((sunday / kDay + 4) % 7, 0);  // 1970-01-01 was a Thursday (4): this is a Sunday (0)
  EXPECT_EQ(last_reset(sunday - 1, 24h * 7), sunday - 7 * kDay);
}

TEST(WorkspaceSweep, KeepDaysTakesWorkspacesUnusedThatLong) {
  const WorkspaceKeeping keep{.keep_days = 3, .reset = std::nullopt};
  Workspace w{.created = kWednesday - 30 * kDay, .last_used = kWednesday - 3 * kDay};
  EXPECT_TRUE(workspace_due(w, keep, kWednesday));
  w.last_used += 1;  // a second short of it: kept, however old it is
  EXPECT_FALSE(workspace_due(w, keep, kWednesday));
}

TEST(WorkspaceSweep, ResetTakesWorkspacesMadeBeforeTheLastReset) {
  const WorkspaceKeeping daily{.keep_days = std::nullopt, .reset = 24h};
  const int64_t midnight = last_reset(kWednesday, 24h);
  Workspace w{.created = midnight - 1, .last_used = kWednesday};  // used today, made yesterday
  EXPECT_TRUE(workspace_due(w, daily, kWednesday));
  w.created = midnight;  // made since: it stays until the next midnight
  EXPECT_FALSE(workspace_due(w, daily, kWednesday));
  EXPECT_TRUE(workspace_due(w, daily, midnight + kDay));
}

TEST(WorkspaceSweep, NothingSetKeepsEverything) {
  Workspace w{.created = 0, .last_used = 0};
  EXPECT_FALSE(workspace_due(w, {}, kWednesday));
}

class WorkspaceRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-ws-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string make(const std::string& profile, const std::string& context) {
    const std::string dir = workspace_dir(root_, profile, context_hash(context));
    std::filesystem::create_directories(dir);
    return dir;
  }
  std::string root_;
};

TEST_F(WorkspaceRecords, AUseWritesTheRecordThatNamesTheContext) {
  const std::string dir = make("chats", "chat:a");
  note_workspace_use(dir, "chat:a");
  std::vector<Workspace> all = list_workspaces(root_, true);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].profile, "chats");
  EXPECT_EQ(all[0].hash, context_hash("chat:a"));
  EXPECT_EQ(all[0].context, "chat:a");
  EXPECT_GT(all[0].created, 0);
  EXPECT_EQ(all[0].size, 0u);
  std::ofstream(dir + "/f") << "12345";
  EXPECT_EQ(list_workspaces(root_, true)[0].size, 5u);
}

TEST_F(WorkspaceRecords, AnotherUseMovesTheLastUseOnly) {
  const std::string dir = make("chats", "chat:a");
  note_workspace_use(dir, "chat:a");
  const timespec old[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir + ".json").c_str(), old, 0), 0);
  ASSERT_EQ(list_workspaces(root_, false)[0].last_used, 1000);
  const int64_t created = list_workspaces(root_, false)[0].created;
  note_workspace_use(dir, "chat:a");
  EXPECT_GT(list_workspaces(root_, false)[0].last_used, 1000);
  EXPECT_EQ(list_workspaces(root_, false)[0].created, created);
}

TEST_F(WorkspaceRecords, AWorkspaceWithoutARecordIsListedByItsHash) {
  make("chats", "chat:old");
  std::filesystem::create_directories(root_ + "/workspaces/chats/not-a-hash");  // not a workspace
  std::vector<Workspace> all = list_workspaces(root_, false);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].context, "");
  EXPECT_GT(all[0].last_used, 0);  // the directory's mtime
}

TEST_F(WorkspaceRecords, FindByIdOrHashInOneProfileOrAny) {
  note_workspace_use(make("chats", "chat:a"), "chat:a");
  note_workspace_use(make("build", "chat:a"), "chat:a");
  note_workspace_use(make("chats", "chat:b"), "chat:b");
  const std::vector<Workspace> all = list_workspaces(root_, false);
  EXPECT_EQ(find_workspaces(all, "chat:a", "").size(), 2u);
  ASSERT_EQ(find_workspaces(all, "chat:a", "build").size(), 1u);
  EXPECT_EQ(find_workspaces(all, "chat:a", "build")[0].profile, "build");
  EXPECT_EQ(find_workspaces(all, context_hash("chat:b"), "").size(), 1u);
  EXPECT_TRUE(find_workspaces(all, "chat:c", "").empty());
}

TEST(ContextIdProblem, SaysWhatIsWrongWithAContextNamedInAPath) {
  EXPECT_EQ(context_id_problem("chat:abc"), "");
  EXPECT_EQ(context_id_problem("default"), "");
  EXPECT_NE(context_id_problem("chat:"), "");
  EXPECT_NE(context_id_problem("session:1"), "");
  EXPECT_NE(context_id_problem("chat:a\nb"), "");
}

}  // namespace
}  // namespace agentbox::accounts
