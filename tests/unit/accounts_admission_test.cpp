// Whether a node may serve a user (accounts/admission.hpp): decide() as a table, one answer per
// case with its status, detail and Retry-After, the first case that applies winning; then the
// Admission gathering those facts from the real sources (restore markers, the moves tables, the
// cluster file, the deleted names) and throwing the refusal as the API answers it.
#include "accounts/admission.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>

#include "accounts/move_gate.hpp"
#include "accounts/placement_guard.hpp"
#include "accounts/restore_gate.hpp"
#include "box/box_error.hpp"
#include "http/error.hpp"
#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox::accounts {
namespace {

using boost::beast::http::status;
using Move = AdmissionFacts::Move;

struct Case {
  const char* what;
  AdmissionFacts facts;
  std::optional<status> answer;  // nullopt: served
  std::string detail;
  int retry_after = 0;
};

AdmissionFacts moving() { return {.move = Move::moving, .move_node = "n3"}; }
AdmissionFacts moved() { return {.move = Move::moved, .move_node = "n3", .move_server = "127.0.0.1:8103"}; }
AdmissionFacts elsewhere() { return {.held = false, .owner_node = "n2", .owner_server = "127.0.0.1:8102"}; }

TEST(AdmissionDecide, EachCaseHasOneAnswer) {
  const std::string restoring = "user alice is being restored from the backup; retry shortly";
  const std::string being_moved = "user alice is being moved to n3; retry shortly";
  const std::string moved_away = "user alice moved to node n3 (127.0.0.1:8103)";
  const std::string owned_elsewhere = "user alice belongs to node n2 (127.0.0.1:8102)";
  const std::string deleted = "This account is being deleted by the operator; try again shortly";
  const Case cases[] = {
      {"a user held here", {}, std::nullopt, ""},
      {"a new user this node owns", {.held = false}, std::nullopt, ""},
      {"being restored", {.restoring = true}, status::service_unavailable, restoring, 5},
      {"being moved away (or arriving)", moving(), status::service_unavailable, being_moved, 5},
      {"moved away: the tombstone", moved(), status::misdirected_request, moved_away},
      {"not held, another node owns them", elsewhere(), status::misdirected_request, owned_elsewhere},
      {"held, though the ring names another node (pinned here, moved in)",
       {.held = true, .owner_node = "n2", .owner_server = "127.0.0.1:8102"},
       std::nullopt,
       ""},
      {"its account being deleted", {.deleted = true}, status::conflict, deleted},
      // The first case that applies answers.
      {"restored and moved",
       {.restoring = true, .move = Move::moved, .move_node = "n3"},
       status::service_unavailable,
       restoring,
       5},
      {"being moved and deleted (its source deletes it)",
       {.move = Move::moving, .move_node = "n3", .deleted = true},
       status::service_unavailable,
       being_moved,
       5},
      {"moved away, and another node owns them now",
       {.move = Move::moved,
        .move_node = "n3",
        .move_server = "127.0.0.1:8103",
        .held = false,
        .owner_node = "n2",
        .owner_server = "127.0.0.1:8102"},
       status::misdirected_request,
       moved_away},
      {"restored, and another node owns them",
       {.restoring = true, .held = false, .owner_node = "n2"},
       status::service_unavailable,
       restoring,
       5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::optional<Refusal> r = decide("alice", c.facts);
    ASSERT_EQ(r.has_value(), c.answer.has_value());
    if (!r) continue;
    EXPECT_EQ(r->status, *c.answer);
    EXPECT_EQ(r->detail, c.detail);
    EXPECT_EQ(r->retry_after, c.retry_after);
  }
}

// What the API answers comes from the exception's type: 503 with Retry-After travels as
// BoxUnavailable, the rest as HttpError with the status.
TEST(AdmissionDecide, ARefusalIsThrownAsTheApiAnswersIt) {
  try {
    refuse({status::service_unavailable, "wait", 5});
    FAIL();
  } catch (const BoxUnavailable& e) {
    EXPECT_STREQ(e.what(), "wait");
    EXPECT_EQ(e.retry_after(), 5);
  }
  for (status s : {status::misdirected_request, status::conflict}) {
    try {
      refuse({s, "no"});
      FAIL();
    } catch (const http::HttpError& e) {
      EXPECT_EQ(e.status(), s);
      EXPECT_EQ(e.detail(), "no");
    }
  }
}

// The facts as a daemon on cluster node n1 gathers them.
class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(scratch_.path() + "/cluster.toml") << "[[node]]\nname = \"n1\"\nserver = \"127.0.0.1:8101\"\n"
                                                        "[[node]]\nname = \"n2\"\nserver = \"127.0.0.1:8102\"\n";
    std::ofstream(scratch_.path() + "/pins.toml") << "\"mine\" = \"n1\"\n\"theirs\" = \"n2\"\n"
                                                     "\"leaving\" = \"n1\"\n\"gone\" = \"n1\"\n\"back\" = \"n1\"\n";
    placement_.emplace(scratch_.path() + "/cluster.toml", "n1");
    moves_.insert_out({"m1", "leaving", "leaving-1", "n2", "127.0.0.1:8102", "moving", 100});
    moves_.insert_out({"m2", "gone", "gone-1", "n2", "127.0.0.1:8102", "moved", 100});
    gate_.emplace(moves_, "n1");
    restoring_.begin("back-1", "back");
  }

