// Whether a node may serve a user (accounts/admission.hpp): decide() as a table, one answer per
// case with its status, detail and Retry-After, the first case that applies winning; then the
// Admission gathering those facts from the real sources (restore markers, the moves tables, the
// cluster file, the deleted names) and throwing the refusal as the API answers it.
#include "accounts/admission.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>

#include "accounts/creation_rate.hpp"
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
AccountsFull at_cap() { return {AccountsFull::Limit::max_accounts, "holds 2 (max_accounts = 2)"}; }
AccountsFull no_uids() { return {AccountsFull::Limit::uid_range, "uid range 1-3 is exhausted (uid_count)"}; }
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
      {"new, at max_accounts",
       {.held = false, .full = at_cap()},
       status::service_unavailable,
       "holds 2 (max_accounts = 2)"},
      {"new, the uid range used up",
       {.held = false, .full = no_uids()},
       status::service_unavailable,
       "uid range 1-3 is exhausted (uid_count)"},
      {"new, the creation rate spent",
       {.held = false, .creation_wait = 12, .per_minute = 5},
       status::too_many_requests,
       "new accounts are limited to 5 a minute ([accounts] new_per_minute); retry in 12 s",
       12},
      {"held: the creation limits never refuse a known user",
       {.held = true, .full = at_cap(), .creation_wait = 12, .per_minute = 5},
       std::nullopt,
       ""},
      {"new, owned elsewhere and the node full: the owner is named, no account is made here",
       {.held = false, .owner_node = "n2", .owner_server = "127.0.0.1:8102", .full = at_cap()},
       status::misdirected_request,
       owned_elsewhere},
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
  try {
    refuse({status::too_many_requests, "slow down", 7});
    FAIL();
  } catch (const RetryLater& e) {
    EXPECT_EQ(e.status(), status::too_many_requests);
    EXPECT_EQ(e.retry_after(), 7) << "a 429 carries its Retry-After";
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

TEST(CreationRate, ABurstOfTheRateThenOneEveryInterval) {
  const CreationRate::Clock::time_point t0{};
  CreationRate rate(6, t0);  // a burst of 6, then one every 10 s
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rate.take(t0), 0) << i;
  EXPECT_EQ(rate.take(t0), 10) << "the 7th waits for a token";
  EXPECT_EQ(rate.take(t0 + std::chrono::seconds(4)), 6) << "a refusal spends nothing";
  EXPECT_EQ(rate.take(t0 + std::chrono::seconds(10)), 0);
  EXPECT_EQ(rate.take(t0 + std::chrono::seconds(10)), 10);
  EXPECT_EQ(rate.take(t0 + std::chrono::hours(1)), 0) << "refilled";
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rate.take(t0 + std::chrono::hours(1)), 0) << "at most a minute's worth";
  EXPECT_GT(rate.take(t0 + std::chrono::hours(1)), 0);
  CreationRate unlimited(0, t0);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(unlimited.take(t0), 0);
}

TEST_F(AdmissionTest, NewAccountsMeetTheStoreAndTheRate) {
  AccountStore accounts(open_state_db(scratch_.path()), UidRange{3000000, 100});
  accounts.limit_accounts(3);
  CreationRate rate(2);
  Admission admission({.accounts = &accounts, .creations = &rate});
  auto new_answer = [&](const std::string& user) -> std::optional<status> {
    try {
      admission.check_new(user);
      accounts.get_or_create(user);
      return std::nullopt;
    } catch (const RetryLater& e) {
      EXPECT_GT(e.retry_after(), 0);
      return e.status();
    } catch (const BoxUnavailable& e) {
      EXPECT_NE(std::string(e.what()).find("max_accounts"), std::string::npos) << e.what();
      return status::service_unavailable;
    }
  };
  EXPECT_EQ(new_answer("a"), std::nullopt);
  EXPECT_EQ(new_answer("b"), std::nullopt);
  EXPECT_EQ(new_answer("c"), status::too_many_requests) << "the rate's burst of 2 is spent";
  const std::optional<Account> a = accounts.find("a");
  EXPECT_EQ(answer(admission, "a", &*a), std::nullopt) << "a known user is never refused";
  rate.take(CreationRate::Clock::now() + std::chrono::minutes(5));  // refill, spending one
  EXPECT_EQ(new_answer("c"), std::nullopt);
  EXPECT_EQ(new_answer("d"), status::service_unavailable) << "3 accounts: max_accounts";
  try {
    admission.refuse_full("d", *accounts.full());
    FAIL();
  } catch (const BoxUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("max_accounts"), std::string::npos);
  }
}

}  // namespace
}  // namespace agentbox::accounts
