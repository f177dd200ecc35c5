// ProcessTable over real boxes: terminal and pipe output, exit codes, long-polls (one and a
// thousand), kill escalation, timeouts, input, account scoping, a daemon restart, retention,
// and a background child that keeps the terminal open.
#include "exec/process_table.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "box/box_manager.hpp"
#include "store/schema.hpp"
#include "support/box_fixture.hpp"
#include "support/sigpipe_ignored.hpp"
#include "util/box_loop.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
// Statuses by name in failure messages.
void PrintTo(ProcessStatus s, std::ostream* os) { *os << to_string(s); }
}  // namespace agentbox

namespace agentbox::exec {
namespace {

namespace fs = std::filesystem;
using namespace agentbox::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The table's ProcessSpawner over a real BoxManager, one fixed spec per account (the daemon's adapter
// is exec/account_boxes.hpp).
class ManagerPort : public ProcessSpawner {
 public:
  explicit ManagerPort(BoxManager& m) : m_(m) {}
  uint64_t spawn(const BoxSpec& spec, SpawnRequest req, std::vector<UniqueFd> stdio, SpawnHandlers h) override {
    return m_.spawn(spec.name, spec, std::move(req), std::move(stdio), std::move(h));
  }
  void signal(const std::string& account, uint64_t id, int sig) override { m_.signal(account, id, sig); }

 private:
  BoxManager& m_;
};

// Starts r and waits for the table to report its id; a start that fails fails the test.
std::string started(ProcessTable& table, StartRequest r) {
  std::promise<StartOutcome> p;
  auto f = p.get_future();
  table.start(std::move(r), [&p](StartOutcome o) { p.set_value(std::move(o)); });
  if (f.wait_for(30s) != std::future_status::ready) {
    ADD_FAILURE() << "start did not report";
    return {};
  }
  StartOutcome o = f.get();
  if (o.error) std::rethrow_exception(o.error);
  return o.id;
}

std::string text_of(const ProcessView& v, const std::string& type = {}) {
  std::string s;
  for (const auto& c : v.output)
    if (type.empty() || c.type == type) s += c.data;
  return s;
}

class ProcessTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-exec-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    state_ = tmpl;
    BoxManagerOptions mo;
    mo.cgroups = cgroup_driver().get();
    mo.idle_timeout = 600s;
    manager_ = std::make_unique<BoxManager>(loop_, std::move(mo));
    port_ = std::make_unique<ManagerPort>(*manager_);
    // The account is the spec's name as the table sees it; the port keys boxes by it too.
    specs_["alice"] = make_spec(alice_uid_, alice_home_.dir);
    specs_["bob"] = make_spec(bob_uid_, bob_home_.dir);
    for (auto& [account, spec] : specs_) spec.name = account;
    store_ = std::make_unique<ProcessStore>(open_state_db(state_));
    opts_.log_dir = state_ + "/logs";
    opts_.kill_grace = 300ms;
    opts_.drain_grace = 200ms;
  }

  void TearDown() override {
    table_.reset();
    manager_.reset();  // stops every box and what still runs in them
    store_.reset();
    fs::remove_all(state_);
  }

  ProcessTable& table() {
    if (!table_) make_table();
    return *table_;
  }
  void make_table() {
    table_.reset();
    table_ = std::make_unique<ProcessTable>(loop_, *port_, *store_, opts_);
  }

  std::string start(const std::string& account, const std::string& command, bool tty = true,
                    std::optional<std::string> stdin_data = {}, std::optional<std::chrono::milliseconds> timeout = {},
                    std::vector<std::string> extra_env = {}) {
    StartRequest r;
    r.box = specs_.at(account);
    r.command = command;
    r.spawn.argv = {"/bin/sh", "-c", command};
    r.spawn.env = {"PATH=/usr/bin:/bin", "HOME=/home/" + account, "TERM=dumb"};
    r.spawn.env.insert(r.spawn.env.end(), extra_env.begin(), extra_env.end());
    r.spawn.tty = tty;
    r.stdin_data = std::move(stdin_data);
    r.timeout = timeout;
    return started(table(), std::move(r));
  }

