// `agentbox run` as a person uses it: exit codes, one-line errors, binds, --cwd, the hidden
// caller home, environment rules, the profile file, signals, an ordinary (non-root) caller, and
// a real terminal (tmux) with ctrl-C, job control and resize.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace {

namespace fs = std::filesystem;
const std::string kAgentbox = AGENTBOX_BUILD_DIR "/agentbox";

struct Result {
  int code = -1;
  std::string out, err;
};

// Runs argv with HOME=home (and optionally as uid), capturing output; bounded by timeout_s.
Result run(std::vector<std::string> argv, const std::string& home, uid_t as_uid = 0, const std::string& cwd = "/",
           std::vector<std::string> extra_env = {}, int timeout_s = 60) {
  int out[2], err[2];
  ::pipe2(out, O_CLOEXEC);
  ::pipe2(err, O_CLOEXEC);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::setsid();  // no controlling terminal: pipes mode
    ::chdir(cwd.c_str());
    if (as_uid) {
      ::setgroups(0, nullptr);
      if (::setresgid(as_uid, as_uid, as_uid) || ::setresuid(as_uid, as_uid, as_uid)) ::_exit(99);
    }
    ::alarm(timeout_s);
    std::vector<std::string> env = {"HOME=" + home, "PATH=/usr/bin:/bin", "SECRET_TOKEN=hunter2"};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(s.data());
    e.push_back(nullptr);
    ::execve(a[0], a.data(), e.data());
    ::_exit(98);
  }
  ::close(out[1]);
  ::close(err[1]);
  Result r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) r.out.append(buf, n);
  while ((n = ::read(err[0], buf, sizeof buf)) > 0) r.err.append(buf, n);
  ::close(out[0]);
  ::close(err[0]);
  int st;
  ::waitpid(pid, &st, 0);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

struct TempDir {
  fs::path path;
  TempDir() {
    char t[] = "/tmp/abx-cli-XXXXXX";
    path = ::mkdtemp(t);
    ::chmod(path.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<std::string> box(std::vector<std::string> rest) {
  std::vector<std::string> a = {kAgentbox, "run"};
  a.insert(a.end(), rest.begin(), rest.end());
  return a;
}

TEST(RunCli, ExitCodeIsTheCommands) {
  TempDir home;
  EXPECT_EQ(run(box({"--", "true"}), home.path).code, 0);
  EXPECT_EQ(run(box({"--", "sh", "-c", "exit 42"}), home.path).code, 42);
  EXPECT_EQ(run(box({"--", "sh", "-c", "kill -TERM $$"}), home.path).code, 128 + SIGTERM);
  Result nf = run(box({"--", "no-such-cmd"}), home.path);
  EXPECT_EQ(nf.code, 127);
  EXPECT_EQ(nf.err, "agentbox: no-such-cmd: command not found\n");
}

TEST(RunCli, BadInputIsOneLineAndExitTwo) {
  TempDir home;
  for (const auto& args : std::vector<std::vector<std::string>>{{"--memory", "12Q", "--", "true"},
                                                                {"--pids", "-3", "--", "true"},
                                                                {"--cpu", "lots", "--", "true"},
                                                                {"--ptys", "0", "--", "true"},
                                                                {"--tcp-memory", "4K", "--", "true"},
                                                                {"--bogus", "--", "true"},
                                                                {"--bind", "/no/such/path", "--", "true"},
                                                                {"--net", "host", "--", "true"},
                                                                {"--env", "NOEQUALS", "--", "true"},
                                                                {},
                                                                {"--shell", "--", "true"}}) {
    Result r = run(box(args), home.path);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.err.starts_with("agentbox: ")) << r.err;
  }
  EXPECT_NE(run(box({"--bind", "/no/such/path", "--", "true"}), home.path).err.find("/no/such/path"),
            std::string::npos);
}

TEST(RunCli, WordsAfterDashesAreTheCommandsNotOptions) {
  TempDir home;
  Result r = run(box({"--", "echo", "--bind", "/:/host", "--memory", "1G"}), home.path);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "--bind /:/host --memory 1G\n");
}

TEST(RunCli, CallerHomeIsHiddenAndBoxHomeIsDefault) {
  TempDir home;
  std::ofstream(home.path / "private.txt") << "mine";
  Result r = run(box({"--", "sh", "-c", "echo $HOME; ls " + home.path.string() + " 2>&1; touch ~/made"}), home.path);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("/home/agent\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("No such file"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(home.path / ".agentbox-home" / "made"));
}

TEST(RunCli, BindsRoBindsAndCwd) {
  TempDir home, data, work;
  ::chown(work.path.c_str(), 1000000, 1000000);  // as root, the box runs as uid 1000000
  std::ofstream(data.path / "in.txt") << "data";
  Result r = run(
      box({"--ro-bind", data.path.string() + ":/data", "--bind", work.path.string(), "--", "sh", "-c",
           "cat /data/in.txt; echo; touch /data/x 2>&1 | grep -c Read-only; echo w > " + work.path.string() + "/out"}),
      home.path);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "data\n1\n");
  EXPECT_TRUE(fs::exists(work.path / "out"));

  Result c = run(box({"--cwd", "--", "sh", "-c", "pwd; touch here"}), home.path, 0, work.path);
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, work.path.string() + "\n");
}

