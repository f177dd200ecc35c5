// Users being restored from the mirror (accounts/restore_gate.hpp): refused with 503 from begin()
// to end() (by the admission, accounts/admission.hpp), also by a gate made again on the same
// directory (the daemon restarted mid-restore).
#include "accounts/restore_gate.hpp"

#include "accounts/admission.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "box/box_error.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox::accounts {
namespace {

TEST(RestoreGate, AUserBeingRestoredIsRefusedUntilTheEndAlsoAfterARestart) {
  testing::ScratchDir scratch("restore-gate");
  const std::string dir = scratch.path() + "/restoring";
  {
    accounts::RestoreGate gate(dir);
    const accounts::Admission admission({.restoring = &gate});
    EXPECT_NO_THROW(admission.check("alice@example.org", nullptr));
    gate.begin("alice-3f2a9c", "alice@example.org");
    EXPECT_TRUE(gate.restoring("alice@example.org"));
    EXPECT_FALSE(gate.restoring("bob"));
    try {
      admission.check("alice@example.org", nullptr);
      FAIL() << "not refused";
    } catch (const BoxUnavailable& e) {
      EXPECT_STREQ(e.what(), "user alice@example.org is being restored from the backup; retry shortly");
      EXPECT_EQ(e.retry_after(), 5);
    }
    EXPECT_NO_THROW(admission.check("bob", nullptr));
  }
  accounts::RestoreGate restarted(dir);  // the marker outlives the daemon
  const accounts::Admission admission({.restoring = &restarted});
  EXPECT_THROW(admission.check("alice@example.org", nullptr), BoxUnavailable);
  EXPECT_EQ(restarted.pending(), (std::map<std::string, std::string>{{"alice-3f2a9c", "alice@example.org"}}));
  restarted.end("alice-3f2a9c");
  EXPECT_NO_THROW(admission.check("alice@example.org", nullptr));
  EXPECT_TRUE(restarted.pending().empty());
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  EXPECT_TRUE(accounts::RestoreGate(dir).pending().empty());
}

}  // namespace
}  // namespace agentbox::accounts
