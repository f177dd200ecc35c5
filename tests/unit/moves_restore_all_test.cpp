// `backup restore --all` (moves/restore_all.hpp): which mirrored accounts a node restores and
// why it skips the others.
#include <gtest/gtest.h>

#include "moves/restore_all.hpp"

namespace agentbox::moves {
namespace {

backup::MirroredAccount mirrored(std::string dir = "alice-3f2a9c") {
  backup::MirroredAccount m;
  m.dir = dir;
  m.record = backup::MirrorRecord{"alice@example.org", dir, 2000001, 1};
  m.has_home = true;
  return m;
}

TEST(RestorePlan, AnAccountThisNodeDoesNotHoldIsRestored) {
  EXPECT_EQ(moves::plan_restore(mirrored(), {}).action, moves::RestoreStep::restore);
}

TEST(RestorePlan, HeldDeletedAndRefusedAccountsAreSkippedWithTheReason) {
  moves::RestoreStep held = moves::plan_restore(mirrored(), {.held = true});
  EXPECT_EQ(held.action, moves::RestoreStep::skip);
  EXPECT_EQ(held.reason, "held by this node already");

  backup::MirroredAccount gone = mirrored();
  gone.has_home = false;
  gone.deleted_on = "2026-01-02";
  moves::RestoreStep deleted = moves::plan_restore(gone, {});
  EXPECT_EQ(deleted.action, moves::RestoreStep::skip);
  EXPECT_EQ(deleted.reason, "deleted on 2026-01-02 (its home is kept in .deleted until purged)");
  gone.deleted_on.clear();
  EXPECT_EQ(moves::plan_restore(gone, {}).reason, "no home in the mirror");

  moves::RestoreStep elsewhere = moves::plan_restore(mirrored(), {.refused = "belongs to node n1 (pinned there)"});
  EXPECT_EQ(elsewhere.action, moves::RestoreStep::skip);
  EXPECT_EQ(elsewhere.reason, "belongs to node n1 (pinned there)");
}

TEST(RestorePlan, AnInterruptedRestoreIsFinishedThoughTheAccountIsHeldNow) {
  // Its marker says this node made the account itself, for this restore.
  EXPECT_EQ(moves::plan_restore(mirrored(), {.held = true, .resuming = true}).action, moves::RestoreStep::restore);
}

TEST(RestorePlan, AHomeWithoutAReadableRecordOrWithAnotherNameFails) {
  backup::MirroredAccount old = mirrored();
  old.record.reset();
  EXPECT_EQ(moves::plan_restore(old, {}).action, moves::RestoreStep::fail);
  backup::MirroredAccount other = mirrored();
  other.record->name = "bob-123456";
  moves::RestoreStep step = moves::plan_restore(other, {});
  EXPECT_EQ(step.action, moves::RestoreStep::fail);
  EXPECT_EQ(step.reason, "its account.json names another account (bob-123456)");
}

}  // namespace
}  // namespace agentbox::moves
