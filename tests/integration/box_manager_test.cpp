// BoxManager over real boxes: one box per account, exits reported to the spawn that started
// them, starts of many accounts side by side, a stuck start that fails only its own account,
// idle stop that spares busy boxes, a network namespace that outlives the box and is given back
// once the account is idle, and the cap on running boxes.
#include "box/box_manager.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "box/box_error.hpp"
#include "support/box_fixture.hpp"
#include "support/sigpipe_ignored.hpp"
#include "util/box_loop.hpp"

namespace agentbox {
namespace {

using namespace agentbox::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// One command run through the manager: what its handlers reported.
struct Command {
  std::promise<pid_t> started;  // the pid, or the failure
  std::promise<SpawnEnd> ended;
  std::shared_future<pid_t> pid = started.get_future().share();
  std::shared_future<SpawnEnd> end = ended.get_future().share();
  UniqueFd out;  // the read end of its stdout
};

// Starts argv with its stdout in a pipe.
std::shared_ptr<Command> run(BoxManager& m, const std::string& account, const BoxSpec& spec,
                             std::vector<std::string> argv) {
  auto r = std::make_shared<Command>();
  int p[2];
  EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
  r->out.reset(p[0]);
  std::vector<UniqueFd> stdio;
  stdio.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  stdio.emplace_back(p[1]);
  stdio.emplace_back(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  SpawnHandlers h;
  h.started = [r](SpawnResult s) { r->started.set_value(s.pid); };
  h.failed = [r](std::exception_ptr e) { r->started.set_exception(e); };
  h.ended = [r](SpawnEnd e) { r->ended.set_value(e); };
  m.spawn(account, spec, piped_request(std::move(argv)), std::move(stdio), std::move(h));
  return r;
}

// The command's exit code (waits for it), or -1 when its box went away first.
int exit_code(const std::shared_ptr<Command>& r, std::chrono::seconds t = 20s) {
  if (r->end.wait_for(t) != std::future_status::ready) return -2;
  const SpawnEnd e = r->end.get();
  return e.exited ? exit_status(e.status) : -1;
}

std::string output(const std::shared_ptr<Command>& r) {
  exit_code(r);
  return drain(r->out.get());
}

template <class Pred>
bool eventually(Pred p, std::chrono::milliseconds t = 10s) {
  for (const auto end = Clock::now() + t; Clock::now() < end; std::this_thread::sleep_for(20ms))
    if (p()) return true;
  return p();
}

size_t open_fds() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {}));
}

class BoxManagerTest : public ::testing::Test {
 protected:
  BoxManagerOptions options(std::chrono::milliseconds idle = 60s) {
    BoxManagerOptions o;
    o.cgroups = cgroup_driver().get();
    o.idle_timeout = idle;
    o.sweep_interval = 50ms;
    return o;
  }

  struct Account {
    std::string name;
    uid_t uid = test_uid();
    TempHome home{uid};
    BoxSpec spec = make_spec(uid, home.dir);
    explicit Account(std::string n) : name(std::move(n)) {}
  };
  std::vector<std::unique_ptr<Account>> accounts(const std::string& prefix, int n) {
    std::vector<std::unique_ptr<Account>> out;
    for (int i = 0; i < n; ++i) out.push_back(std::make_unique<Account>(prefix + std::to_string(i)));
    return out;
  }

  BoxLoop loop{2};
};

TEST_F(BoxManagerTest, OneBoxPerAccountAndExitsReachTheirCommand) {
  BoxManager m(loop, options());
  Account a("alice"), b("bob");
  auto a1 = run(m, a.name, a.spec, {"sh", "-c", "readlink /proc/self/ns/pid; exit 3"});
  auto a2 = run(m, a.name, a.spec, {"sh", "-c", "readlink /proc/self/ns/pid; exit 5"});
  auto b1 = run(m, b.name, b.spec, {"sh", "-c", "readlink /proc/self/ns/pid; exit 4"});
  const std::string ns_a1 = output(a1), ns_a2 = output(a2), ns_b = output(b1);
  EXPECT_EQ(exit_code(a1), 3);
  EXPECT_EQ(exit_code(a2), 5);
  EXPECT_EQ(exit_code(b1), 4);
  EXPECT_EQ(ns_a1, ns_a2) << "two boxes for one account";
  EXPECT_NE(ns_a1, ns_b) << "two accounts share a box";
  EXPECT_EQ(m.running(), 2u);
}

