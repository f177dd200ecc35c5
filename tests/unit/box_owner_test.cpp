// BoxOwner (box/box_owner.hpp) against a fake init on in-memory sockets: replies are matched to
// requests by id, exits reach the spawn they are tagged with whatever the pids and whatever the
// order the two sockets are read in, and a start or request init does not answer, a message that
// breaks the schema and init's death each stop the box and fail what was pending, with a reason.
#include "box/box_owner.hpp"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>

#include <condition_variable>
#include <future>
#include <list>
#include <mutex>

#include "box/box_error.hpp"
#include "support/sigpipe_ignored.hpp"
#include "util/box_loop.hpp"

namespace agentbox {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// What the handlers of one spawn saw, in order.
struct SpawnLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;  // "started 42", "failed <what>", "ended 3", "gone"

  void add(std::string e) {
    std::lock_guard lock(mu);
    events.push_back(std::move(e));
    cv.notify_all();
  }
  bool wait_for(size_t n, std::chrono::milliseconds t = 5s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, t, [&] { return events.size() >= n; });
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mu);
    return events;
  }
};

SpawnHandlers handlers_for(SpawnLog& log) {
  SpawnHandlers h;
  h.started = [&log](SpawnResult r) { log.add("started " + std::to_string(r.pid)); };
  h.failed = [&log](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const BoxUnavailable& u) {
      log.add(std::string("unavailable ") + u.what());
    } catch (const BoxLimitReached& l) {
      log.add(std::string("limit ") + l.what());
    } catch (const std::exception& x) {
      log.add(std::string("failed ") + x.what());
    }
  };
  h.ended = [&log](SpawnEnd end) {
    log.add(end.exited ? "ended " + std::to_string(WEXITSTATUS(end.status)) : std::string("gone"));
  };
  return h;
}

SpawnRequest command() {
  SpawnRequest r;
  r.argv = {"true"};
  r.tty = false;
  return r;
}

class BoxOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [control, init_control] = protocol::socket_pair();
    auto [events, init_events] = protocol::socket_pair();
    init_control_ = std::move(init_control);
    init_events_ = std::move(init_events);
    auto box = std::make_unique<LaunchedBox>();
    box->spec.name = "fake";
    box->control = std::move(control);
    box->events = std::move(events);
    launched_ = std::move(box);
  }

  void TearDown() override {
    on_strand([this] {
      if (owner_) owner_->stop("test over");
    });
    wait_gone();
    loop_.stop();
    pool_.stop();
  }

  void make_owner(BoxOwner::Options o = {}) {
    owner_ = std::make_shared<BoxOwner>(strand_, pool_, "fake", o,
                                        [this](const std::shared_ptr<BoxOwner>&, const std::string& why) {
                                          std::lock_guard lock(mu_);
                                          gone_ = true;
                                          gone_why_ = why;
                                          cv_.notify_all();
                                        });
  }

  // Runs fn on the owner's strand and waits for it.
  template <class Fn>
  void on_strand(Fn fn) {
    std::promise<void> done;
    asio::post(strand_, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  void launch() {
    on_strand([this] { owner_->launched(std::move(launched_)); });
  }

  // An owner whose box has started.
  void ready_box(BoxOwner::Options o = {}) {
    make_owner(o);
    launch();
    reply(protocol::Ready{7});
  }

  void spawn(uint64_t id, SpawnLog& log) {
    on_strand([&, id] { owner_->spawn(id, command(), {}, handlers_for(log)); });
  }

  // The fake init's side.
  nlohmann::json next_request() {
    protocol::Message m = protocol::recv_reply(init_control_.get(), 5000, "fake init");
    return m.body;
  }
  template <class M>
  void reply(const M& m) {
    protocol::send_message(init_control_.get(), m);
  }
  void exited(uint64_t spawn, int code) {
    protocol::send_message(init_events_.get(), protocol::Exited{spawn, code << 8});
  }

  bool wait_gone(std::chrono::milliseconds t = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, t, [&] { return gone_; });
  }
  std::string gone_why() {
    std::lock_guard lock(mu_);
    return gone_why_;
  }

  // What handlers report into: kept until the owner is gone (its stop reports "gone" to every
  // command still running, after the test body).
  SpawnLog& new_log() { return logs_.emplace_back(); }
  std::list<SpawnLog> logs_;

  BoxLoop loop_{2};
  FairPool pool_{1, 1, "launcher"};
  BoxStrand strand_ = asio::make_strand(loop_.context());
  std::unique_ptr<LaunchedBox> launched_;
  UniqueFd init_control_, init_events_;
  std::shared_ptr<BoxOwner> owner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool gone_ = false;
  std::string gone_why_;
};