  // A blocking wait for tests; fails the test if done is not called in time.
  std::optional<ProcessView> wait(const std::string& account, const std::string& id, bool until_output,
                                  std::chrono::milliseconds max, uint64_t offset = 0) {
    auto promise = std::make_shared<std::promise<std::optional<ProcessView>>>();
    auto future = promise->get_future();
    ReadSpec read;
    read.offset = offset;
    auto handle = table().wait(account, id, read, until_output, Clock::now() + max,
                               [promise](std::optional<ProcessView> v) { promise->set_value(std::move(v)); });
    if (future.wait_for(max + 5s) != std::future_status::ready) {
      handle->cancel();
      ADD_FAILURE() << "wait() did not call back within its deadline";
      return std::nullopt;
    }
    return future.get();
  }

  ProcessView finished(const std::string& account, const std::string& id, std::chrono::milliseconds max = 10s) {
    auto v = wait(account, id, false, max);
    EXPECT_TRUE(v.has_value());
    if (!v) return {};
    EXPECT_NE(v->status, ProcessStatus::running) << "still running after " << max.count() << " ms";
    return *v;
  }

  bool kill(const std::string& account, const std::string& id, bool force, std::chrono::milliseconds* took = nullptr) {
    std::promise<bool> p;
    auto f = p.get_future();
    const auto t0 = Clock::now();
    table().kill(account, id, force, [&p](bool found) { p.set_value(found); });
    EXPECT_EQ(f.wait_for(10s), std::future_status::ready) << "kill did not answer";
    if (took) *took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    return f.get();
  }

  BoxLoop loop_{2};
  std::string state_;
  uid_t alice_uid_ = test_uid(), bob_uid_ = test_uid();
  TempHome alice_home_{alice_uid_}, bob_home_{bob_uid_};
  std::map<std::string, BoxSpec> specs_;
  std::unique_ptr<BoxManager> manager_;
  std::unique_ptr<ManagerPort> port_;
  std::unique_ptr<ProcessStore> store_;
  ProcessTableOptions opts_;
  std::unique_ptr<ProcessTable> table_;
};

TEST_F(ProcessTableTest, TerminalMergesOutputWithCrLf) {
  const std::string id = start("alice", "echo out; echo err >&2");
  ProcessView v = finished("alice", id);
  EXPECT_EQ(v.status, ProcessStatus::done);
  EXPECT_EQ(v.exit_code, 0);
  ASSERT_FALSE(v.output.empty());
  for (const auto& c : v.output) EXPECT_EQ(c.type, "output");
  EXPECT_EQ(text_of(v), "out\r\nerr\r\n");
  EXPECT_EQ(v.next_offset, 10u);
  EXPECT_EQ(v.command, "echo out; echo err >&2");
}

TEST_F(ProcessTableTest, PipesKeepStdoutAndStderrApartAndEnvArrives) {
  const std::string id = start("alice", "echo \"$GREETING\"; echo oops >&2", false, {}, {}, {"GREETING=hi there"});
  ProcessView v = finished("alice", id);
  EXPECT_EQ(v.status, ProcessStatus::done);
  EXPECT_EQ(text_of(v, "stdout"), "hi there\n");
  EXPECT_EQ(text_of(v, "stderr"), "oops\n");
  EXPECT_EQ(text_of(v, "output"), "");
}

TEST_F(ProcessTableTest, ExitCodesFollowPythonConvention) {
  const std::string three = start("alice", "exit 3", false);
  const std::string signaled = start("alice", "kill -9 $$");
  EXPECT_EQ(finished("alice", three).exit_code, 3);
  ProcessView v = finished("alice", signaled);
  EXPECT_EQ(v.status, ProcessStatus::done) << "a command that dies by itself was not killed by us";
  EXPECT_EQ(v.exit_code, -9);
}

TEST_F(ProcessTableTest, ManyQuickCommandsAllFinish) {
  // Exits arrive from the box's event thread, often before start() has returned.
  finished("alice", start("alice", "true"));  // the box exists before descriptors are counted
  const auto fds_before = std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator());
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(start("alice", "exit " + std::to_string(i % 5), i % 2 == 0));
  for (size_t i = 0; i < ids.size(); ++i) {
    ProcessView v = finished("alice", ids[i]);
    EXPECT_EQ(v.status, ProcessStatus::done);
    EXPECT_EQ(v.exit_code, static_cast<int>(i % 5)) << ids[i];
  }
  const auto fds_after = std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator());
  EXPECT_LE(fds_after, fds_before) << "finished processes keep descriptors open";
}