TEST(RunCli, OnlyChosenEnvironmentReachesTheBox) {
  TempDir home;
  Result r = run(box({"--env", "A=1", "--", "sh", "-c", "echo ${SECRET_TOKEN:-unset} $A"}), home.path);
  EXPECT_EQ(r.out, "unset 1\n");
  Result p = run(box({"--pass-env", "SECRET_TOKEN", "--", "sh", "-c", "echo $SECRET_TOKEN"}), home.path);
  EXPECT_EQ(p.out, "hunter2\n");
}

TEST(RunCli, ProfileFileAddsBindsEnvAndRejectsUnknownKeys) {
  TempDir home, data;
  std::ofstream(data.path / "f") << "profiled";
  fs::create_directories(home.path / ".config/agentbox");
  std::ofstream(home.path / ".config/agentbox/run.toml")
      << "ro_bind = [\"" << data.path.string() << ":/ref\"]\n[env]\nFROM_PROFILE = \"yes\"\n";
  Result r = run(box({"--", "sh", "-c", "cat /ref/f; echo \" $FROM_PROFILE\""}), home.path);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "profiled yes\n");
  EXPECT_EQ(run(box({"--no-profile", "--", "ls", "/ref"}), home.path).code, 2);  // ls: missing

  std::ofstream(home.path / ".config/agentbox/run.toml") << "limitz = 3\n";
  Result bad = run(box({"--", "true"}), home.path);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("limitz"), std::string::npos) << bad.err;
}

TEST(RunCli, SignalsAreForwardedToTheCommand) {
  TempDir home;
  int out[2];
  ::pipe2(out, O_CLOEXEC);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::setsid();
    ::alarm(30);
    std::string h = "HOME=" + home.path.string();
    char* env[] = {h.data(), nullptr};
    ::execle(kAgentbox.c_str(), "agentbox", "run", "--", "sh", "-c",
             "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done", nullptr, env);
    ::_exit(98);
  }
  ::close(out[1]);
  char buf[64] = {};
  ASSERT_GT(::read(out[0], buf, sizeof buf - 1), 0);
  ASSERT_STREQ(buf, "ready\n");
  ::kill(pid, SIGTERM);
  std::string rest;
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) rest.append(buf, n);
  int st;
  ::waitpid(pid, &st, 0);
  EXPECT_EQ(rest, "got-term\n");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);
  ::close(out[0]);
}