  static Account account(const std::string& user, const std::string& name) {
    Account a;
    a.external_id = user;
    a.name = name;
    return a;
  }
  // The status a check answers, or nullopt when the user is served.
  std::optional<status> answer(const Admission& admission, const std::string& user, const Account* held) {
    try {
      admission.check(user, held);
      return std::nullopt;
    } catch (const BoxUnavailable& e) {
      EXPECT_EQ(e.retry_after(), 5) << user;
      return status::service_unavailable;
    } catch (const http::HttpError& e) {
      return e.status();
    }
  }

  testing::ScratchDir scratch_{"agentbox-admission"};
  MoveStore moves_{open_state_db(scratch_.path())};
  std::optional<PlacementGuard> placement_;
  std::optional<MoveGate> gate_;
  RestoreGate restoring_{scratch_.path() + "/restoring"};
};

TEST_F(AdmissionTest, TheFactsComeFromTheGatesTheGuardAndTheDeletedNames) {
  Admission admission({.restoring = &restoring_, .moves = &*gate_, .placement = &*placement_});
  const Account mine = account("mine", "mine-1");
  EXPECT_EQ(answer(admission, "mine", &mine), std::nullopt);
  EXPECT_EQ(answer(admission, "mine", nullptr), std::nullopt) << "a new user this node owns";
  EXPECT_EQ(answer(admission, "theirs", nullptr), status::misdirected_request);
  const Account theirs = account("theirs", "theirs-1");
  EXPECT_EQ(answer(admission, "theirs", &theirs), std::nullopt) << "held here: served";
  EXPECT_EQ(answer(admission, "leaving", nullptr), status::service_unavailable);
  EXPECT_EQ(answer(admission, "gone", nullptr), status::misdirected_request);
  EXPECT_EQ(answer(admission, "back", nullptr), status::service_unavailable);

  admission.begin_delete("mine-1");
  EXPECT_TRUE(admission.deleted("mine-1"));
  EXPECT_EQ(answer(admission, "mine", &mine), status::conflict);
  EXPECT_THROW(admission.check_deleted(mine), http::HttpError);
  const Account fresh = account("mine", "mine-2");
  EXPECT_EQ(answer(admission, "mine", &fresh), std::nullopt) << "its id's next account is served";

  // The move case alone (restore --all): a user being restored or owned elsewhere passes it.
  EXPECT_NO_THROW(admission.check_move("back"));
  EXPECT_NO_THROW(admission.check_move("theirs"));
  EXPECT_THROW(admission.check_move("leaving"), BoxUnavailable);
  EXPECT_THROW(admission.check_move("gone"), http::HttpError);

  // The sources change under it: the move's tombstone, the restore's end.
  moves_.set_out_state("m1", "moved", 101);
  gate_->reload();
  EXPECT_EQ(answer(admission, "leaving", nullptr), status::misdirected_request);
  restoring_.end("back-1");
  EXPECT_EQ(answer(admission, "back", nullptr), std::nullopt);
}

TEST_F(AdmissionTest, WithoutSourcesOnlyDeletedAccountsAreRefused) {
  Admission admission;
  for (const char* user : {"theirs", "leaving", "gone", "back"})
    EXPECT_EQ(answer(admission, user, nullptr), std::nullopt);
  const Account a = account("a", "a-1");
  admission.begin_delete("a-1");
  EXPECT_EQ(answer(admission, "a", &a), status::conflict);
}

}  // namespace
}  // namespace agentbox::accounts