TEST_F(ProcessTableTest, WaitReturnsAtDeadlineOnFirstOutputAndOnFinish) {
  const std::string id = start("alice", "sleep 0.5; echo hi; sleep 0.5");

  auto t0 = Clock::now();
  auto v = wait("alice", id, false, 150ms);
  auto took = Clock::now() - t0;
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, ProcessStatus::running);
  EXPECT_GE(took, 140ms);
  EXPECT_LT(took, 400ms);

  t0 = Clock::now();
  v = wait("alice", id, true, 10s);
  took = Clock::now() - t0;
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, ProcessStatus::running) << "until_output returns at the output, not the end";
  EXPECT_EQ(text_of(*v), "hi\r\n");
  EXPECT_LT(took, 2s);

  // From next_offset on, the rest: nothing more, then the end.
  auto end = wait("alice", id, false, 10s, v->next_offset);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->status, ProcessStatus::done);
  EXPECT_EQ(text_of(*end), "");
  EXPECT_EQ(end->next_offset, v->next_offset);

  // A finished process answers at once.
  t0 = Clock::now();
  EXPECT_TRUE(wait("alice", id, true, 10s, end->next_offset));
  EXPECT_LT(Clock::now() - t0, 500ms);
}

TEST_F(ProcessTableTest, AThousandWaitsReturnPromptlyWhenOutputArrives) {
  constexpr int kProcs = 20, kWaitsPerProc = 50;
  std::vector<std::string> ids;
  for (int i = 0; i < kProcs; ++i) ids.push_back(start("alice", "read x; sleep 30"));

  struct Probe {
    std::atomic<int> fired{0};
    std::atomic<int64_t> worst_us{0};
    std::atomic<int> with_output{0};
  } probe;
  std::vector<Clock::time_point> input_at(kProcs);
  std::vector<std::shared_ptr<ProcessTable::Wait>> handles;
  std::mutex mu;
  for (int i = 0; i < kProcs; ++i) {
    for (int k = 0; k < kWaitsPerProc; ++k) {
      handles.push_back(
          table().wait("alice", ids[i], {}, true, Clock::now() + 60s, [&, i](std::optional<ProcessView> v) {
            Clock::time_point sent;
            {
              std::lock_guard lock(mu);
              sent = input_at[i];
            }
            const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count();
            int64_t prev = probe.worst_us.load();
            while (us > prev && !probe.worst_us.compare_exchange_weak(prev, us)) {
            }
            if (v && text_of(*v).find("go") != std::string::npos) ++probe.with_output;
            ++probe.fired;
          }));
    }
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(probe.fired.load(), 0) << "waits returned before any output";

  for (int i = 0; i < kProcs; ++i) {
    {
      std::lock_guard lock(mu);
      input_at[i] = Clock::now();
    }
    ASSERT_EQ(table().input("alice", ids[i], "go\n"), InputResult::ok);  // the terminal echoes it
  }
  const auto deadline = Clock::now() + 5s;
  while (probe.fired.load() < kProcs * kWaitsPerProc && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(probe.fired.load(), kProcs * kWaitsPerProc);
  EXPECT_EQ(probe.with_output.load(), kProcs * kWaitsPerProc);
  EXPECT_LT(probe.worst_us.load(), 1'000'000)
      << "slowest wait answered " << probe.worst_us.load() << " us after its output";
  std::printf("slowest of %d waits: %lld us after its output was sent\n", kProcs * kWaitsPerProc,
              static_cast<long long>(probe.worst_us.load()));

  for (const auto& id : ids) EXPECT_TRUE(kill("alice", id, true));
}

TEST_F(ProcessTableTest, KillEscalatesToKillForACommandThatIgnoresTerm) {
  const std::string id = start("alice", "trap '' TERM; echo ready; sleep 100");
  auto first = wait("alice", id, true, 10s);
  ASSERT_TRUE(first);
  ASSERT_NE(text_of(*first).find("ready"), std::string::npos);

  std::chrono::milliseconds took{};
  EXPECT_TRUE(kill("alice", id, false, &took));
  EXPECT_GE(took, opts_.kill_grace) << "ended before TERM could have been escalated";
  EXPECT_LT(took, 5s);
  auto v = table().get("alice", id, {});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, ProcessStatus::killed);
  EXPECT_EQ(v->exit_code, -SIGKILL);

  // Idempotent: a second kill answers at once and changes nothing.
  EXPECT_TRUE(kill("alice", id, false, &took));
  EXPECT_LT(took, 500ms);
  EXPECT_EQ(table().get("alice", id, {})->status, ProcessStatus::killed);

  // Killing a process that finished by itself keeps its record as it was.
  const std::string done = start("alice", "exit 4");
  finished("alice", done);
  EXPECT_TRUE(kill("alice", done, true));
  v = table().get("alice", done, {});
  EXPECT_EQ(v->status, ProcessStatus::done);
  EXPECT_EQ(v->exit_code, 4);
}

TEST_F(ProcessTableTest, TermEndsAnOrdinaryCommandAsKilled) {
  const std::string id = start("alice", "sleep 100", false);
  std::chrono::milliseconds took{};
  EXPECT_TRUE(kill("alice", id, false, &took));
  EXPECT_LT(took, opts_.kill_grace) << "TERM alone should have ended sleep";
  auto v = table().get("alice", id, {});
  EXPECT_EQ(v->status, ProcessStatus::killed);
  EXPECT_EQ(v->exit_code, -SIGTERM);
  ProcessRecord rec = *store_->get("alice", id);
  EXPECT_EQ(rec.status, ProcessStatus::killed) << "the store has the end too";
  EXPECT_EQ(rec.exit_code, -SIGTERM);
  EXPECT_TRUE(rec.ended.has_value());
}

TEST_F(ProcessTableTest, TimeoutKillsTheCommand) {
  const auto t0 = Clock::now();
  const std::string id = start("alice", "sleep 100", true, {}, 300ms);
  ProcessView v = finished("alice", id);
  EXPECT_EQ(v.status, ProcessStatus::killed);
  EXPECT_EQ(v.exit_code, -SIGTERM);
  EXPECT_GE(Clock::now() - t0, 300ms);
  EXPECT_LT(Clock::now() - t0, 3s);
}

TEST_F(ProcessTableTest, InputReachesTheCommandAndIsRefusedAfterExit) {
  // Terminal: read sees what is typed.
  const std::string tty = start("alice", "read line; echo \"got:$line\"");
  ASSERT_EQ(table().input("alice", tty, "hello\n"), InputResult::ok);
  ProcessView v = finished("alice", tty);
  EXPECT_NE(text_of(v).find("got:hello"), std::string::npos) << text_of(v);
  EXPECT_EQ(table().input("alice", tty, "late\n"), InputResult::exited);

  // Pipes: stdin stays open for input().
  const std::string piped = start("alice", "head -n 1", false);
  ASSERT_EQ(table().input("alice", piped, "abc\ndef\n"), InputResult::ok);
  v = finished("alice", piped);
  EXPECT_EQ(text_of(v, "stdout"), "abc\n");
  EXPECT_EQ(table().input("alice", piped, "x"), InputResult::exited);

  // Pipes with stdin data: cat gets it and EOF; later input finds stdin closed.
  const std::string fed = start("alice", "cat; sleep 5", false, std::string("piped data"));
  auto out = wait("alice", fed, true, 10s);
  ASSERT_TRUE(out);
  EXPECT_EQ(text_of(*out, "stdout"), "piped data");
  EXPECT_EQ(table().input("alice", fed, "more"), InputResult::closed);
  EXPECT_TRUE(kill("alice", fed, true));
}

// Without a terminal, Ctrl-D ("\x04", as API.md documents it) closes the command's stdin after
// the bytes before it, as a terminal's end-of-file would: `wc -l` counts and ends.
TEST_F(ProcessTableTest, CtrlDClosesStdinOfACommandWithoutTerminal) {
  const std::string id = start("alice", "wc -l", false);
  ASSERT_EQ(table().input("alice", id, "one\ntwo\n"), InputResult::ok);
  ASSERT_EQ(table().input("alice", id, "three\n\x04ignored"), InputResult::ok);
  ProcessView v = finished("alice", id, 5s);
  EXPECT_EQ(v.status, ProcessStatus::done);
  EXPECT_EQ(text_of(v, "stdout"), "3\n");
  // A terminal's "\x04" is the terminal's business: it reaches the pty as the EOF character.
  const std::string tty = start("alice", "cat > /dev/null; echo ended");
  ASSERT_EQ(table().input("alice", tty, "x\n\x04"), InputResult::ok);
  EXPECT_NE(text_of(finished("alice", tty, 5s)).find("ended"), std::string::npos);
}

TEST_F(ProcessTableTest, AnotherAccountCannotSeeOrTouchAProcess) {
  const std::string id = start("alice", "sleep 30");
  EXPECT_TRUE(table().get("alice", id, {}));
  EXPECT_FALSE(table().get("bob", id, {}));
  EXPECT_FALSE(wait("bob", id, false, 5s));
  EXPECT_FALSE(kill("bob", id, true));
  EXPECT_EQ(table().input("bob", id, "x"), InputResult::not_found);
  for (const auto& s : table().list("bob")) EXPECT_NE(s.id, id);
  EXPECT_EQ(table().get("alice", id, {})->status, ProcessStatus::running) << "bob's kill reached it";

  auto mine = table().list("alice");
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].id, id);
  EXPECT_EQ(mine[0].status, ProcessStatus::running);
  EXPECT_TRUE(kill("alice", id, true));
  // Finished and no longer in the table's memory alike: still not bob's.
  make_table();
  EXPECT_FALSE(table().get("bob", id, {}));
  EXPECT_FALSE(kill("bob", id, true));
  EXPECT_EQ(table().input("bob", id, "x"), InputResult::not_found);
  EXPECT_TRUE(table().get("alice", id, {}));
}

