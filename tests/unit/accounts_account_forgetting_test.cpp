// Which accounts' volumes the forgetting looks at (accounts/account_forgetting.hpp), and what
// counts as an empty volume (volumes/account_volumes.hpp volume_empty).
#include "accounts/account_forgetting.hpp"

#include <gtest/gtest.h>

namespace agentbox::accounts {
namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kNow = 1796823910;

Account account(std::string name, int64_t last_seen) {
  Account a;
  a.name = std::move(name);
  a.last_seen = last_seen;
  return a;
}

TEST(AccountForgetting, StaleOnlyOnceTheFullNumberOfDaysHasPassed) {
  EXPECT_FALSE(stale_account(kNow - kDay + 1, kNow, 1));
  EXPECT_TRUE(stale_account(kNow - kDay, kNow, 1));
  EXPECT_TRUE(stale_account(kNow - 90 * kDay, kNow, 90));
  EXPECT_FALSE(stale_account(kNow - 89 * kDay - 1, kNow, 90));
}

TEST(AccountForgetting, ZeroDaysForgetsNothingHoweverOld) {
  EXPECT_FALSE(stale_account(0, kNow, 0));
  EXPECT_TRUE(forget_candidates({account("old", 0)}, kNow, 0, {}).empty());
}

TEST(AccountForgetting, SeenInTheFutureIsNotStale) {
  // A clock set back (or a test's clock reset) must not make everyone stale.
  EXPECT_FALSE(stale_account(kNow + kDay, kNow, 1));
}

TEST(AccountForgetting, CandidatesAreTheStaleOnesWithNoBox) {
  const std::vector<Account> all = {account("fresh", kNow - 3600), account("old", kNow - 3 * kDay),
                                    account("old-busy", kNow - 3 * kDay), account("older", kNow - 400 * kDay)};
  EXPECT_EQ(forget_candidates(all, kNow, 2, {"old-busy"}), (std::vector<std::string>{"old", "older"}));
  EXPECT_EQ(forget_candidates(all, kNow, 30, {}), (std::vector<std::string>{"older"}));
  EXPECT_TRUE(forget_candidates(all, kNow, 500, {}).empty());
}

TEST(AccountForgetting, AVolumeIsEmptyWithNoMoreInodesThanANewOnesSkeleton) {
  VolumeUsage u;
  u.inodes_limit = 4000;
  u.inodes_used = kEmptyVolumeInodes;  // ext4's 11, then home, trash, daemon, daemon/logs
  EXPECT_TRUE(volume_empty(u));
  u.inodes_used = kEmptyVolumeInodes + 1;  // one file anywhere: a home entry, a trash item, a log
  EXPECT_FALSE(volume_empty(u));
  EXPECT_TRUE(volume_empty(VolumeUsage{})) << "no image (never made, or forgotten): nothing in it";
}

}  // namespace
}  // namespace agentbox::accounts
