// TakeoverReport: a takeover route's one line to the HTTP observer (metrics, audit), once.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "http/takeover_report.hpp"

namespace agentbox::http {
namespace {

using Credential = CompletedRequest::Credential;

struct Seen {
  size_t route_index;
  std::string method;
  unsigned status;
  Credential credential;
  bool refused;
  bool key_in_frame;
  std::string user;  // X-User-Id of the request the observer got
};

struct Recorder {
  std::vector<Seen> seen;
  TakeoverReport::Observer observer() {
    return [this](const CompletedRequest& r) {
      seen.push_back({r.route_index, std::string(r.method), r.status, r.credential, r.refused_credential,
                      r.key_in_frame, std::string(r.request->header("X-User-Id").value_or(""))});
    };
  }
};

Request head_of(std::string user) {
  Request r;
  r.headers.set("X-User-Id", user);
  return r;
}

TEST(TakeoverReport, ReportsTheAnswerOnceWithTheRouteAndTheHandOversCredential) {
  Recorder rec;
  TakeoverReport report(rec.observer(), 7, "GET", Credential::api_key, head_of("alice"),
                        std::chrono::steady_clock::now());
  EXPECT_TRUE(report.pending());
  report(101);
  report(500);  // a later answer (a close after the upgrade) is no second request
  ASSERT_EQ(rec.seen.size(), 1u);
  EXPECT_EQ(rec.seen[0].route_index, 7u);
  EXPECT_EQ(rec.seen[0].method, "GET");
  EXPECT_EQ(rec.seen[0].status, 101u);
  EXPECT_EQ(rec.seen[0].credential, Credential::api_key);
  EXPECT_FALSE(rec.seen[0].refused);
  EXPECT_EQ(rec.seen[0].user, "alice");
  EXPECT_FALSE(report.pending());
}

TEST(TakeoverReport, AnAuthFrameDecidesTheCredentialAndMayNameTheUser) {
  Recorder rec;
  TakeoverReport refused(rec.observer(), 1, "GET", Credential::nothing, head_of(""), {});
  refused(101, {.refused = true, .key_in_frame = true});
  Request bound = head_of("bob");  // the frame's user key named bob
  TakeoverReport accepted(rec.observer(), 1, "GET", Credential::nothing, head_of(""), {});
  accepted(101, {.credential = Credential::user_key, .head = &bound});
  ASSERT_EQ(rec.seen.size(), 2u);
  EXPECT_TRUE(rec.seen[0].refused);
  EXPECT_TRUE(rec.seen[0].key_in_frame);
  EXPECT_EQ(rec.seen[0].credential, Credential::nothing);
  EXPECT_FALSE(rec.seen[1].refused);
  EXPECT_EQ(rec.seen[1].credential, Credential::user_key);
  EXPECT_EQ(rec.seen[1].user, "bob");
}

TEST(TakeoverReport, MovedFromDefaultAndObserverlessReportsReportNothing) {
  Recorder rec;
  TakeoverReport report(rec.observer(), 2, "PUT", Credential::admin_key, head_of(""), {});
  TakeoverReport moved = std::move(report);
  report(200);  // NOLINT(bugprone-use-after-move): the moved-from one is spent
  TakeoverReport none;
  none(200);
  TakeoverReport unobserved(TakeoverReport::Observer{}, 2, "PUT", Credential::admin_key, head_of(""), {});
  unobserved(200);
  EXPECT_TRUE(rec.seen.empty());
  moved(413);
  ASSERT_EQ(rec.seen.size(), 1u);
  EXPECT_EQ(rec.seen[0].status, 413u);
}

TEST(TakeoverReport, AnObserverThatThrowsDoesNotReachTheConnection) {
  TakeoverReport report([](const CompletedRequest&) { throw std::runtime_error("full"); }, 0, "GET",
                        Credential::nothing, head_of(""), {});
  EXPECT_NO_THROW(report(101));
  EXPECT_FALSE(report.pending());
}

}  // namespace
}  // namespace agentbox::http