TEST_F(ProcessTableTest, AfterARestartRunningIsLostAndFinishedOutputIsReadable) {
  const std::string done = start("alice", "echo persisted; exit 2");
  finished("alice", done);
  const std::string running = start("alice", "sleep 30");

  make_table();  // the daemon restarts; the old table is gone, its command still runs

  auto lost = table().get("alice", running, {});
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->status, ProcessStatus::lost);
  auto v = table().get("alice", done, {});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, ProcessStatus::done);
  EXPECT_EQ(v->exit_code, 2);
  EXPECT_EQ(text_of(*v), "persisted\r\n");
  EXPECT_EQ(v->output[0].type, "output");
  // Offsets are the same as before the restart.
  ReadSpec from3;
  from3.offset = 3;
  EXPECT_EQ(text_of(*table().get("alice", done, from3)), "sisted\r\n");
  ReadSpec tail;
  tail.tail_lines = 1;
  EXPECT_EQ(text_of(*table().get("alice", done, tail)), "persisted\r\n");

  auto all = table().list("alice");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, done);
  EXPECT_EQ(all[1].status, ProcessStatus::lost);
  EXPECT_EQ(table().input("alice", running, "x"), InputResult::exited);
  // A wait on a process from before answers at once.
  auto w = wait("alice", done, true, 10s, v->next_offset);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->status, ProcessStatus::done);
}

