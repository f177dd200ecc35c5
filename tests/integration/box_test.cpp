// The box engine end to end, as the server will use it: start, spawn with pipes or a pty,
// environment, cwd, signals to the whole process group, exit status, cgroup usage, stop.
#include "box/box.hpp"
#include "box/cgroup.hpp"
#include "box/protocol.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "support/box_fixture.hpp"
#include "util/file_io.hpp"
#include "util/mountinfo.hpp"

namespace agentbox {
namespace {

using namespace agentbox::testing;

// Every test runs four times: init cloned and exec'd per box, with a parent-built /etc of the
// box's own or a clone of the shared /etc snapshot; init cloned by the zygote (the daemon); and
// (`agentbox run`'s way) a copy of this process become init in place, on the shared snapshot.
enum class InitWay { exec, exec_snapshot, zygote, in_place };

// The snapshots of this test process's boxes (box/etc_snapshots.hpp), gone at its end.
const std::string& snapshot_dir() {
  static struct Dir {
    std::string path;
    Dir() {
      char t[] = "/tmp/abx-etc-snapshots-XXXXXX";
      path = ::mkdtemp(t);
      ::chmod(path.c_str(), 0755);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path;
}

class BoxTest : public ::testing::TestWithParam<InitWay> {
 protected:
  uid_t uid = test_uid();
  TempHome home{uid};
  BoxSpec spec = make_spec(uid, home.dir);

  BoxStartOptions options(const std::string& tag) {
    BoxStartOptions o = start_options(tag);
    if (GetParam() == InitWay::zygote) o.zygote = &test_zygote();
    if (GetParam() == InitWay::exec_snapshot || GetParam() == InitWay::in_place) o.etc_snapshots = snapshot_dir();
    o.init_in_place = GetParam() == InitWay::in_place;
    return o;
  }
  // The processes init is a child of: this thread, or the zygote.
  std::string init_siblings() {
    const pid_t parent = GetParam() == InitWay::zygote ? test_zygote().pid() : ::gettid();
    return read_file("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children", 4096);
  }
};

INSTANTIATE_TEST_SUITE_P(InitWays, BoxTest,
                         ::testing::Values(InitWay::exec, InitWay::exec_snapshot, InitWay::zygote, InitWay::in_place),
                         [](const auto& info) {
                           return info.param == InitWay::exec            ? "Exec"
                                  : info.param == InitWay::exec_snapshot ? "ExecSnapshot"
                                  : info.param == InitWay::zygote        ? "Zygote"
                                                                         : "InPlace";
                         });

// However it came to be, init shows nothing of its starter: its name and command line are
// agentbox-init's, its environment holds none of the starter's, its stdio is /dev/null.
TEST_P(BoxTest, InitShowsNothingOfItsStarter) {
  ASSERT_NE(read_file("/proc/self/environ", 1 << 16), "") << "the test needs an environment of its own";
  auto box = Box::start(spec, options("init-face"));
  const std::string proc = "/proc/" + std::to_string(box->init_pid());
  EXPECT_EQ(read_file(proc + "/comm", 64), "agentbox-init\n");
  const std::string cmdline = read_file(proc + "/cmdline", 1 << 16);
  EXPECT_EQ(std::string(cmdline.c_str()), "agentbox-init");
  const std::string rest = cmdline.substr(std::min(cmdline.size(), std::strlen(cmdline.c_str()) + 1));
  EXPECT_EQ(rest.find_first_not_of('\0'), std::string::npos) << "more than argv[0]: " << rest;
  // Nothing, or the one variable an exec'd init is given.
  const std::string environ = read_file(proc + "/environ", 1 << 16);
  EXPECT_TRUE(environ.find_first_not_of('\0') == std::string::npos ||
              environ == std::string(protocol::kInitPath) + '\0')
      << environ;
  for (int fd : {0, 1}) {  // the null device (its path reads from inside the box's mounts)
    struct stat st {};
    ASSERT_EQ(::stat((proc + "/fd/" + std::to_string(fd)).c_str(), &st), 0) << "fd " << fd;
    EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == ::makedev(1, 3)) << "fd " << fd;
  }
}

TEST_P(BoxTest, RunsCommandsAsTheAccountUidWithPipes) {
  auto box = Box::start(spec, options("uid"));
  Output o = run_piped(*box, {"sh", "-c", "id -u; id -g; id -G; echo err >&2; exit 7"});
  EXPECT_EQ(exit_status(o.status), 7);
  EXPECT_EQ(o.out, std::to_string(uid) + "\n" + std::to_string(uid) + "\n" + std::to_string(uid) + "\n");
  EXPECT_EQ(o.err, "err\n");
}

TEST_P(BoxTest, EnvironmentCwdAndStdinReachTheCommand) {
  auto box = Box::start(spec, options("env"));
  Output o = run_piped(*box, {"sh", "-c", "echo $GREETING; pwd; cat"}, {"PATH=/usr/bin:/bin", "GREETING=hello there"},
                       "/tmp", "from stdin");
  EXPECT_EQ(o.out, "hello there\n/tmp\nfrom stdin");
  EXPECT_EQ(exit_status(o.status), 0);
  // Default cwd is the home.
  EXPECT_EQ(run_piped(*box, {"pwd"}).out, "/home/tester\n");
}

TEST_P(BoxTest, FilesCreatedInHomeBelongToTheAccountOnTheHost) {
  auto box = Box::start(spec, options("owner"));
  Output o = run_piped(*box, {"sh", "-c", "echo data > ~/made-inside"});
  ASSERT_EQ(exit_status(o.status), 0) << o.err;
  struct stat st {};
  ASSERT_EQ(::stat((home.dir / "made-inside").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);
  EXPECT_EQ(st.st_gid, uid);
}

// The command is looked up in its own PATH (not init's), from its cwd for relative entries,
// and a script without #! runs under /bin/sh: what execvp did before spawn used vfork.
TEST_P(BoxTest, CommandsAreFoundInTheirOwnPathAndScriptsWithoutShebangRun) {
  auto box = Box::start(spec, options("path"));
  Output made =
      run_piped(*box, {"sh", "-c",
                       "mkdir -p ~/bin ~/rel && printf 'echo mine $1\n' > ~/bin/mytool && chmod +x ~/bin/mytool"
                       " && printf 'echo relative\n' > ~/rel/reltool && chmod +x ~/rel/reltool"});
  ASSERT_EQ(exit_status(made.status), 0) << made.err;

  Output own = run_piped(*box, {"mytool", "arg"}, {"PATH=/home/tester/bin:/usr/bin:/bin"});
  EXPECT_EQ(own.out, "mine arg\n") << own.err;
  EXPECT_EQ(exit_status(own.status), 0);

  Output rel = run_piped(*box, {"reltool"}, {"PATH=rel:/usr/bin"}, "/home/tester");
  EXPECT_EQ(rel.out, "relative\n") << rel.err;

  // Not in this PATH: not found, even though it exists elsewhere (and in the cwd).
  EXPECT_THROW(run_piped(*box, {"mytool"}, {"PATH=/usr/bin:/bin"}, "/home/tester/bin"), SpawnError);
}

TEST_P(BoxTest, SpawnFailuresAreReportedNotHidden) {
  auto box = Box::start(spec, options("fail"));
  try {
    run_piped(*box, {"no-such-command-xyz"});
    FAIL() << "spawn of a missing command succeeded";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.code(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("no-such-command-xyz"), std::string::npos);
  }
  try {
    run_piped(*box, {"true"}, {}, "/no/such/dir");
    FAIL() << "spawn in a missing cwd succeeded";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.code(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("/no/such/dir"), std::string::npos);
  }
  // The box still works afterwards.
  EXPECT_EQ(exit_status(run_piped(*box, {"true"}).status), 0);
}

// A command the daemon runs without bash (exec/plain_command.hpp) keeps bash's meaning: argv
// runs with the environment bash would give it, and what argv cannot run goes to the shell,
// which reports it as it always did.
TEST_P(BoxTest, ShellFallbackRunsWhenTheCommandItselfCannotRun) {
  auto box = Box::start(spec, options("fallback"));
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin", "HOME=/home/tester", "PWD=/home/tester"};
  auto with_fallback = [&](std::vector<std::string> argv, std::string shell_command) {
    SpawnRequest req = piped_request(std::move(argv), env);
    req.shell_fallback = {"/bin/bash", "-c", std::move(shell_command)};
    return req;
  };
  // Runnable: argv itself runs (the fallback would have said so), with SHLVL and _ as bash -c
  // gives a command it execs.
  Output direct = run_request(*box, with_fallback({"env"}, "echo fallback"));
  EXPECT_NE(direct.out.find("SHLVL=0\n"), std::string::npos) << direct.out;
  EXPECT_NE(direct.out.find("_=/usr/bin/env\n"), std::string::npos) << direct.out;
  EXPECT_EQ(direct.out.find("fallback"), std::string::npos) << direct.out;
  // The same environment as bash itself gives (in its own order).
  auto sorted_lines = [](const std::string& text) {
    std::vector<std::string> lines;
    for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
      lines.push_back(text.substr(at, nl - at));
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  Output via_bash = run_piped(*box, {"/bin/bash", "-c", "env"}, env);
  EXPECT_EQ(sorted_lines(direct.out), sorted_lines(via_bash.out));

  // Not on PATH, a directory, not executable, no #!: the shell runs instead.
  Output missing = run_request(*box, with_fallback({"no-such-command-xyz"}, "no-such-command-xyz"));
  EXPECT_EQ(exit_status(missing.status), 127);
  EXPECT_NE(missing.err.find("no-such-command-xyz: command not found"), std::string::npos) << missing.err;

  Output dir = run_request(*box, with_fallback({"/tmp"}, "/tmp"));
  EXPECT_EQ(exit_status(dir.status), 126);
  EXPECT_NE(dir.err.find("Is a directory"), std::string::npos) << dir.err;

  ASSERT_EQ(
      exit_status(
          run_piped(
              *box,
              {"sh", "-c",
               "printf 'echo not run\n' > /tmp/noexec && printf '[[ 1 == 1 ]] && echo bash ran me\n' > /tmp/noshebang"
               " && chmod +x /tmp/noshebang"})
              .status),
      0);
  Output noexec = run_request(*box, with_fallback({"/tmp/noexec"}, "/tmp/noexec"));
  EXPECT_EQ(exit_status(noexec.status), 126);
  EXPECT_NE(noexec.err.find("Permission denied"), std::string::npos) << noexec.err;
  // bash runs a file without #! itself (/bin/sh, dash here, has no [[ ]]).
  Output noshebang = run_request(*box, with_fallback({"/tmp/noshebang"}, "/tmp/noshebang"));
  EXPECT_EQ(noshebang.out, "bash ran me\n") << noshebang.err;
}

// The box's own children of this process (init is cloned from the calling thread).
// With cgroup v1 the group is made and joined after init is cloned, while init builds the
// box. When that fails, the start fails with the cgroup's error and leaves no init behind.
TEST_P(BoxTest, ACgroupFailingAfterTheCloneFailsTheStartAndLeavesNoProcess) {
  struct FailingGroup final : Cgroup {
    bool fail_attach;
    explicit FailingGroup(bool f) : fail_attach(f) {}
    void attach(pid_t) override {
      if (fail_attach) throw Error("attach refused by the test", EACCES);
    }
    CgroupUsage usage() const override { return {}; }
    void destroy() override {}
    std::string path() const override { return "test"; }
  };
  struct FailingDriver final : CgroupDriver {
    bool fail_create;
    explicit FailingDriver(bool f) : fail_create(f) {}
    std::string kind() const override { return "v1"; }
    std::unique_ptr<Cgroup> create(const std::string&, const Limits&, CgroupUse) override {
      if (fail_create) throw Error("create refused by the test", EACCES);
      return std::make_unique<FailingGroup>(true);
    }
  };
  const std::string before = init_siblings();
  for (bool fail_create : {true, false}) {
    FailingDriver driver(fail_create);
    BoxStartOptions opts = options("cgfail");
    opts.cgroups = &driver;
    try {
      Box::start(spec, opts);
      FAIL() << "the box started without its cgroup";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fail_create ? "create refused" : "attach refused"), std::string::npos)
          << e.what();
    }
    // A zygote's child is reaped by the kernel a moment after its pidfd says it has exited.
    for (int i = 0; i < 100 && init_siblings() != before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(init_siblings(), before);
  }
  // And the real driver still works afterwards.
  auto box = Box::start(spec, options("cgok"));
  EXPECT_EQ(exit_status(run_piped(*box, {"true"}).status), 0);
}

// Init can give up (here: a bind source that does not exist) and exit before the parent joins
// it to its v1 cgroup, which the kernel then refuses with ESRCH. The start error reported is
// init's own, whether the start waits for ready or the first request does.
TEST_P(BoxTest, AnInitGoneBeforeItsCgroupIsJoinedReportsItsOwnStartError) {
  struct LateGroup final : Cgroup {
    void attach(pid_t pid) override {  // as the kernel answers once init has exited
      for (int i = 0; i < 500 && !gone(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      throw Error("attach: the test's init has exited", ESRCH);
    }
    static bool gone(pid_t pid) {  // exited: reaped, or a zombie of ours
      std::string stat;
      try {
        stat = read_file("/proc/" + std::to_string(pid) + "/stat", 4096);
      } catch (const Error&) {
        return true;
      }
      const size_t close = stat.rfind(')');
      return close != std::string::npos && stat.compare(close + 2, 1, "Z") == 0;
    }
    CgroupUsage usage() const override { return {}; }
    void destroy() override {}
    std::string path() const override { return "test"; }
  };
  struct LateDriver final : CgroupDriver {
    std::string kind() const override { return "v1"; }
    std::unique_ptr<Cgroup> create(const std::string&, const Limits&, CgroupUse) override {
      return std::make_unique<LateGroup>();
    }
  };
  spec.binds.push_back({"/nonexistent-abx-source", "/mnt/abx", false});
  for (bool await_ready : {true, false}) {
    LateDriver driver;
    BoxStartOptions o = options("late-cgroup");
    o.cgroups = &driver;
    o.await_ready = await_ready;
    try {
      auto box = Box::start(spec, o);
      run_piped(*box, {"true"});
      ADD_FAILURE() << "a command ran in a box whose init failed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mounts: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("/nonexistent-abx-source"), std::string::npos) << e.what();
    }
  }
}

// A start that does not wait for init's ready (`agentbox run`'s): the first request gets the
// ready first, or init's start error, named as a start error, not as the command's.
TEST_P(BoxTest, AStartThatDoesNotWaitReportsInitsErrorAtTheFirstRequest) {
  BoxStartOptions o = options("deferred");
  o.await_ready = false;
  auto box = Box::start(spec, o);
  EXPECT_EQ(exit_status(run_piped(*box, {"true"}).status), 0);
  EXPECT_GT(box->landlock_abi(), 0);

  spec.binds.push_back({"/nonexistent-abx-source", "/mnt/abx", false});
  o = options("deferred-bad");
  o.await_ready = false;
  auto bad = Box::start(spec, o);
  try {
    run_piped(*bad, {"true"});
    ADD_FAILURE() << "a command ran in a box whose init failed";
  } catch (const SpawnError& e) {
    ADD_FAILURE() << "the start error was reported as the command's: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("box tester: mounts: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent-abx-source"), std::string::npos) << e.what();
  }
}

TEST_P(BoxTest, PtyModeGivesATerminalOfTheRequestedSize) {
  auto box = Box::start(spec, options("pty"));
  SpawnRequest req;
  req.argv = {"sh", "-c", "tty; stty size; test -t 0 && echo interactive"};
  req.env = {"PATH=/usr/bin:/bin", "TERM=xterm"};
  req.rows = 33;
  req.cols = 101;
  SpawnResult r = box->spawn(req);
  ASSERT_TRUE(r.pty_master);
  std::string out;
  char buf[1024];
  for (;;) {
    pollfd p{r.pty_master.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t n = ::read(r.pty_master.get(), buf, sizeof buf);
    if (n <= 0) break;  // EIO once the command (the only slave holder) exits
    out.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(out.find("/dev/pts/0"), std::string::npos) << out;
  EXPECT_NE(out.find("33 101"), std::string::npos) << out;
  EXPECT_NE(out.find("interactive\r\n"), std::string::npos) << out;
  EXPECT_EQ(exit_status(wait_exit(*box, r.id)), 0);
}

TEST_P(BoxTest, CtrlCInThePtyInterruptsTheForegroundCommand) {
  auto box = Box::start(spec, options("ctrlc"));
  SpawnRequest req;
  req.argv = {"sleep", "100"};
  req.env = {"PATH=/usr/bin:/bin"};
  SpawnResult r = box->spawn(req);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(::write(r.pty_master.get(), "\x03", 1), 1);
  const int st = wait_exit(*box, r.id, 5000);
  ASSERT_TRUE(WIFSIGNALED(st)) << st;
  EXPECT_EQ(WTERMSIG(st), SIGINT);
}

TEST_P(BoxTest, SignalReachesTheWholeProcessGroup) {
  auto box = Box::start(spec, options("signal"));
  int out[2];
  ::pipe2(out, O_CLOEXEC);
  UniqueFd out_r(out[0]), out_w(out[1]);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnRequest req;
  req.argv = {"sh", "-c", "sleep 100 & sleep 100 & echo started; wait"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.tty = false;
  const int fds[3] = {devnull.get(), out_w.get(), devnull.get()};
  SpawnResult r = box->spawn(req, fds);
  out_w.reset();
  char buf[16];
  ASSERT_GT(::read(out_r.get(), buf, sizeof buf), 0);
  EXPECT_EQ(box->process_count(), 3);  // sh and two sleeps
  box->signal(r.id, SIGTERM);
  const int st = wait_exit(*box, r.id, 5000);
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
  for (int i = 0; i < 50 && box->process_count() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(box->process_count(), 0) << "the background sleeps survived the group signal";
}

// A terminal's shell runs its jobs in process groups of their own (job control), all in the
// session the spawn made: the group signal leaves them running, the session signal ends them all.
TEST_P(BoxTest, ASessionSignalReachesJobsInOtherProcessGroups) {
  auto box = Box::start(spec, options("session"));
  int out[2];
  ::pipe2(out, O_CLOEXEC);
  UniqueFd out_r(out[0]), out_w(out[1]);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnRequest req;
  req.argv = {"bash", "-c", "set -m; sleep 300 & sleep 301 & echo started; wait"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.tty = false;
  const int fds[3] = {devnull.get(), out_w.get(), devnull.get()};
  SpawnResult r = box->spawn(req, fds);
  out_w.reset();
  char buf[16];
  ASSERT_GT(::read(out_r.get(), buf, sizeof buf), 0);
  ASSERT_EQ(box->process_count(), 3);  // bash and two sleeps, each sleep a group of its own

  EXPECT_TRUE(box->signal(r.id, SIGKILL, /*whole_session=*/false));
  EXPECT_TRUE(WIFSIGNALED(wait_exit(*box, r.id, 5000)));
  // The shell's exit is seen before its pid leaves the box's count: wait (bounded) for the count.
  for (int i = 0; i < 50 && box->process_count() != 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(box->process_count(), 2) << "control: the jobs' own groups outlive the shell's group signal";

  // The shell is reaped: its session is out of reach by its spawn id, as a reused pid would be.
  EXPECT_FALSE(box->signal(r.id, SIGKILL, /*whole_session=*/true));
  // A new shell whose jobs are in groups of their own; the session signal ends all of them.
  out_w.reset();
  ::pipe2(out, O_CLOEXEC);
  out_r.reset(out[0]);
  out_w.reset(out[1]);
  const int fds2[3] = {devnull.get(), out_w.get(), devnull.get()};
  SpawnResult r2 = box->spawn(req, fds2);
  out_w.reset();
  ASSERT_GT(::read(out_r.get(), buf, sizeof buf), 0);
  ASSERT_EQ(box->process_count(), 5);
  EXPECT_TRUE(box->signal(r2.id, SIGKILL, /*whole_session=*/true));
  EXPECT_TRUE(WIFSIGNALED(wait_exit(*box, r2.id, 5000)));
  for (int i = 0; i < 50 && box->process_count() != 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(box->process_count(), 2) << "the second shell's jobs survived the session signal";
}

// GET /ports's source: the box's TCP listeners with the process holding each.
TEST_P(BoxTest, ListPortsNamesTheBoxsListeners) {
  auto box = Box::start(spec, options("ports"));
  EXPECT_TRUE(box->list_ports().empty());
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnRequest req;
  req.argv = {"python3", "-c",
              "import socket, time\n"
              "s = socket.socket(); s.bind(('127.0.0.1', 8124)); s.listen()\n"
              "t = socket.socket(socket.AF_INET6); t.bind(('::1', 8125)); t.listen()\n"
              "time.sleep(30)"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.tty = false;
  const int fds[3] = {devnull.get(), devnull.get(), devnull.get()};
  box->spawn(req, fds);
  std::vector<protocol::ListeningPort> ports;
  for (int i = 0; i < 100 && ports.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ports = box->list_ports();
  }
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].port, 8124);
  EXPECT_EQ(ports[1].port, 8125);
  for (const auto& p : ports) {
    EXPECT_GT(p.pid, 1);
    EXPECT_EQ(p.name, "python3");
  }
}

TEST_P(BoxTest, CgroupCountsTheBoxAndStopRemovesIt) {
  auto box = Box::start(spec, options("cg"));
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnRequest req;
  req.argv = {"sleep", "100"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.tty = false;
  const int fds[3] = {devnull.get(), devnull.get(), devnull.get()};
  box->spawn(req, fds);
  CgroupUsage u = box->usage();
  EXPECT_GE(u.pids, 2u);  // init + sleep
  EXPECT_GT(u.memory_bytes, 0u);
  const pid_t init = box->init_pid();
  box->stop();
  EXPECT_NE(::kill(init, 0), 0) << "init survived stop()";
  EXPECT_THROW(box->spawn(req, fds), Error);
}

TEST_P(BoxTest, SystemTreeIsReadOnlyWithTheLegacyMountApiToo) {
  for (bool legacy : {false, true}) {
    BoxStartOptions o = options(legacy ? "legacy" : "newapi");
    o.legacy_mount_api = legacy;
    auto box = Box::start(spec, o);
    Output w = run_piped(*box, {"sh", "-c", "touch /usr/x 2>&1; touch /etc/x 2>&1; touch ~/ok && echo home-ok"});
    EXPECT_NE(w.out.find("/usr/x"), std::string::npos) << w.out;
    EXPECT_NE(w.out.find("/etc/x"), std::string::npos) << w.out;
    EXPECT_NE(w.out.find("home-ok"), std::string::npos) << (legacy ? "legacy: " : "new: ") << w.out;
    Output m = run_piped(*box, {"sh", "-c", "grep -E ' /usr | /tmp | /home/tester ' /proc/self/mounts"});
    EXPECT_NE(m.out.find(" /usr "), std::string::npos);
    for (const char* line : {" /usr ", " /tmp ", " /home/tester "}) {
      auto pos = m.out.find(line);
      ASSERT_NE(pos, std::string::npos) << line << " missing in\n" << m.out;
      std::string rest = m.out.substr(pos, m.out.find('\n', pos) - pos);
      EXPECT_NE(rest.find("nosuid"), std::string::npos) << rest;
      EXPECT_NE(rest.find("nodev"), std::string::npos) << rest;
    }
  }
}

TEST_P(BoxTest, EtcNamesTheAccountAndHidesHostSecrets) {
  auto box = Box::start(spec, options("etc"));
  Output o = run_piped(
      *box, {"sh", "-c", "whoami; hostname; ls /etc/shadow 2>&1; ls /etc/sudoers 2>&1; getent passwd tester"});
  EXPECT_NE(o.out.find("tester\ntestbox\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("'/etc/shadow': No such file"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("'/etc/sudoers': No such file"), std::string::npos) << o.out;
  EXPECT_NE(
      o.out.find("tester:x:" + std::to_string(uid) + ":" + std::to_string(uid) + ":tester:/home/tester:/bin/bash"),
      std::string::npos)
      << o.out;
}

// /etc, however it was made (copied by init, built by the parent, cloned from the zygote's
// template): the host's allowlisted files and directories, read-only.
TEST_P(BoxTest, EtcHoldsTheHostsAllowlistedFilesAndDirectoriesReadOnly) {
  auto box = Box::start(spec, options("etc-allow"));
  Output o = run_piped(
      *box, {"sh", "-c", "cat /etc/nsswitch.conf; ls -A /etc/ld.so.conf.d; touch /etc/ld.so.conf.d/x /etc/x 2>&1"});
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/etc/ld.so.conf.d")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  std::string expected = read_file("/etc/nsswitch.conf", 1 << 20);
  for (const auto& n : names) expected += n + "\n";
  expected +=
      "touch: cannot touch '/etc/ld.so.conf.d/x': Read-only file system\n"
      "touch: cannot touch '/etc/x': Read-only file system\n";
  EXPECT_EQ(o.out, expected);
}

// Where /etc comes from, as planned and not a silent fallback: a tmpfs made for the box (exec),
// the zygote's template (a tmpfs too), or the shared snapshot, whose path the mountinfo shows.
TEST_P(BoxTest, EtcComesFromThePlannedSource) {
  auto box = Box::start(spec, options("etc-source"));
  Output o = run_piped(*box, {"sh", "-c", "grep ' /etc ' /proc/self/mountinfo"});
  if (GetParam() == InitWay::exec_snapshot || GetParam() == InitWay::in_place) {
    const std::string snapshots = std::filesystem::path(snapshot_dir()).filename();
    EXPECT_NE(o.out.find("/" + snapshots + "/"), std::string::npos) << o.out;
  } else {
    EXPECT_NE(o.out.find(" - tmpfs "), std::string::npos) << o.out;
  }
}

// A bind into /etc needs a mount point made in /etc, which is read-only when it comes from the
// zygote's template or the parent's tree: such a box gets a copied /etc, and the bind works.
TEST_P(BoxTest, ABindIntoEtcStillWorks) {
  TempHome extra(uid);
  std::ofstream(extra.dir / "f") << "extra\n";
  spec.binds.push_back({extra.dir.string(), "/etc/agentbox-extra", false});
  auto box = Box::start(spec, options("etc-bind"));
  Output o =
      run_piped(*box, {"sh", "-c", "cat /etc/agentbox-extra/f /etc/hostname; getent passwd tester | cut -d: -f1"});
  EXPECT_EQ(o.out, "extra\ntestbox\ntester\n") << o.err;
}

TEST_P(BoxTest, TmpIsPrivateAndSizeLimited) {
  spec.limits.tmp_bytes = 8 << 20;
  auto a = Box::start(spec, options("tmpa"));
  auto b = Box::start(spec, options("tmpb"));
  ASSERT_EQ(exit_status(run_piped(*a, {"sh", "-c", "echo a > /tmp/mine"}).status), 0);
  EXPECT_NE(exit_status(run_piped(*b, {"cat", "/tmp/mine"}).status), 0) << "/tmp is shared between boxes";
  Output big = run_piped(*a, {"sh", "-c", "dd if=/dev/zero of=/tmp/big bs=1M count=16 2>&1"});
  EXPECT_NE(exit_status(big.status), 0);
  EXPECT_NE(big.out.find("No space left"), std::string::npos) << big.out;
  // /dev/shm is a directory of the same tmpfs: what it holds, /tmp cannot take.
  Output shared = run_piped(*a, {"sh", "-c",
                                 "rm /tmp/big; dd if=/dev/zero of=/dev/shm/s bs=1M count=6 2>/dev/null && echo shm ok; "
                                 "dd if=/dev/zero of=/tmp/t bs=1M count=4 2>&1"});
  EXPECT_TRUE(shared.out.starts_with("shm ok\n")) << shared.out;
  EXPECT_NE(shared.out.find("No space left"), std::string::npos) << shared.out;
}

// The devices (major:minor) of the mounts in a mountinfo listing, but /etc's (whose source, and
// so whether it is the box's own tmpfs, depends on the way init is made).
std::set<std::string> mount_devices(const std::string& mountinfo) {
  std::set<std::string> devices;
  for (const MountInfoEntry& e : parse_mountinfo(mountinfo))
    if (e.point != "/etc" && !e.point.starts_with("/etc/")) devices.insert(e.device);
  return devices;
}

// A box makes four superblocks its mount table shows: its root, proc, devpts, and the tmpfs that
// holds /tmp and /dev/shm (its ipc namespace's mqueue is the fifth). Every superblock alive costs
// each memory cgroup on the host a shrinker slot, so their number is part of what a box costs
// (bench/RESULTS.md, "Many users on one node").
TEST_P(BoxTest, ABoxMakesFourSuperblocks) {
  auto box = Box::start(spec, options("superblocks"));
  Output o = run_piped(*box, {"cat", "/proc/self/mountinfo"});
  ASSERT_EQ(exit_status(o.status), 0) << o.err;
  const std::set<std::string> host = mount_devices(read_file("/proc/self/mountinfo"));
  std::vector<std::string> own;
  for (const auto& device : mount_devices(o.out))
    if (!host.contains(device)) own.push_back(device);
  EXPECT_EQ(own.size(), 4u) << o.out;
}

}  // namespace
}  // namespace agentbox
