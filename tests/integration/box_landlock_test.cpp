// Landlock for a box, enforced for real: each test restricts a forked child (root is bound by
// Landlock too) on real directories, sockets and processes, and checks what it can still do.
// Every refusal has a control showing the same operation works without the restriction.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "box/contain/landlock.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace {

namespace ll = agentbox::landlock;
using agentbox::BoxSpec;
using agentbox::UniqueFd;

// ---- running checks in a restricted child -------------------------------------------------

// Runs fn in a forked child; returns its report: "" when every check held, else what failed.
std::string run_in_child(const std::function<std::string()>& fn) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(p[0]);
    std::string report;
    try {
      report = fn();
    } catch (const std::exception& e) {
      report = std::string("exception: ") + e.what();
    }
    const bool sent = report.empty() || write(p[1], report.data(), report.size()) > 0;
    _exit(sent ? 0 : 1);
  }
  close(p[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return "waitpid failed";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    report += " [child ended with status " + std::to_string(status) + "]";
  return report;
}

// Accumulates failed checks in the child.
struct Checks {
  std::string failures;
  // rc is a syscall result; want_errno 0 means it must succeed.
  void expect(const std::string& what, long rc, int want_errno) {
    const int got = rc < 0 ? errno : 0;
    if (got != want_errno) failures += what + ": expected " + name(want_errno) + ", got " + name(got) + "; ";
  }
  static std::string name(int e) {
    if (e == 0) return "success";
    const char* n = strerrorname_np(e);
    return n ? n : std::to_string(e);
  }
};

int restrict_self(const BoxSpec& spec) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw std::runtime_error("no_new_privs");
  return ll::apply_in_child(spec);
}

long open_close(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  return fd;
}