// shut_down() (the daemon's stop): a wait still pending is dropped without a call, even past
// its deadline; a running command is left to its box, and the next table reads it back "lost".
// A second shut_down() and the destructor after it are no-ops.
TEST_F(ProcessTableTest, ShutDownDropsPendingWaitsAndLeavesRunningCommandsLost) {
  const std::string running = start("alice", "sleep 300");
  auto answered = std::make_shared<std::atomic<bool>>(false);
  auto handle = table().wait("alice", running, ReadSpec{}, false, Clock::now() + 1s,
                             [answered](std::optional<ProcessView>) { answered->store(true); });
  table().shut_down();
  table().shut_down();
  std::this_thread::sleep_for(1500ms);  // past the wait's deadline
  EXPECT_FALSE(answered->load()) << "a wait was answered after shut_down()";

  make_table();  // the next daemon's table, over the same store
  auto lost = table().get("alice", running, {});
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->status, ProcessStatus::lost);
}

// A command that ends while the state disk is full (tests/soak's full_state fault): the store
// refuses its end, the table keeps it and writes it with the next end once there is room, so the
// next daemon reads "done" with its exit code, not "lost".
TEST_F(ProcessTableTest, AnEndTheFullDiskRefusedIsSavedOnceThereIsRoom) {
  const std::string small = state_ + "/small";
  fs::create_directory(small);
  ASSERT_EQ(::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=2m"), 0) << std::strerror(errno);
  store_ = std::make_unique<ProcessStore>(open_state_db(small));  // the logs stay in state_/logs
  const std::string ending = start("alice", "read line; exit 3", false, std::nullopt);
  {
    UniqueFd filler(::open((small + "/filler").c_str(), O_WRONLY | O_CREAT, 0600));
    ASSERT_TRUE(filler) << std::strerror(errno);
    const std::string page(4096, 'x');
    while (::write(filler.get(), page.data(), page.size()) > 0) {
    }
    while (::write(filler.get(), "x", 1) > 0) {
    }
    ASSERT_EQ(errno, ENOSPC);
    EXPECT_EQ(table().input("alice", ending, "go\n"), InputResult::ok);
    EXPECT_EQ(finished("alice", ending).exit_code, 3);
    // The control: the store did refuse it (before the fix this record read "lost" next).
    EXPECT_EQ(store_->get("alice", ending)->status, ProcessStatus::running);
  }
  fs::remove(small + "/filler");
  finished("alice", start("alice", "true"));  // the next end writes the kept one first

  make_table();
  auto v = table().get("alice", ending, {});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, ProcessStatus::done);
  EXPECT_EQ(v->exit_code, 3);
  table_.reset();
  store_.reset();
  ::umount2(small.c_str(), MNT_DETACH);
}