// 50 accounts' first commands at once: every box starts, every command runs.
TEST_F(BoxManagerTest, FiftyAccountsStartingAtOnceAllRun) {
  BoxManager m(loop, options());
  auto all = accounts("many", 50);
  std::vector<std::shared_ptr<Command>> runs;
  for (auto& a : all) runs.push_back(run(m, a->name, a->spec, {"sh", "-c", "exit 7"}));
  for (auto& r : runs) EXPECT_EQ(exit_code(r, 60s), 7);
  EXPECT_EQ(m.running(), 50u);
  m.stop_all();
  EXPECT_EQ(m.running(), 0u);
}

// A box whose init never answers its start: its account's command fails with the reason once
// the start timeout passes, while twenty other accounts start and run meanwhile; a later
// request of the stuck account tries a new start.
TEST_F(BoxManagerTest, AStuckStartFailsOnlyItsOwnAccount) {
  BoxManagerOptions o = options();
  o.start_timeout = 6s;
  o.hold_start = [](const std::string& account) { return account == "stuck"; };
  BoxManager m(loop, o);
  Account stuck("stuck");
  const auto t0 = Clock::now();
  auto held = run(m, stuck.name, stuck.spec, {"true"});
  auto others = accounts("bystander", 20);
  std::vector<std::shared_ptr<Command>> runs;
  for (auto& a : others) runs.push_back(run(m, a->name, a->spec, {"sh", "-c", "exit 9"}));
  for (auto& r : runs) EXPECT_EQ(exit_code(r, 30s), 9);
  EXPECT_LT(Clock::now() - t0, 6s) << "the others waited for the stuck start";
  EXPECT_EQ(held->pid.wait_for(0s), std::future_status::timeout) << "the stuck start answered early";

  ASSERT_EQ(held->pid.wait_for(10s), std::future_status::ready);
  try {
    held->pid.get();
    ADD_FAILURE() << "a start that never answered ran its command";
  } catch (const BoxUnavailable& e) {
    EXPECT_EQ(std::string(e.what()), "box tester did not start within 6 s");
    EXPECT_GT(e.retry_after(), 0);
  }
  EXPECT_GE(Clock::now() - t0, 6s);
  EXPECT_TRUE(eventually([&] { return m.running() == 20u; })) << "the stuck box was not cleaned up";
  auto again = run(m, stuck.name, stuck.spec, {"true"});
  EXPECT_THROW(again->pid.get(), BoxUnavailable);
}

TEST_F(BoxManagerTest, IdleBoxStopsButHomeStaysAndBusyBoxLives) {
  BoxManager m(loop, options(300ms));
  Account idle("idle"), busy("busy");
  EXPECT_EQ(exit_code(run(m, idle.name, idle.spec, {"sh", "-c", "echo kept > ~/file"})), 0);
  // The busy account's command exits at once but leaves a background process running.
  EXPECT_EQ(exit_code(run(m, busy.name, busy.spec, {"sh", "-c", "sleep 3 >/dev/null 2>&1 &"})), 0);
  ASSERT_TRUE(eventually([&] { return m.running() == 1u; }, 2500ms)) << m.running();
  EXPECT_TRUE(std::filesystem::exists(idle.home.dir / "file"));
  // Once the background process ends, the busy box goes idle too.
  EXPECT_TRUE(eventually([&] { return m.running() == 0u; }, 10s));
}

// The account's network namespace outlives its box; once the account has had no box for
// netns_linger, the namespace is given back (a descriptor less) and the next box gets a new one.
TEST_F(BoxManagerTest, NetworkNamespaceOutlivesTheBoxThenIsGivenBack) {
  BoxManagerOptions o = options();
  o.netns_linger = 500ms;
  BoxManager m(loop, o);
  Account a("net");
  const std::string first = output(run(m, a.name, a.spec, {"readlink", "/proc/self/ns/net"}));
  ASSERT_NE(first.find("net:["), std::string::npos) << first;
  std::promise<void> stopped;
  m.stop(a.name, [&] { stopped.set_value(); });
  stopped.get_future().wait();
  EXPECT_EQ(output(run(m, a.name, a.spec, {"readlink", "/proc/self/ns/net"})), first);
  // Only loopback, and it is up.
  const std::string dev = output(run(m, a.name, a.spec, {"cat", "/proc/net/dev"}));
  EXPECT_NE(dev.find("lo:"), std::string::npos);
  EXPECT_EQ(std::count(dev.begin(), dev.end(), ':'), 1) << dev;

  EXPECT_EQ(m.accounts_held(), 1u);
  const size_t fds_with_netns = open_fds();
  std::promise<void> stopped_again;
  m.stop(a.name, [&] { stopped_again.set_value(); });
  stopped_again.get_future().wait();
  EXPECT_TRUE(eventually([&] { return m.accounts_held() == 0u; }, 5s));
  EXPECT_LT(open_fds(), fds_with_netns) << "the namespace's descriptor was kept";
  EXPECT_EQ(exit_code(run(m, a.name, a.spec, {"true"})), 0) << "a new namespace for the next box";
}