// Temp dirs live under /var/tmp: rules_for grants /tmp read-write, which would cover them.
class LandlockDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/agentbox-landlock-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    for (const char* d : {"home", "system", "other"}) std::filesystem::create_directory(root_ / d);
    write_text(root_ / "system" / "b.txt", "system file");
    write_text(root_ / "other" / "c.txt", "other file");
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  static void write_text(const std::filesystem::path& p, const std::string& text) {
    UniqueFd fd(open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    ASSERT_EQ(write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  std::string path(const char* sub) const { return (root_ / sub).string(); }

  BoxSpec spec() const {
    BoxSpec s;
    s.home_target = path("home");
    s.system_paths.push_back(path("system"));
    return s;
  }

  std::filesystem::path root_;
};

// ---- the kernel ----------------------------------------------------------------------------

// Scoping (ABI 6) is part of the box's promise; a kernel without it is a failure here.
TEST(Landlock, KernelOffersScopedAbi) { EXPECT_GE(ll::abi_version(), 6); }

// ---- files -----------------------------------------------------------------------------------

TEST_F(LandlockDirs, HomeWritableSystemReadOnlyOthersClosed) {
  const std::string home = path("home"), sys = path("system"), other = path("other");
  BoxSpec s = spec();
  s.binds.push_back({"", "/nonexistent-agentbox-landlock", true});  // missing: skipped
  const std::string report = run_in_child([&] {
    Checks c;
    // Controls, before the restriction: root reads and writes everywhere.
    c.expect("control: read other/c.txt", open_close(other + "/c.txt", O_RDONLY), 0);
    c.expect("control: create in system", open_close(sys + "/control", O_WRONLY | O_CREAT), 0);

    const int abi = restrict_self(s);
    if (abi != std::min(ll::abi_version(), 7)) c.failures += "enforced ABI " + std::to_string(abi) + "; ";

    // Home: create, write, rename across directories (REFER), truncate, remove.
    c.expect("create home/new", open_close(home + "/new", O_WRONLY | O_CREAT), 0);
    c.expect("mkdir home/sub", mkdir((home + "/sub").c_str(), 0700), 0);
    c.expect("rename into home/sub", rename((home + "/new").c_str(), (home + "/sub/new").c_str()), 0);
    c.expect("truncate home/sub/new", truncate((home + "/sub/new").c_str(), 0), 0);
    c.expect("unlink home/sub/new", unlink((home + "/sub/new").c_str()), 0);
    c.expect("rmdir home/sub", rmdir((home + "/sub").c_str()), 0);
    // System path: readable, never writable.
    c.expect("read system/b.txt", open_close(sys + "/b.txt", O_RDONLY), 0);
    c.expect("list system", open_close(sys, O_RDONLY | O_DIRECTORY), 0);
    c.expect("write system/b.txt", open_close(sys + "/b.txt", O_WRONLY), EACCES);
    c.expect("create in system", open_close(sys + "/new", O_WRONLY | O_CREAT), EACCES);
    c.expect("unlink in system", unlink((sys + "/control").c_str()), EACCES);
    // A directory in no rule: contents neither readable nor writable.
    c.expect("read other/c.txt", open_close(other + "/c.txt", O_RDONLY), EACCES);
    c.expect("create in other", open_close(other + "/new", O_WRONLY | O_CREAT), EACCES);
    // The root can be listed (`ls /`), nothing more.
    c.expect("list /", open_close("/", O_RDONLY | O_DIRECTORY), 0);
    c.expect("create in /", open_close("/agentbox-landlock-probe", O_WRONLY | O_CREAT), EACCES);
    // Devices: /dev/null writable, a pty usable with its ioctls (ABI 5 handles IOCTL_DEV).
    c.expect("write /dev/null", open_close("/dev/null", O_WRONLY | O_TRUNC), 0);
    const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    c.expect("open /dev/ptmx", master, 0);
    if (master >= 0) {
      c.expect("unlockpt", unlockpt(master), 0);
      const char* pts = ptsname(master);
      const int slave = pts ? open(pts, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
      c.expect("open pty slave", slave, 0);
      winsize ws{};
      termios tio{};
      if (slave >= 0) {
        c.expect("TIOCGWINSZ on the pty", ioctl(slave, TIOCGWINSZ, &ws), 0);
        c.expect("tcgetattr on the pty", tcgetattr(slave, &tio), 0);
        close(slave);
      }
      close(master);
    }
    c.expect("create in /dev", open_close("/dev/agentbox-landlock-probe", O_WRONLY | O_CREAT), EACCES);
    // /etc and /proc: readable, not writable.
    c.expect("read /etc/hostname", open_close("/etc/hostname", O_RDONLY), 0);
    c.expect("read /proc/self/status", open_close("/proc/self/status", O_RDONLY), 0);
    c.expect("write /proc/self/comm", open_close("/proc/self/comm", O_WRONLY), EACCES);
    return c.failures;
  });
  EXPECT_EQ(report, "");
  EXPECT_FALSE(std::filesystem::exists(root_ / "system" / "new"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "other" / "new"));
}

TEST_F(LandlockDirs, ReadOnlyAndWritableBinds) {
  BoxSpec s = spec();
  std::filesystem::create_directory(root_ / "rw");
  std::filesystem::create_directory(root_ / "ro");
  s.binds.push_back({"", path("rw"), true});
  s.binds.push_back({"", path("ro"), false});
  const std::string rw = path("rw"), ro = path("ro");
  const std::string report = run_in_child([&] {
    Checks c;
    restrict_self(s);
    c.expect("create in writable bind", open_close(rw + "/f", O_WRONLY | O_CREAT), 0);
    c.expect("list read-only bind", open_close(ro, O_RDONLY | O_DIRECTORY), 0);
    c.expect("create in read-only bind", open_close(ro + "/f", O_WRONLY | O_CREAT), EACCES);
    return c.failures;
  });
  EXPECT_EQ(report, "");
}

// A rule path that exists but cannot be opened is an error, not a silent skip.
TEST_F(LandlockDirs, UnopenableRulePathFails) {
  BoxSpec s = spec();
  s.binds.push_back({"", path("system") + "/b.txt/below-a-file", false});
  const std::string report = run_in_child([&]() -> std::string {
    try {
      restrict_self(s);
    } catch (const agentbox::Error& e) {
      return e.code() == ENOTDIR ? "" : std::string("wrong error: ") + e.what();
    }
    return "apply_in_child accepted a path below a file";
  });
  EXPECT_EQ(report, "");
}

// ---- network -------------------------------------------------------------------------------

UniqueFd tcp_listener(uint16_t& port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (!fd || bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd.get(), 8) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return UniqueFd();
  port = ntohs(a.sin_port);
  return fd;
}

long tcp_connect(uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
}

// No TCP rule (DESIGN §3): the box's network namespace, holding only its `lo`, is the boundary,
// and its programs must reach their own servers there on any port. A ruleset that handled TCP
// connect would refuse every port without a rule (EACCES), as it did before.
TEST_F(LandlockDirs, TcpConnectIsLeftToTheNetworkNamespace) {
  uint16_t one = 0, another = 0;
  UniqueFd l1 = tcp_listener(one), l2 = tcp_listener(another);
  ASSERT_TRUE(l1 && l2);
  const BoxSpec s = spec();
  const std::string other = path("other");
  const std::string report = run_in_child([&] {
    Checks c;
    restrict_self(s);
    c.expect("connect to a loopback port", tcp_connect(one), 0);
    c.expect("connect to another loopback port", tcp_connect(another), 0);
    // Control: the domain is in force.
    c.expect("read other/c.txt", open_close(other + "/c.txt", O_RDONLY), EACCES);
    return c.failures;
  });
  EXPECT_EQ(report, "");
}

// ---- scoping: signals and abstract unix sockets (ABI 6) ----------------------------------------

TEST_F(LandlockDirs, SignalsStayInsideTheDomain) {
  const pid_t sibling = fork();  // started before the restriction, outside the domain
  ASSERT_GE(sibling, 0);
  if (sibling == 0) {
    pause();
    _exit(0);
  }
  const BoxSpec s = spec();
  const std::string report = run_in_child([&] {
    Checks c;
    c.expect("control: signal 0 to sibling before restriction", kill(sibling, 0), 0);
    restrict_self(s);
    c.expect("SIGTERM to sibling outside the domain", kill(sibling, SIGTERM), EPERM);
    c.expect("signal 0 to parent outside the domain", kill(getppid(), 0), EPERM);
    const pid_t inner = fork();  // inherits the domain
    if (inner == 0) {
      pause();
      _exit(0);
    }
    c.expect("fork inside the domain", inner, 0);
    if (inner > 0) {
      c.expect("SIGKILL to a process inside the domain", kill(inner, SIGKILL), 0);
      waitpid(inner, nullptr, 0);
    }
    return c.failures;
  });
  EXPECT_EQ(report, "");
  // The sibling survived the attempt; then it is ended here.
  EXPECT_EQ(waitpid(sibling, nullptr, WNOHANG), 0);
  kill(sibling, SIGKILL);
  waitpid(sibling, nullptr, 0);
}

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract namespace
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

UniqueFd abstract_listener(const std::string& name) {
  socklen_t len = 0;
  const sockaddr_un a = abstract_address(name, len);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd || bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0 || listen(fd.get(), 8) != 0)
    return UniqueFd();
  return fd;
}

long abstract_connect(const std::string& name) {
  socklen_t len = 0;
  const sockaddr_un a = abstract_address(name, len);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), len);
}

