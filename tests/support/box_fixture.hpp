#pragma once
// Shared by the box integration tests: a temp home owned by a test uid, a spec for it, a
// cgroup driver, and small helpers to run a command in pipes mode and collect its output.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>

#include "box/box.hpp"
#include "box/cgroup.hpp"
#include "box/zygote.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::testing {

// A uid per test process and counter, far from real users and from the default range.
inline uid_t test_uid() {
  static std::atomic<int> n{0};
  return 3000000 + (static_cast<uid_t>(::getpid()) % 10000) * 10 + n++;
}

struct TempHome {
  std::filesystem::path dir;
  explicit TempHome(uid_t uid) {
    char tmpl[] = "/tmp/abx-home-XXXXXX";
    dir = ::mkdtemp(tmpl);
    ::chown(dir.c_str(), uid, uid);
    ::chmod(dir.c_str(), 0700);
  }
  ~TempHome() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

inline BoxSpec make_spec(uid_t uid, const std::string& home) {
  BoxSpec s;
  s.name = "tester";
  s.hostname = "testbox";
  s.uid = s.gid = uid;
  s.identity = IdentityMode::host_uid;
  s.home_source = home;
  s.home_target = "/home/tester";
  s.limits.pids = 256;
  s.limits.memory_bytes = 256ull << 20;
  return s;
}

inline std::unique_ptr<CgroupDriver>& cgroup_driver() {
  static std::unique_ptr<CgroupDriver> d = CgroupDriver::detect();
  return d;
}

// One zygote per test process, as the daemon has one (see BoxManager).
inline Zygote& test_zygote() {
  static std::unique_ptr<Zygote> z = Zygote::start(default_init_path());
  return *z;
}

inline BoxStartOptions start_options(const std::string& tag) {
  static std::atomic<int> n{0};
  BoxStartOptions o;
  o.init_path = default_init_path();
  o.cgroups = cgroup_driver().get();
  o.cgroup_name = "test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
  return o;
}

struct Output {
  std::string out, err;
  int status = -1;  // raw wait status
};

// Waits for the exit of spawn `id` on box (other events are dropped).
inline int wait_exit(Box& box, uint64_t id, int timeout_ms = 10000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{box.event_fd(), POLLIN, 0};
    ::poll(&p, 1, 100);
    bool gone = false;
    for (const auto& e : box.read_events(&gone))
      if (e.id == id) return e.status;
    if (gone) return -2;
  }
  return -1;
}

inline std::string drain(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// Runs req in the box with pipes (req.tty is ignored), feeding `input` on stdin.
inline Output run_request(Box& box, SpawnRequest req, const std::string& input = {}) {
  int in[2], out[2], err[2];
  ::pipe2(in, O_CLOEXEC);
  ::pipe2(out, O_CLOEXEC);
  ::pipe2(err, O_CLOEXEC);
  UniqueFd in_r(in[0]), in_w(in[1]), out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]);
  req.tty = false;
  const int fds[3] = {in_r.get(), out_w.get(), err_w.get()};
  SpawnResult r = box.spawn(req, fds);
  in_r.reset();
  out_w.reset();
  err_w.reset();
  if (!input.empty()) (void)!::write(in_w.get(), input.data(), input.size());
  in_w.reset();
  Output o;
  o.out = drain(out_r.get());
  o.err = drain(err_r.get());
  o.status = wait_exit(box, r.id);
  return o;
}

inline SpawnRequest piped_request(std::vector<std::string> argv, std::vector<std::string> env = {},
                                  std::string cwd = {}) {
  SpawnRequest req;
  req.argv = std::move(argv);
  req.env = env.empty() ? std::vector<std::string>{"PATH=/usr/bin:/bin", "HOME=/home/tester"} : std::move(env);
  req.cwd = std::move(cwd);
  req.tty = false;
  return req;
}

// Runs argv in the box with pipes, feeding `input` on stdin.
inline Output run_piped(Box& box, std::vector<std::string> argv, std::vector<std::string> env = {},
                        std::string cwd = {}, const std::string& input = {}) {
  return run_request(box, piped_request(std::move(argv), std::move(env), std::move(cwd)), input);
}

inline int exit_status(int raw) { return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw); }

}  // namespace agentbox::testing