// max_active boxes at most: the next account is refused with a reason and a Retry-After, and is
// served once a box stops.
TEST_F(BoxManagerTest, BoxesAboveMaxActiveAreRefusedUntilOneStops) {
  BoxManagerOptions o = options();
  o.max_active = 2;
  BoxManager m(loop, o);
  auto all = accounts("capped", 3);
  EXPECT_EQ(exit_code(run(m, all[0]->name, all[0]->spec, {"true"})), 0);
  EXPECT_EQ(exit_code(run(m, all[1]->name, all[1]->spec, {"true"})), 0);
  auto refused = run(m, all[2]->name, all[2]->spec, {"true"});
  try {
    refused->pid.get();
    ADD_FAILURE() << "a third box started with max_active = 2";
  } catch (const BoxUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("2 boxes are running"), std::string::npos) << e.what();
    EXPECT_GT(e.retry_after(), 0);
  }
  // An account that has a box is still served.
  EXPECT_EQ(exit_code(run(m, all[0]->name, all[0]->spec, {"true"})), 0);
  std::promise<void> stopped;
  m.stop(all[1]->name, [&] { stopped.set_value(); });
  stopped.get_future().wait();
  EXPECT_EQ(exit_code(run(m, all[2]->name, all[2]->spec, {"true"})), 0);
}

