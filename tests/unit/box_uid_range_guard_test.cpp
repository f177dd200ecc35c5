// The uid range guard: subuid parsing, overlap, messages, and the lock between daemons (in a
// scratch directory; flock conflicts between two descriptors of one process as between two
// processes).
#include "box/uid_range_guard.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;

TEST(UidRangeGuard, OverlapIsInclusiveOfBothEnds) {
  IdSpan range{1000, 10};  // 1000-1009
  EXPECT_TRUE(overlaps(range, {1009, 1}));
  EXPECT_TRUE(overlaps(range, {990, 11}));
  EXPECT_TRUE(overlaps(range, {1003, 2}));
  EXPECT_TRUE(overlaps(range, {0, 100000}));
  EXPECT_FALSE(overlaps(range, {1010, 5}));
  EXPECT_FALSE(overlaps(range, {990, 10}));
  EXPECT_FALSE(overlaps(range, {1005, 0}));
}

TEST(UidRangeGuard, SpanTextRoundTripsAndRejectsOtherNames) {
  EXPECT_EQ(span_text({1000000, 65536}), "1000000-1065535");
  std::optional<IdSpan> back = parse_span_text("1000000-1065535");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->first, 1000000u);
  EXPECT_EQ(back->count, 65536u);
  for (const char* other : {".lock", "1000000", "5-4", "a-b", "1-2x", "-5", "1--2", ""})
    EXPECT_FALSE(parse_span_text(other)) << other;
}

TEST(UidRangeGuard, SubidTextSkipsCommentsBlankAndMalformedLines) {
  std::vector<SubidEntry> e = parse_subid_text(
      "# comment\n\nalice:100000:65536\n  1001:165536:65536  \r\nbad line\n:1:2\nbob:x:5\ncarol:5:0\n"
      "dave:300000:10\nerin:1:2:3\nlast:400000:1");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].line, "alice:100000:65536");
  EXPECT_EQ(e[0].span.first, 100000u);
  EXPECT_EQ(e[0].span.count, 65536u);
  EXPECT_EQ(e[1].line, "1001:165536:65536");  // numeric names count
  EXPECT_EQ(e[2].line, "dave:300000:10");
  EXPECT_EQ(e[3].line, "last:400000:1");  // no final newline
  EXPECT_TRUE(parse_subid_text("").empty());
}

TEST(UidRangeGuard, SubidOverlapNamesTheEntryAsWritten) {
  auto entries = parse_subid_text("alice:100000:65536\nbob:165536:65536\n");
  EXPECT_EQ(subid_overlap({170000, 10}, entries, "/etc/subuid"), "/etc/subuid entry \"bob:165536:65536\"");
  EXPECT_EQ(subid_overlap({231072, 10}, entries, "/etc/subuid"), std::nullopt);    // just past bob's last
  EXPECT_EQ(subid_overlap({90000, 10000}, entries, "/etc/subuid"), std::nullopt);  // just before alice
  EXPECT_EQ(uid_range_refusal({165535, 2}, *subid_overlap({165535, 2}, entries, "/etc/subuid")),
            "uid range 165535-165536 overlaps /etc/subuid entry \"alice:100000:65536\"; pick another "
            "[accounts] uid_base");
}

TEST(UidRangeGuard, HostIdOverlapNamesKindNameAndId) {
  std::vector<HostId> ids = {{"passwd", "root", 0}, {"group", "nogroup", 65534}, {"passwd", "nobody", 65534}};
  EXPECT_EQ(host_id_overlap({60000, 10000}, ids), "group entry \"nogroup\" (gid 65534)");
  EXPECT_EQ(host_id_overlap({65534, 1}, {ids[2]}), "passwd entry \"nobody\" (uid 65534)");
  EXPECT_EQ(host_id_overlap({65535, 100}, ids), std::nullopt);
}

// The host of these tests is Debian: nobody is uid 65534 and nogroup gid 65534.
TEST(UidRangeGuard, HostAccountsComeFromTheNameService) {
  std::vector<HostId> ids = host_ids_in({65000, 1000});
  EXPECT_THAT(host_id_overlap({65534, 1}, ids), ::testing::Optional(HasSubstr("(uid 65534)")));
  EXPECT_TRUE(host_ids_in({3000000000u, 10}).empty());
}

TEST(UidRangeGuard, HostConflictReadsSubidFilesAndToleratesMissingOnes) {
  testing::ScratchDir dir("agentbox-uid-guard");
  std::string subuid = dir.path() + "/subuid", subgid = dir.path() + "/subgid";
  IdSpan free_range{3000000000u, 65536};
  EXPECT_EQ(host_uid_range_conflict(free_range, subuid, subgid), std::nullopt);  // neither file exists
  std::ofstream(subgid) << "# x\nops:3000065535:5\n";
  EXPECT_EQ(host_uid_range_conflict(free_range, subuid, subgid),
            "uid range 3000000000-3000065535 overlaps " + subgid +
                " entry \"ops:3000065535:5\"; pick another [accounts] uid_base");
  std::ofstream(subuid) << "alice:2999999999:1\n";
  EXPECT_THAT(host_uid_range_conflict(free_range, subuid, subgid), ::testing::Optional(HasSubstr(subgid)));
  std::ofstream(subuid) << "alice:2999999999:2\n";
  EXPECT_THAT(host_uid_range_conflict(free_range, subuid, subgid),
              ::testing::Optional(HasSubstr(subuid + " entry \"alice:2999999999:2\"")));
}

class UidRangeLockTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-uid-lock"};
  std::string dir_ = scratch_.path() + "/run/uid-ranges";  // made by acquire, parent too
};

TEST_F(UidRangeLockTest, AnOverlappingRangeIsRefusedNamingTheHolder) {
  UidRangeLock first = UidRangeLock::acquire({1000, 100}, "/srv/one", dir_);
  try {
    UidRangeLock::acquire({1099, 5}, "/srv/two", dir_);
    FAIL() << "no refusal";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "uid range 1099-1103 overlaps that of another agentbox serve (pid " + std::to_string(::getpid()) +
                  ", state dir /srv/one, uids 1000-1099); pick another [accounts] uid_base or stop that daemon");
  }
  UidRangeLock beside = UidRangeLock::acquire({1100, 5}, "/srv/two", dir_);  // control: adjacent
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/1100-1104"));
}

TEST_F(UidRangeLockTest, ReleasedOnDestructionAndAStaleFileIsRemoved) {
  { UidRangeLock first = UidRangeLock::acquire({1000, 100}, "/srv/one", dir_); }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/1000-1099"));
  // A daemon killed with SIGKILL leaves its file, unlocked.
  std::ofstream(dir_ + "/1050-1059") << "pid 1\nstate /gone\n";
  std::ofstream(dir_ + "/notes") << "not a range file\n";
  UidRangeLock again = UidRangeLock::acquire({1000, 100}, "/srv/one", dir_);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/1050-1059"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/notes"));
}

TEST_F(UidRangeLockTest, OfConcurrentStartsOnOneRangeExactlyOneWins) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> won{0}, refused{0};
    std::vector<std::optional<UidRangeLock>> held(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] {
        try {
          held[i].emplace(UidRangeLock::acquire({5000 + static_cast<uint64_t>(i), 10}, "/srv", dir_));
          ++won;
        } catch (const UsageError&) {
          ++refused;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(won.load(), 1);
    EXPECT_EQ(refused.load(), 3);
  }
}

}  // namespace
}  // namespace agentbox