TEST_F(LandlockDirs, AbstractUnixSocketsStayInsideTheDomain) {
  const std::string outside = "agentbox-landlock-outside-" + std::to_string(getpid());
  UniqueFd listener = abstract_listener(outside);
  ASSERT_TRUE(listener);
  const BoxSpec s = spec();
  const std::string report = run_in_child([&] {
    Checks c;
    c.expect("control: connect before restriction", abstract_connect(outside), 0);
    restrict_self(s);
    c.expect("connect to a socket bound outside the domain", abstract_connect(outside), EPERM);
    const std::string inside = "agentbox-landlock-inside-" + std::to_string(getpid());
    UniqueFd own = abstract_listener(inside);
    c.expect("bind inside the domain", own ? 0 : -1, 0);
    c.expect("connect to a socket bound inside the domain", abstract_connect(inside), 0);
    return c.failures;
  });
  EXPECT_EQ(report, "");
}

// ---- rules_for (pure) ------------------------------------------------------------------------

}  // namespace

namespace agentbox::landlock {
void PrintTo(Access a, std::ostream* os) {
  switch (a) {
    case Access::read_only: *os << "read_only"; return;
    case Access::read_write: *os << "read_write"; return;
    case Access::device: *os << "device"; return;
    case Access::list_only: *os << "list_only"; return;
  }
}
}  // namespace agentbox::landlock

namespace {

std::map<std::string, ll::Access> rule_map(const BoxSpec& s) {
  std::map<std::string, ll::Access> m;
  for (const ll::PathRule& r : ll::rules_for(s)) {
    EXPECT_FALSE(m.count(r.path)) << "duplicate rule for " << r.path;
    m[r.path] = r.access;
  }
  return m;
}

TEST(LandlockRules, WhatABoxGets) {
  BoxSpec s;
  s.home_target = "/home/alice";
  s.system_paths = {"/usr", "/opt"};
  s.binds = {{"/srv/data", "/data", true}, {"/srv/ref", "/ref", false}};
  const std::map<std::string, ll::Access> expected = {
      {"/", ll::Access::list_only},
      {"/usr", ll::Access::read_only},
      {"/opt", ll::Access::read_only},
      {"/etc", ll::Access::read_only},
      {"/proc", ll::Access::read_only},
      {"/dev", ll::Access::device},
      {"/home/alice", ll::Access::read_write},
      {"/tmp", ll::Access::read_write},
      {"/dev/shm", ll::Access::read_write},
      {"/data", ll::Access::read_write},
      {"/ref", ll::Access::read_only},
  };
  EXPECT_EQ(rule_map(s), expected);
}

// A rule on "/" covers the whole tree below it: it may only ever allow listing.
TEST(LandlockRules, RootIsListOnly) {
  BoxSpec s;
  s.home_target = "/home/bob";
  for (const ll::PathRule& r : ll::rules_for(s)) {
    if (r.path == "/") {
      EXPECT_EQ(r.access, ll::Access::list_only);
    }
  }
}

TEST(LandlockRules, DefaultSystemTreeIsReadOnly) {
  BoxSpec s;
  s.home_target = "/home/carol";
  const auto m = rule_map(s);
  for (const std::string& p : BoxSpec{}.system_paths) {
    ASSERT_TRUE(m.count(p)) << p;
    EXPECT_EQ(m.at(p), ll::Access::read_only) << p;
  }
  size_t writable = 0;
  for (const auto& [p, a] : m) writable += a == ll::Access::read_write;
  EXPECT_EQ(writable, 3u);  // home, /tmp, /dev/shm
}

TEST(LandlockRules, NoHomeNoHomeRule) {
  BoxSpec s;
  for (const ll::PathRule& r : ll::rules_for(s)) EXPECT_FALSE(r.path.empty());
}

}  // namespace