// The daemon's way into a box's loopback (/proxy, /ports): a socket made in the account's
// network namespace reaches a server in the box, and not the host's loopback (a listener of
// ours on the same port number); without a running box there is none.
TEST_F(BoxManagerTest, ASocketMadeInTheBoxReachesItsLoopbackOnly) {
  BoxManager m(loop, options());
  Account a("sock");
  auto open_socket = [&] {
    std::promise<std::pair<UniqueFd, std::string>> p;
    m.open_socket_in_box(a.name, AF_INET, [&](UniqueFd fd, std::string why) { p.set_value({std::move(fd), why}); });
    return p.get_future().get();
  };
  EXPECT_FALSE(open_socket().first) << "a socket for an account without a box";

  auto server = run(m, a.name, a.spec,
                    {"python3", "-c",
                     "import socket\n"
                     "s = socket.socket(); s.bind(('127.0.0.1', 8126)); s.listen(); print('up', flush=True)\n"
                     "c, _ = s.accept(); c.sendall(b'from the box'); c.close()"});
  char up[8];
  ASSERT_GT(::read(server->out.get(), up, sizeof up), 0);
  std::promise<std::vector<protocol::ListeningPort>> listed;
  m.list_ports(a.name, [&](std::vector<protocol::ListeningPort> p) { listed.set_value(std::move(p)); });
  const auto ports = listed.get_future().get();
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].port, 8126);

  // A host listener on the same number: a socket of the host's namespace would reach this one.
  UniqueFd host(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(8126);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  ::setsockopt(host.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool host_listens =
      ::bind(host.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(host.get(), 1) == 0;

  auto [sock, why] = open_socket();
  ASSERT_TRUE(sock) << why;
  const int flags = ::fcntl(sock.get(), F_GETFL);
  ::fcntl(sock.get(), F_SETFL, flags & ~O_NONBLOCK);
  ASSERT_EQ(::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  EXPECT_EQ(drain(sock.get()), "from the box");
  if (host_listens) {
    pollfd p{host.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 100), 0) << "the box's socket reached the host's loopback";
  }
  EXPECT_EQ(exit_code(server), 0);
}

// Makes the next pid the box's pid namespace hands out `next` (as root, from outside: a child
// that joins the namespace has a child there write ns_last_pid).
void set_next_pid(pid_t init_pid, pid_t next) {
  UniqueFd ns(::open(("/proc/" + std::to_string(init_pid) + "/ns/pid").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(ns);
  // Made before the fork: the children of a multi-threaded process only make system calls.
  const std::string last = std::to_string(next - 1);
  const pid_t joiner = ::fork();
  ASSERT_GE(joiner, 0);
  if (joiner == 0) {
    if (::setns(ns.get(), CLONE_NEWPID) != 0) ::_exit(1);
    const pid_t writer = ::fork();  // the first process of ours inside
    if (writer == 0) {
      const int fd = ::open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
      ::_exit(fd >= 0 && ::write(fd, last.data(), last.size()) == static_cast<ssize_t>(last.size()) ? 0 : 2);
    }
    int st = 0;
    ::waitpid(writer, &st, 0);
    ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 3);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(joiner, &st, 0), joiner);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "could not set ns_last_pid: " << st;
}

// shut_down() (the daemon's stop): running commands end with their boxes, a later spawn is
// refused ("the server is stopping") and starts no box, and a second shut_down() and the
// destructor after it are no-ops.
TEST_F(BoxManagerTest, ShutDownEndsEveryBoxAndRefusesLaterSpawns) {
  BoxManager m(loop, options());
  Account a("shut");
  auto sleeping = run(m, a.name, a.spec, {"sleep", "300"});
  ASSERT_EQ(sleeping->pid.wait_for(20s), std::future_status::ready);
  EXPECT_GT(sleeping->pid.get(), 0);
  m.shut_down();
  EXPECT_EQ(exit_code(sleeping, 10s), -1) << "the command outlived its box";
  EXPECT_EQ(m.running(), 0u);
  auto late = run(m, a.name, a.spec, {"true"});
  ASSERT_EQ(late->pid.wait_for(10s), std::future_status::ready);
  try {
    late->pid.get();
    ADD_FAILURE() << "a spawn after shut_down() ran";
  } catch (const BoxUnavailable& e) {
    EXPECT_EQ(std::string(e.what()), "the server is stopping");
  }
  EXPECT_EQ(m.running(), 0u);
  m.shut_down();
}

// A pid the box's kernel reuses at once for the next command: each exit still reaches the
// command that started it (exits are tagged with the spawn's id, never matched by pid).
TEST_F(BoxManagerTest, APidReusedRightAwayStillRoutesEachExitToItsCommand) {
  uid_t uid = test_uid();
  TempHome home(uid);
  auto launched = launch_box(make_spec(uid, home.dir), start_options("pid-reuse"));
  const pid_t init_pid = launched->init_pid;
  FairPool blocking(1, 1, "launcher");
  BoxStrand strand = boost::asio::make_strand(loop.context());
  std::promise<void> gone;
  auto owner =
      std::make_shared<BoxOwner>(strand, blocking, "reuse", BoxOwner::Options{},
                                 [&](const std::shared_ptr<BoxOwner>&, const std::string&) { gone.set_value(); });
  auto on_strand = [&](auto fn) {
    std::promise<void> done;
    boost::asio::post(strand, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  };
  on_strand([&] { owner->launched(std::move(launched)); });
  auto start = [&](uint64_t id, const char* code) {
    auto r = std::make_shared<Command>();
    SpawnHandlers h;
    h.started = [r](SpawnResult s) { r->started.set_value(s.pid); };
    h.failed = [r](std::exception_ptr e) { r->started.set_exception(e); };
    h.ended = [r](SpawnEnd e) { r->ended.set_value(e); };
    std::vector<UniqueFd> stdio;
    for (int i = 0; i < 3; ++i) stdio.emplace_back(::open("/dev/null", O_RDWR | O_CLOEXEC));
    on_strand([&] { owner->spawn(id, piped_request({"sh", "-c", std::string("exit ") + code}), std::move(stdio), h); });
    return r;
  };

  auto first = start(1, "3");
  const pid_t reused = first->pid.get();
  EXPECT_EQ(exit_code(first), 3);
  set_next_pid(init_pid, reused);
  auto second = start(2, "4");
  EXPECT_EQ(second->pid.get(), reused) << "the kernel did not reuse the pid: the test proves nothing";
  EXPECT_EQ(exit_code(second), 4);
  EXPECT_EQ(exit_code(first), 3);
  on_strand([&] { owner->stop(""); });
  gone.get_future().wait();
  blocking.stop();
}

}  // namespace
}  // namespace agentbox
