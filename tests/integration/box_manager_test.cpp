// BoxManager: one box per account, exits reported, idle stop that spares busy boxes, and a
// network namespace that outlives the box.
#include "box/box_manager.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <thread>

#include "support/box_fixture.hpp"

namespace agentbox {
namespace {

using namespace agentbox::testing;
using namespace std::chrono_literals;

struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, int>> exits;  // account, raw status
  std::vector<std::string> stopped;

  template <class Pred>
  bool wait(Pred p, std::chrono::milliseconds t = 10s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, t, p);
  }
};

BoxManagerOptions options(Recorder& rec, std::chrono::milliseconds idle = 60s) {
  BoxManagerOptions o;
  o.cgroups = cgroup_driver().get();
  o.idle_timeout = idle;
  o.sweep_interval = 50ms;
  o.on_exit = [&rec](const std::string& a, pid_t, int status) {
    std::lock_guard lock(rec.mu);
    rec.exits.emplace_back(a, status);
    rec.cv.notify_all();
  };
  o.on_stopped = [&rec](const std::string& a) {
    std::lock_guard lock(rec.mu);
    rec.stopped.push_back(a);
    rec.cv.notify_all();
  };
  return o;
}

SpawnRequest quiet(std::vector<std::string> argv) {
  SpawnRequest r;
  r.argv = std::move(argv);
  r.env = {"PATH=/usr/bin:/bin", "HOME=/home/tester"};
  r.tty = false;
  return r;
}

TEST(BoxManagerTest, OneBoxPerAccountAndExitsAreReported) {
  Recorder rec;
  BoxManager m(options(rec));
  uid_t ua = test_uid(), ub = test_uid();
  TempHome ha(ua), hb(ub);
  BoxSpec sa = make_spec(ua, ha.dir), sb = make_spec(ub, hb.dir);

  auto a1 = m.ensure("alice", sa);
  auto a2 = m.ensure("alice", sa);
  auto b = m.ensure("bob", sb);
  EXPECT_EQ(a1.get(), a2.get());
  EXPECT_NE(a1.get(), b.get());
  EXPECT_EQ(m.running(), 2u);

  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  const int fds[3] = {devnull.get(), devnull.get(), devnull.get()};
  m.spawn("alice", sa, quiet({"sh", "-c", "exit 3"}), fds);
  m.spawn("bob", sb, quiet({"sh", "-c", "exit 4"}), fds);
  ASSERT_TRUE(rec.wait([&] { return rec.exits.size() == 2; }));
  std::map<std::string, int> codes;
  for (auto& [a, st] : rec.exits) codes[a] = exit_status(st);
  EXPECT_EQ(codes["alice"], 3);
  EXPECT_EQ(codes["bob"], 4);
}

TEST(BoxManagerTest, ManyBoxesAtOnce) {
  Recorder rec;
  BoxManager m(options(rec));
  std::vector<std::unique_ptr<TempHome>> homes;
  for (int i = 0; i < 20; ++i) {
    uid_t u = test_uid();
    homes.push_back(std::make_unique<TempHome>(u));
    m.ensure("acct" + std::to_string(i), make_spec(u, homes.back()->dir));
  }
  EXPECT_EQ(m.running(), 20u);
  m.stop_all();
  EXPECT_EQ(m.running(), 0u);
}

TEST(BoxManagerTest, IdleBoxStopsButHomeStaysAndBusyBoxLives) {
  Recorder rec;
  BoxManager m(options(rec, 300ms));
  uid_t ua = test_uid(), ub = test_uid();
  TempHome ha(ua), hb(ub);
  BoxSpec sa = make_spec(ua, ha.dir), sb = make_spec(ub, hb.dir);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  const int fds[3] = {devnull.get(), devnull.get(), devnull.get()};

  m.spawn("idle", sa, quiet({"sh", "-c", "echo kept > ~/file"}), fds);
  // The busy account's command exits at once but leaves a background process running.
  m.spawn("busy", sb, quiet({"sh", "-c", "sleep 3 >/dev/null 2>&1 &"}), fds);

  ASSERT_TRUE(rec.wait([&] { return !rec.stopped.empty(); }, 5s));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_EQ(rec.stopped, std::vector<std::string>{"idle"});
  }
  EXPECT_EQ(m.find("idle"), nullptr);
  EXPECT_NE(m.find("busy"), nullptr) << "a box with a running background process was stopped";
  EXPECT_TRUE(std::filesystem::exists(ha.dir / "file"));

  // Once the background process ends, the busy box goes idle too.
  ASSERT_TRUE(rec.wait([&] { return rec.stopped.size() == 2; }, 10s));
  EXPECT_EQ(m.running(), 0u);
}

TEST(BoxManagerTest, NetworkNamespaceOutlivesTheBox) {
  Recorder rec;
  BoxManager m(options(rec));
  uid_t u = test_uid();
  TempHome h(u);
  BoxSpec s = make_spec(u, h.dir);
  auto ns_of = [&] { return run_piped(*m.ensure("net", s), {"readlink", "/proc/self/ns/net"}).out; };
  const std::string first = ns_of();
  ASSERT_NE(first.find("net:["), std::string::npos) << first;
  m.stop("net");
  EXPECT_EQ(ns_of(), first);
  // Only loopback, and it is up.
  Output o = run_piped(*m.ensure("net", s), {"cat", "/proc/net/dev"});
  EXPECT_NE(o.out.find("lo:"), std::string::npos);
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), ':'), 1) << o.out;
}

}  // namespace
}  // namespace agentbox