TEST_F(ProcessTableTest, RetentionPurgeRemovesRecordsAndLogs) {
  opts_.retention = 0s;
  opts_.purge_interval = 100ms;
  const std::string id = start("alice", "echo bye");
  finished("alice", id);
  const std::string log = store_->get("alice", id)->log_path;
  ASSERT_TRUE(fs::exists(log + ".0"));

  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline && (store_->get("alice", id) || fs::exists(log + ".0")))
    std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(store_->get("alice", id));
  EXPECT_FALSE(fs::exists(log + ".0"));
  EXPECT_FALSE(table().get("alice", id, {}));
  EXPECT_TRUE(table().list("alice").empty());
}

// [exec] keep_finished: within the retention, an account's oldest finished processes and their
// logs go past the cap (they fill its quota's inodes otherwise); its newest stay queryable.
TEST_F(ProcessTableTest, KeepFinishedDropsTheOldestFinishedAndTheirLogs) {
  opts_.keep_finished = 2;
  opts_.purge_interval = 100ms;
  std::vector<std::string> ids, logs;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(start("alice", "echo " + std::to_string(i)));
    finished("alice", ids.back());
    logs.push_back(store_->get("alice", ids.back())->log_path);
  }
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline && (store_->get("alice", ids[1]) || fs::exists(logs[1] + ".0")))
    std::this_thread::sleep_for(50ms);
  for (int i : {0, 1}) {
    EXPECT_FALSE(store_->get("alice", ids[i])) << i;
    EXPECT_FALSE(fs::exists(logs[i] + ".0")) << i;
    EXPECT_FALSE(table().get("alice", ids[i], {})) << i;
  }
  for (int i : {2, 3}) {
    EXPECT_TRUE(store_->get("alice", ids[i])) << i;
    EXPECT_TRUE(fs::exists(logs[i] + ".0")) << i;
    EXPECT_EQ(text_of(*table().get("alice", ids[i], {})), std::to_string(i) + "\r\n") << i;
  }
}

TEST_F(ProcessTableTest, BackgroundChildHoldingTheTerminalDoesNotKeepItRunning) {
  // The child ignores the SIGHUP sent when the shell exits, so it keeps the terminal open; the
  // shell waits until the child is ready for that.
  const auto t0 = Clock::now();
  const std::string id = start("alice",
                               "(trap '' HUP; touch /tmp/ready; exec sleep 30) & "
                               "while [ ! -e /tmp/ready ]; do sleep 0.01; done; echo started");
  ProcessView v = finished("alice", id, 5s);
  const auto took = Clock::now() - t0;
  EXPECT_EQ(v.status, ProcessStatus::done);
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(text_of(v), "started\r\n");
  EXPECT_GE(took, opts_.drain_grace) << "the terminal closed at once: the child did not hold it";
  EXPECT_LT(took, 3s);
}

TEST_F(ProcessTableTest, StoppedBoxEndsItsProcessesAsKilled) {
  const std::string id = start("alice", "sleep 30");
  const std::string other = start("bob", "sleep 30");
  manager_->stop("alice");
  ProcessView v = finished("alice", id, 5s);
  EXPECT_EQ(v.status, ProcessStatus::killed);
  EXPECT_EQ(v.exit_code, std::nullopt);
  EXPECT_EQ(table().get("bob", other, {})->status, ProcessStatus::running);
}