// Two commands get the same pid one after the other (the box's pid namespace reused it), and
// the second one's exit is read before its Spawned reply: each exit still reaches its own
// command, after that command's start.
TEST_F(BoxOwnerTest, ExitsReachTheirSpawnWhateverThePidAndTheOrder) {
  ready_box();
  SpawnLog& first = new_log();
  SpawnLog& second = new_log();
  spawn(1, first);
  EXPECT_EQ(protocol::decode_as<protocol::Spawn>(next_request()).id, 1u);
  reply(protocol::Spawned{1, 42});
  exited(1, 3);
  ASSERT_TRUE(first.wait_for(2));
  EXPECT_EQ(first.snapshot(), (std::vector<std::string>{"started 42", "ended 3"}));

  spawn(2, second);
  EXPECT_EQ(protocol::decode_as<protocol::Spawn>(next_request()).id, 2u);
  exited(2, 4);                       // the exit first, on the other socket
  std::this_thread::sleep_for(50ms);  // let the owner read it before the reply exists
  reply(protocol::Spawned{2, 42});
  ASSERT_TRUE(second.wait_for(2));
  EXPECT_EQ(second.snapshot(), (std::vector<std::string>{"started 42", "ended 4"}));
  EXPECT_EQ(first.snapshot().size(), 2u) << "the second exit reached the first command";
}

// Requests are sent before init has answered its start, and answered in order after it.
TEST_F(BoxOwnerTest, RequestsQueuedDuringTheStartAreAnsweredAfterIt) {
  make_owner();
  SpawnLog& a = new_log();
  SpawnLog& b = new_log();
  spawn(5, a);  // still launching: queued in the owner
  launch();
  spawn(6, b);
  EXPECT_EQ(protocol::decode_as<protocol::Spawn>(next_request()).id, 5u);
  EXPECT_EQ(protocol::decode_as<protocol::Spawn>(next_request()).id, 6u);
  reply(protocol::Ready{7});
  reply(protocol::Spawned{5, 10});
  reply(protocol::SpawnFailed{6, "nope: No such file or directory", ENOENT});
  ASSERT_TRUE(a.wait_for(1));
  ASSERT_TRUE(b.wait_for(1));
  EXPECT_EQ(a.snapshot()[0], "started 10");
  EXPECT_EQ(b.snapshot()[0], "failed nope: No such file or directory");
}

// No pty left: the box's own devpts at its max= is the account's limit (429 upstream, naming
// it); the host's pool spent is the host's (503, try later); a command's own failure stays a
// SpawnError (400).
TEST_F(BoxOwnerTest, ASpawnRefusedForWantOfAPtySaysWhoseLimitItWas) {
  make_owner();
  launch();
  reply(protocol::Ready{7});
  SpawnLog& box_full = new_log();
  SpawnLog& host_full = new_log();
  SpawnLog& missing = new_log();
  spawn(1, box_full);
  spawn(2, host_full);
  spawn(3, missing);
  for (int i = 0; i < 3; ++i) next_request();
  reply(protocol::SpawnFailed{1, "this box holds all 4 of its terminals ([box] ptys = 4)", ENOSPC,
                              protocol::SpawnFailure::box_ptys});
  reply(protocol::SpawnFailed{2, "the host has no terminal left", ENOSPC, protocol::SpawnFailure::host_ptys});
  reply(protocol::SpawnFailed{3, "nope: No such file or directory", ENOENT});
  ASSERT_TRUE(box_full.wait_for(1));
  ASSERT_TRUE(host_full.wait_for(1));
  ASSERT_TRUE(missing.wait_for(1));
  EXPECT_EQ(box_full.snapshot()[0], "limit this box holds all 4 of its terminals ([box] ptys = 4)");
  EXPECT_EQ(host_full.snapshot()[0], "unavailable the host has no terminal left");
  EXPECT_EQ(missing.snapshot()[0], "failed nope: No such file or directory");
}

TEST_F(BoxOwnerTest, AStartInitNeverAnswersFailsItsRequestsAfterTheTimeout) {
  BoxOwner::Options o;
  o.start_timeout = 300ms;
  make_owner(o);
  SpawnLog& a = new_log();
  spawn(1, a);
  launch();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(a.wait_for(1, 5s));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(a.snapshot()[0], "unavailable box fake did not start within 0.3 s");
  EXPECT_LT(waited, 2s);
  EXPECT_TRUE(wait_gone());
}