TEST(RunCli, OrdinaryUserGetsTheirOwnUidInside) {
  TempDir home;
  ::chown(home.path.c_str(), 65534, 65534);
  Result r = run(box({"--", "sh", "-c", "id -u; touch ~/mine; grep -E '^(Cap(Eff|Bnd)|NoNewPrivs)' /proc/self/status"}),
                 home.path, 65534);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("65534\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapBnd:\t0000000000000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
  struct stat st {};
  ASSERT_EQ(::stat((home.path / ".agentbox-home/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  // Limits need cgroups, which an ordinary user does not have here: refused, not ignored.
  Result lim = run(box({"--memory", "1G", "--", "true"}), home.path, 65534);
  EXPECT_EQ(lim.code, 2);
  EXPECT_NE(lim.err.find("cgroups"), std::string::npos) << lim.err;
  // The box's own devpts needs none: its pty limit holds for anyone (the host's pool is shared).
  Result ptys =
      run(box({"--ptys", "2", "--", "python3", "-c",
               "import os\nfds = []\ntry:\n  [fds.append(os.open('/dev/ptmx', os.O_RDWR)) for _ in range(9)]\n"
               "except OSError as e: print(len(fds), e.errno)"}),
          home.path, 65534);
  EXPECT_EQ(ptys.code, 0) << ptys.err;
  EXPECT_EQ(ptys.out, "2 " + std::to_string(ENOSPC) + "\n");
}

// A box whose init cannot start: exit 125 and a one-line reason, whether init fails before
// or after it took the spec (the command is sent without waiting for init's ready).
// (An init named by $AGENTBOX_INIT is exec'd, not the CLI's copy become init in place.)
TEST(RunCli, ABoxThatCannotStartExits125) {
  TempDir home;
  for (const char* init : {"/bin/false", "/bin/true"}) {
    Result r = run(box({"--", "true"}), home.path, 0, "/", {std::string("AGENTBOX_INIT=") + init});
    EXPECT_EQ(r.code, 125) << init << ": " << r.err;
    EXPECT_EQ(r.err.rfind("agentbox: cannot start the box: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// The box's account name (and so its home, /home/NAME) is the caller's from /etc/passwd; an
// account the file does not know is named by $USER, unless that is no safe login name.
TEST(RunCli, OrdinaryUsersNameComesFromPasswdElseASafeUser) {
  const auto name_and_home = [](uid_t uid, std::vector<std::string> env) {
    TempDir home;
    ::chown(home.path.c_str(), uid, uid);
    Result r = run(box({"--", "sh", "-c", "id -un; echo $HOME; pwd"}), home.path, uid, "/", std::move(env));
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(name_and_home(65534, {"USER=mallory"}), "nobody\n/home/nobody\n/home/nobody\n");
  EXPECT_EQ(name_and_home(64999, {"USER=carol"}), "carol\n/home/carol\n/home/carol\n");
  EXPECT_EQ(name_and_home(64999, {"USER=../../etc"}), "user\n/home/user\n/home/user\n");
  EXPECT_EQ(name_and_home(64999, {}), "user\n/home/user\n/home/user\n");
}

// A real terminal: tmux runs `agentbox run --shell`; keys go in with send-keys.
class Tmux {
 public:
  explicit Tmux(const std::string& cmd) : name_("abx" + std::to_string(::getpid())) {
    sh("tmux -L " + name_ + " new-session -d -s t -x 120 -y 30 '" + cmd + "; echo EXIT=$?; sleep 30'");
  }
  ~Tmux() { sh("tmux -L " + name_ + " kill-server 2>/dev/null"); }
  void keys(const std::string& k) { sh("tmux -L " + name_ + " send-keys -t t " + k); }
  void resize(int x, int y) {
    sh("tmux -L " + name_ + " resize-window -t t -x " + std::to_string(x) + " -y " + std::to_string(y));
  }
  std::string screen() {
    std::string out;
    FILE* p = ::popen(("tmux -L " + name_ + " capture-pane -t t -p -S -100").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    return out;
  }
  bool wait_for(const std::string& text, int ms = 15000) {
    for (int i = 0; i < ms / 100; ++i) {
      if (screen().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

 private:
  static void sh(const std::string& c) { (void)!std::system(c.c_str()); }
  std::string name_;
};

TEST(RunCli, InteractiveShellHandlesCtrlCJobControlAndResize) {
  TempDir home;
  Tmux t("HOME=" + home.path.string() + " " + kAgentbox + " run --shell");
  t.keys("'tty; stty size' Enter");
  ASSERT_TRUE(t.wait_for("30 120")) << t.screen();
  EXPECT_NE(t.screen().find("/dev/pts/0"), std::string::npos);
  t.keys("'sleep 100' Enter");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  t.keys("C-c");
  t.keys("'echo status=$?' Enter");
  ASSERT_TRUE(t.wait_for("status=130")) << t.screen();
  t.keys("'sleep 50' Enter");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  t.keys("C-z");
  ASSERT_TRUE(t.wait_for("Stopped")) << t.screen();
  t.keys("'kill %1' Enter");
  t.resize(90, 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  t.keys("'stty size' Enter");
  ASSERT_TRUE(t.wait_for("20 90")) << t.screen();
  t.keys("'exit 5' Enter");
  ASSERT_TRUE(t.wait_for("EXIT=5")) << t.screen();
}

}  // namespace