// A ProcessSpawner without a box whose "command" writes, starts and exits at once, on another thread,
// in the worst order a box can report: its end arrives while its start is still on the way to
// the table. The exit is the command's (it names its spawn), so it must be neither lost nor
// given to another process.
class InstantPort : public ProcessSpawner {
 public:
  int code = 3;
  uint64_t spawn(const BoxSpec&, SpawnRequest, std::vector<UniqueFd> stdio, SpawnHandlers h) override {
    const uint64_t id = ++next_;
    write_all(stdio[1].get(), "early " + std::to_string(code) + "\n");
    threads_.emplace_back([h = std::move(h), id, code = code]() mutable {
      SpawnResult r;
      r.id = id;
      r.pid = 100;  // every command gets the same pid: a box that reuses pids at once
      h.started(std::move(r));
      h.ended(SpawnEnd{true, code << 8});
    });
    return id;
  }
  void signal(const std::string&, uint64_t, int) override {}
  ~InstantPort() override {
    for (auto& t : threads_) t.join();
  }

 private:
  uint64_t next_ = 0;
  std::vector<std::thread> threads_;
};

TEST(ProcessTableRaceTest, AnExitRightAfterTheStartReachesItsOwnProcessEvenWithTheSamePid) {
  char tmpl[] = "/tmp/abx-exec-race-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    BoxLoop loop(2);
    ProcessStore store(open_state_db(dir));
    InstantPort port;
    ProcessTableOptions opts;
    opts.log_dir = dir + "/logs";
    ProcessTable table(loop, port, store, opts);

    auto finished = [&](const std::string& id) {
      std::promise<std::optional<ProcessView>> p;
      auto f = p.get_future();
      table.wait("alice", id, {}, false, Clock::now() + 5s, [&p](auto v) { p.set_value(std::move(v)); });
      EXPECT_EQ(f.wait_for(10s), std::future_status::ready);
      return f.get();
    };

    StartRequest r;
    r.box.name = "alice";
    r.command = "fake";
    r.spawn.tty = false;
    std::vector<std::string> ids;
    for (int code : {3, 4, 5}) {
      port.code = code;
      ids.push_back(started(table, r));
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      auto v = finished(ids[i]);
      ASSERT_TRUE(v);
      EXPECT_EQ(v->status, ProcessStatus::done);
      EXPECT_EQ(v->exit_code, 3 + static_cast<int>(i)) << "an exit reached another process of the same pid";
      EXPECT_EQ(text_of(*v, "stdout"), "early " + std::to_string(3 + i) + "\n");
    }
  }
  fs::remove_all(dir);
}

// A ProcessSpawner that reports a command's start and end from its account's strand of the box
// loop, as BoxOwner does, and notes whether the table's answer came inside that same handler.
class StrandPort : public ProcessSpawner {
 public:
  explicit StrandPort(BoxLoop& loop) : loop_(loop) {}
  std::atomic<bool> inside{false};  // a box handler of ours is running
  uint64_t spawn(const BoxSpec& spec, SpawnRequest, std::vector<UniqueFd>, SpawnHandlers h) override {
    const uint64_t id = ++next_;
    boost::asio::post(*loop_.strand_of(spec.name), [this, h = std::move(h), id]() mutable {
      inside = true;
      SpawnResult r;
      r.id = id;
      r.pid = 100;
      h.started(std::move(r));
      h.ended(SpawnEnd{true, 7 << 8});
      inside = false;
    });
    return id;
  }
  void signal(const std::string&, uint64_t, int) override {}

 private:
  BoxLoop& loop_;
  std::atomic<uint64_t> next_{0};
};

TEST(ProcessTableStrandTest, ABoxsEventIsHandledInTheTurnThatReadItOnTheAccountsOneStrand) {
  char tmpl[] = "/tmp/abx-exec-strand-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    BoxLoop loop(2);
    ProcessStore store(open_state_db(dir));
    StrandPort port(loop);
    ProcessTableOptions opts;
    opts.log_dir = dir + "/logs";
    ProcessTable table(loop, port, store, opts);
    StartRequest r;
    r.box.name = "alice";
    r.command = "fake";
    r.spawn.tty = false;
    std::promise<bool> answered_inside;
    table.start(r, [&](StartOutcome o) {
      EXPECT_FALSE(o.error);
      answered_inside.set_value(port.inside.load());
    });
    auto f = answered_inside.get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    EXPECT_TRUE(f.get()) << "the start went through a second post: the table and the box are on two strands";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentbox::exec