TEST_F(BoxOwnerTest, ARequestInitDoesNotAnswerStopsTheBox) {
  BoxOwner::Options o;
  o.request_timeout = 300ms;
  ready_box(o);
  SpawnLog& running = new_log();
  SpawnLog& stuck = new_log();
  spawn(1, running);
  next_request();
  reply(protocol::Spawned{1, 2});
  ASSERT_TRUE(running.wait_for(1));
  spawn(2, stuck);  // never answered
  ASSERT_TRUE(stuck.wait_for(1));
  EXPECT_NE(stuck.snapshot()[0].find("init did not answer within"), std::string::npos) << stuck.snapshot()[0];
  ASSERT_TRUE(running.wait_for(2));
  EXPECT_EQ(running.snapshot()[1], "gone") << "a started command must learn its box is gone";
  EXPECT_TRUE(wait_gone());
}

TEST_F(BoxOwnerTest, AReplyThatBreaksTheSchemaStopsTheBox) {
  ready_box();
  SpawnLog& a = new_log();
  spawn(1, a);
  next_request();
  nlohmann::json bad = protocol::encode(protocol::Spawned{1, 2});
  bad["v"] = protocol::kVersion + 1;
  protocol::send(init_control_.get(), bad);
  ASSERT_TRUE(a.wait_for(1));
  EXPECT_NE(a.snapshot()[0].find("unknown version"), std::string::npos) << a.snapshot()[0];
  EXPECT_TRUE(wait_gone());
}

TEST_F(BoxOwnerTest, AReplyForAnotherRequestStopsTheBox) {
  ready_box();
  SpawnLog& a = new_log();
  spawn(1, a);
  next_request();
  reply(protocol::Spawned{99, 2});
  ASSERT_TRUE(a.wait_for(1));
  EXPECT_NE(a.snapshot()[0].find("reply for request 99 where 1 was next"), std::string::npos) << a.snapshot()[0];
  EXPECT_TRUE(wait_gone());
}

TEST_F(BoxOwnerTest, AFailedStartFailsWhatWaitsWithInitsReason) {
  make_owner();
  SpawnLog& a = new_log();
  spawn(1, a);
  launch();
  reply(protocol::StartFailed{"mounts: mount(/usr): Permission denied"});
  ASSERT_TRUE(a.wait_for(1));
  EXPECT_EQ(a.snapshot()[0], "unavailable box fake did not start: mounts: mount(/usr): Permission denied");
  EXPECT_TRUE(wait_gone());
  EXPECT_EQ(gone_why(), "box fake did not start: mounts: mount(/usr): Permission denied");
}

TEST_F(BoxOwnerTest, InitsDeathEndsRunningCommandsAsGone) {
  ready_box();
  SpawnLog& a = new_log();
  spawn(1, a);
  next_request();
  reply(protocol::Spawned{1, 2});
  ASSERT_TRUE(a.wait_for(1));
  init_control_.reset();
  init_events_.reset();
  ASSERT_TRUE(a.wait_for(2));
  EXPECT_EQ(a.snapshot()[1], "gone");
  EXPECT_TRUE(wait_gone());
  EXPECT_NE(gone_why().find("init exited"), std::string::npos) << gone_why();
}

TEST_F(BoxOwnerTest, SignalsAndCountsAreAnsweredByTheirIds) {
  ready_box();
  std::promise<bool> delivered;
  std::promise<std::optional<int>> count;
  std::promise<std::vector<protocol::ListeningPort>> ports;
  on_strand([&] {
    owner_->signal(3, SIGTERM, /*whole_session=*/true, [&](bool d) { delivered.set_value(d); });
    owner_->count_processes([&](std::optional<int> n) { count.set_value(n); });
    owner_->list_ports([&](std::vector<protocol::ListeningPort> p) { ports.set_value(std::move(p)); });
  });
  const auto sig = protocol::decode_as<protocol::Signal>(next_request());
  EXPECT_EQ(sig.spawn, 3u);
  EXPECT_EQ(sig.sig, SIGTERM);
  EXPECT_TRUE(sig.whole_session);
  const auto cnt = protocol::decode_as<protocol::CountProcesses>(next_request());
  const auto lst = protocol::decode_as<protocol::ListPorts>(next_request());
  reply(protocol::Signalled{sig.id, true});
  reply(protocol::ProcessCount{cnt.id, 4});
  reply(protocol::Ports{lst.id, {{8124, 9, "python3"}}});
  EXPECT_TRUE(delivered.get_future().get());
  EXPECT_EQ(count.get_future().get(), 4);
  EXPECT_EQ(ports.get_future().get(), (std::vector<protocol::ListeningPort>{{8124, 9, "python3"}}));
}

}  // namespace
}  // namespace agentbox
