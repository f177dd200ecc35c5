// api_bench: `agentbox serve` measured from the outside, over its HTTP API, the way clients use it.
//   exec      POST /execute?wait=5 of `true` until done (polling status if it says "running"):
//             p50/p99 latency and execs/s at 1, 8 and 32 clients (HTTP/1.1 keep-alive, one
//             connection and one user per client thread, boxes warmed up first), against a
//             bwrap one-shot of /bin/true timed here by fork+exec+wait. The 1-client rounds
//             alternate with the one-shots, so that the load of a busy machine hits both alike.
//   longpoll  long-polls (GET /execute/{id}/status?wait=60&offset=0) parked on processes that
//             wait for input, all on one asio thread: the daemon's RSS once they are parked,
//             then, per long-poll, the delay from its process's input POST returning to its answer;
//             once with every input sent at once (burst), once paced (--input-gaps)
//   view      GET /files/view of a 1 GiB file, against cat of the same host file (both warm in
//             the page cache), alternating, median of N; downloaded by curl and by a recv(2)
//             client with a 4 MiB buffer (curl's 16 KiB reads cost as much CPU as the copy);
//             and, as the loopback ceiling, the same file from a minimal sendfile(2) server
//             in this process through both clients
//   fairness  (only when asked for) one user's 4 concurrent greps, in a loop, over N sparse
//             16 MiB files, while another user calls GET /files/list every 20 ms for --seconds:
//             the second user's p50/p99/max latency, on one line
//   firstexec (only when asked for) N users never seen before arrive at once (--crowds 1,10,50),
//             each with its first POST /execute?wait=20 of `true`, which starts that user's box:
//             p50/p99/max of those first execs over --rounds crowds of each size
//   flood     (only when asked for) one user's exec round trip of `true`, alone and while
//             another user runs --floods commands that write output as fast as they can:
//             p50/p99 both ways
// The daemon is started (and stopped) by bench/api_bench.sh; this program only talks to it.
//
//   api_bench --port P --pid DAEMON_PID --state DIR [--only exec,longpoll,view,fairness,firstexec,flood]
//             [--clients 1,8,32] [--seconds 10] [--rounds 5] [--oneshots 100]
//             [--procs 100] [--users 10] [--polls 5000] [--input-gaps 0,20]
//             [--view-runs 5] [--view-mib 1024] [--sparse-files 300] [--crowds 1,10,50]
//             [--floods 4]
// The API key comes from AGENTBOX_API_KEY.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "box/box_env.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

extern char** environ;

namespace {

using namespace agentbox;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The same sandbox as bench/oneshot.sh: namespaces and mounts only.
const std::vector<std::string> kBwrapTrue = {"bwrap",     "--unshare-all", "--die-with-parent",
                                             "--ro-bind", "/usr",          "/usr",
                                             "--symlink", "usr/lib",       "/lib",
                                             "--symlink", "usr/lib64",     "/lib64",
                                             "--symlink", "usr/bin",       "/bin",
                                             "--proc",    "/proc",         "--dev",
                                             "/dev",      "/bin/true"};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Nearest-rank percentile (p in 0..100) of a copy of the samples.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size()) + 0.999999);
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One line of a result table.
void row(const std::string& metric, const std::string& value, const std::string& target = "",
         const std::string& met = "") {
  std::cout << fmt::format("  {:<58} {:>12}  {:<16} {}\n", metric, value, target, met) << std::flush;
}
void header() { row("metric", "value", "target", "met"); }
std::string yes_no(bool ok) { return ok ? "yes" : "NO"; }
std::string ms(double v) { return fmt::format("{:.2f} ms", v); }

// The daemon, seen through /proc.
struct Daemon {
  pid_t pid = 0;

  // CPU time of all its threads so far, ms (utime+stime of /proc/PID/stat, in clock ticks).
  double cpu_ms() const {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
    std::string f;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i)
      if (i == 14 || i == 15) ticks += std::stod(f);
    return ticks * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

  // VmRSS, KiB.
  uint64_t rss_kib() const {
    std::ifstream in(fmt::format("/proc/{}/status", pid));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    throw Error(fmt::format("no VmRSS in /proc/{}/status (daemon gone?)", pid));
  }
};

// CPU time of every box the daemon has started, ms: the boxes' cgroups (cpuacct.usage on v1,
// cpu.stat usage_usec on v2) count their inits and every command run in them.
double boxes_cpu_ms(pid_t daemon_pid) {
  const std::string prefix = fmt::format("box-{}-", daemon_pid);
  double total = 0;
  for (const auto& [dir, file, scale] : {std::tuple{"/sys/fs/cgroup/cpuacct/agentbox", "cpuacct.usage", 1e-6},
                                         std::tuple{"/sys/fs/cgroup/agentbox", "cpu.stat", 1e-3}}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
      std::ifstream in(e.path() / file);
      std::string word;
      double v = 0;
      if (std::string(file) == "cpu.stat") {
        while (in >> word >> v && word != "usage_usec") v = 0;
      } else {
        in >> v;
      }
      total += v * scale;
    }
  }
  return total;
}

// CPU time of this process (all its threads), ms.
double self_cpu_ms() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  double total = 0;
  for (const timeval& tv : {ru.ru_utime, ru.ru_stime})
    total += static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
  return total;
}

struct Endpoint {
  std::string host = "127.0.0.1";
  unsigned short port = 0;
  std::string key;
};

template <class Body>
void set_common(http::request<Body>& req, const Endpoint& ep, const std::string& user) {
  req.set(http::field::host, fmt::format("{}:{}", ep.host, ep.port));
  req.set(http::field::authorization, "Bearer " + ep.key);
  req.set("X-User-Id", user);
}

struct Reply {
  unsigned status = 0;
  json body;
  std::string detail() const {
    if (body.is_object() && body.contains("detail")) return body["detail"].dump();
    return body.dump();
  }
};

// A synchronous HTTP/1.1 client on one keep-alive connection (reopened if the server closes it).
class Client {
 public:
  explicit Client(Endpoint ep) : ep_(std::move(ep)), sock_(ioc_) {}

  Reply call(http::verb verb, const std::string& target, const std::string& user, const json& body = nullptr) {
    if (!sock_.is_open()) {
      sock_.connect(tcp::endpoint(asio::ip::make_address(ep_.host), ep_.port));
      sock_.set_option(tcp::no_delay(true));
    }
    http::request<http::string_body> req{verb, target, 11};
    set_common(req, ep_, user);
    if (!body.is_null()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body.dump();
    }
    req.prepare_payload();
    http::write(sock_, req);
    http::response<http::string_body> res;
    http::read(sock_, buf_, res);
    if (!res.keep_alive()) sock_.close();
    return Reply{res.result_int(), json::parse(res.body(), nullptr, /*allow_exceptions=*/false)};
  }

  // Starts `command` and waits for the end: POST with wait, then status long-polls while it runs.
  json run(const std::string& user, json exec_body, int wait_s) {
    Reply r = call(http::verb::post, fmt::format("/execute?wait={}", wait_s), user, exec_body);
    if (r.status != 200) throw Error(fmt::format("POST /execute: {} {}", r.status, r.detail()));
    const std::string id = r.body.value("id", "");
    while (r.body.value("status", "") == "running") {
      r = call(http::verb::get, "/execute/" + id + "/status?wait=60", user);
      if (r.status != 200) throw Error(fmt::format("GET /execute/{}/status: {} {}", id, r.status, r.detail()));
    }
    if (r.body.value("status", "") != "done")
      throw Error(fmt::format("/execute {}: ended as {}", exec_body.dump(), r.body.dump()));
    return r.body;
  }

 private:
  Endpoint ep_;
  asio::io_context ioc_;
  tcp::socket sock_;
  beast::flat_buffer buf_;
};

struct RunTime {
  double wall_ms = 0;
  double cpu_ms = 0;  // user+system of the command (and the children it waited for)
};

// Runs argv (PATH lookup) with stdin and stderr on /dev/null and stdout on out_fd (or
// /dev/null), waits for it. Throws if it does not exit 0.
// env: the command's environment (default: this process's).
RunTime spawn_timed(const std::vector<std::string>& argv, int out_fd = -1,
                    const std::vector<std::string>* env = nullptr) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  auto t0 = Clock::now();
  std::vector<char*> envp;
  if (env) {
    for (const auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), env ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    errno = rc;
    throw sys_error("posix_spawnp(" + argv[0] + ")");
  }
  int status = 0;
  rusage ru{};
  check(::wait4(pid, &status, 0, &ru), "wait4(" + argv[0] + ")");
  RunTime t;
  t.wall_ms = ms_between(t0, Clock::now());
  for (const timeval& tv : {ru.ru_utime, ru.ru_stime})
    t.cpu_ms += static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format("{} failed (wait status {:#x})", argv[0], status));
  return t;
}
double spawn_wait(const std::vector<std::string>& argv) { return spawn_timed(argv).wall_ms; }

// As spawn_wait, and returns what the command wrote to stdout (small outputs only).
std::pair<RunTime, std::string> spawn_capture(const std::vector<std::string>& argv) {
  int p[2];
  check(::pipe2(p, O_CLOEXEC), "pipe2");
  UniqueFd rd(p[0]), wr(p[1]);
  RunTime t = spawn_timed(argv, wr.get());
  wr.reset();
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(rd.get(), buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return {t, out};
}

// ---------------------------------------------------------------------------------------------
// 1. exec round trip

struct LevelResult {
  std::vector<double> latencies_ms;
  double elapsed_ms = 0;
  double daemon_cpu_ms = 0;
  double boxes_cpu_ms = 0;   // inits and commands
  double client_cpu_ms = 0;  // this process: HTTP client and JSON
};

// `clients` threads, each with its own connection and user, run `true` for `seconds` after a
// warm-up of 3 execs each (the first one starts the user's box).
LevelResult exec_level(const Endpoint& ep, const Daemon& daemon, int clients, double seconds) {
  std::latch ready(clients), go(1);
  std::vector<std::vector<double>> samples(clients);
  std::vector<Clock::time_point> finished(clients);
  std::mutex mu;
  std::string failure;
  std::atomic<Clock::rep> deadline{0};  // Clock ticks; 0 stops every client
  const json body = {{"command", "true"}};

  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const std::string user = fmt::format("bench-exec-{}", c);
      bool counted = false;
      try {
        Client client(ep);
        for (int i = 0; i < 3; ++i) client.run(user, body, 5);
        ready.count_down();
        counted = true;
        go.wait();
        while (Clock::now().time_since_epoch().count() < deadline.load()) {
          auto t0 = Clock::now();
          client.run(user, body, 5);
          auto t1 = Clock::now();
          samples[c].push_back(ms_between(t0, t1));
          finished[c] = t1;
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (failure.empty()) failure = fmt::format("client {}: {}", c, e.what());
        if (!counted) ready.count_down();
        deadline = 0;  // the others stop after their current request
      }
    });
  }
  ready.wait();
  const double cpu0 = daemon.cpu_ms(), boxes0 = boxes_cpu_ms(daemon.pid), self0 = self_cpu_ms();
  auto t0 = Clock::now();
  deadline = (t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)))
                 .time_since_epoch()
                 .count();
  go.count_down();
  for (auto& t : threads) t.join();
  if (!failure.empty()) throw Error("exec level " + std::to_string(clients) + ": " + failure);

  LevelResult r;
  r.daemon_cpu_ms = daemon.cpu_ms() - cpu0;
  r.boxes_cpu_ms = boxes_cpu_ms(daemon.pid) - boxes0;
  r.client_cpu_ms = self_cpu_ms() - self0;
  auto last = t0;
  for (int c = 0; c < clients; ++c) {
    r.latencies_ms.insert(r.latencies_ms.end(), samples[c].begin(), samples[c].end());
    last = std::max(last, finished[c]);
  }
  r.elapsed_ms = ms_between(t0, last);
  return r;
}

void bench_exec(const Endpoint& ep, const Daemon& daemon, const std::vector<int>& levels, double seconds, int rounds,
                int oneshots) {
  std::cout << fmt::format(
      "exec round trip: POST /execute?wait=5 {{\"command\":\"true\"}} (pty, the default) until done;\n"
      "  {} s per level; the 1-client level in {} rounds alternating with {} bwrap one-shots\n",
      seconds, rounds, oneshots);
  header();
  // What the box runs for `true`, here on the host with the box's environment (box_env.cpp):
  // the part of the boxes' CPU per exec that is the shell itself, not the box.
  const std::vector<std::string> bash_true = {"/bin/bash", "-c", "true"};
  const std::vector<std::string> box_like_env = {std::string("PATH=") + kBoxPath, "LANG=C.UTF-8", "HOME=/tmp",
                                                 "TERM=xterm-256color"};
  std::vector<double> bwrap_ms, true_ms, bash_cpu;
  double p50_one = 0, best_rate = 0;
  const auto ncores = std::thread::hardware_concurrency();
  for (int clients : levels) {
    LevelResult all;
    const int level_rounds = clients == levels.front() ? rounds : 1;
    for (int r = 0; r < level_rounds; ++r) {
      if (clients == levels.front()) {
        for (int i = 0; i < oneshots / rounds; ++i) {
          bwrap_ms.push_back(spawn_wait(kBwrapTrue));
          true_ms.push_back(spawn_wait({"/bin/true"}));
          bash_cpu.push_back(spawn_timed(bash_true, -1, &box_like_env).cpu_ms);
        }
      }
      LevelResult part = exec_level(ep, daemon, clients, seconds / level_rounds);
      all.latencies_ms.insert(all.latencies_ms.end(), part.latencies_ms.begin(), part.latencies_ms.end());
      all.elapsed_ms += part.elapsed_ms;
      all.daemon_cpu_ms += part.daemon_cpu_ms;
      all.boxes_cpu_ms += part.boxes_cpu_ms;
      all.client_cpu_ms += part.client_cpu_ms;
    }
    const double n = static_cast<double>(all.latencies_ms.size());
    const double rate = n / (all.elapsed_ms / 1000.0);
    const double p50 = percentile(all.latencies_ms, 50);
    if (clients == levels.front()) p50_one = p50;
    best_rate = std::max(best_rate, rate);
    row(fmt::format("{:>2} client(s): execs done", clients), fmt::format("{:.0f}", n));
    row(fmt::format("{:>2} client(s): latency p50", clients), ms(p50));
    row(fmt::format("{:>2} client(s): latency p99", clients), ms(percentile(all.latencies_ms, 99)));
    row(fmt::format("{:>2} client(s): execs/s", clients), fmt::format("{:.1f}", rate));
    const double per = 1.0 / std::max(n, 1.0);
    const double cpu = (all.daemon_cpu_ms + all.boxes_cpu_ms + all.client_cpu_ms) * per;
    row(fmt::format("{:>2} client(s): CPU per exec: daemon + boxes + client", clients),
        fmt::format("{:.1f}+{:.1f}+{:.1f} ms", all.daemon_cpu_ms * per, all.boxes_cpu_ms * per,
                    all.client_cpu_ms * per));
    row(fmt::format("{:>2} client(s): CPU-bound ceiling, {} cores all ours", clients, ncores),
        fmt::format("{:.0f}/s", ncores * 1000.0 / std::max(cpu, 1e-3)));
  }
  const double bwrap = median(bwrap_ms);
  row("bwrap one-shot /bin/true (fork+exec+wait), median", ms(bwrap));
  row("bwrap one-shot /bin/true, p90", ms(percentile(bwrap_ms, 90)));
  row("plain /bin/true (fork+exec+wait), median (load gauge)", ms(median(true_ms)));
  row("CPU of `bash -c true` on the host (box env), median", ms(median(bash_cpu)));
  row(fmt::format("exec p50 at {} client / bwrap median", levels.front()), fmt::format("{:.2f}x", p50_one / bwrap),
      "<= 0.5x", yes_no(p50_one <= 0.5 * bwrap));
  row("execs/s, best level", fmt::format("{:.1f}", best_rate), ">= 500/s", yes_no(best_rate >= 500));
}

// ---------------------------------------------------------------------------------------------
// 2. long-polls parked on running processes

// One long-poll connection, driven by the fleet's single asio thread.
struct Poll {
  explicit Poll(asio::io_context& ioc) : sock(ioc) {}
  tcp::socket sock;
  beast::flat_buffer buf;
  http::request<http::empty_body> req;
  http::response<http::string_body> res;
  size_t proc = 0;
  Clock::time_point answered_at;
  bool ok = false;
};

// N long-polls opened with a bounded window of connects in flight (a burst of thousands of SYNs
// would overflow the listen backlog and measure SYN retries instead).
class PollFleet {
 public:
  PollFleet(Endpoint ep, size_t window) : ep_(std::move(ep)), window_(window) {}

  void add(const std::string& target, const std::string& user, size_t proc) {
    auto p = std::make_unique<Poll>(ioc_);
    p->req = {http::verb::get, target, 11};
    set_common(p->req, ep_, user);
    p->proc = proc;
    polls_.push_back(std::move(p));
  }

  void start() {
    thread_ = std::thread([this] {
      for (size_t i = 0; i < std::min(window_, polls_.size()); ++i) open_next();
      ioc_.run();
    });
  }
  void stop() {
    guard_.reset();
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }
  ~PollFleet() { stop(); }

  size_t size() const { return polls_.size(); }
  size_t sent() const { return sent_.load(); }
  size_t answered() const { return answered_.load(); }
  size_t failed() const { return failed_.load(); }
  std::string first_error() {
    std::lock_guard lock(mu_);
    return first_error_;
  }
  // Read after stop() (or once answered()+failed() == size()).
  const std::vector<std::unique_ptr<Poll>>& polls() const { return polls_; }

 private:
  void open_next() {
    if (next_ >= polls_.size()) return;
    Poll* p = polls_[next_++].get();
    p->sock.async_connect(tcp::endpoint(asio::ip::make_address(ep_.host), ep_.port),
                          [this, p](beast::error_code ec) { on_connect(p, ec); });
  }
  void on_connect(Poll* p, beast::error_code ec) {
    if (ec) return fail(p, "connect", ec, true);
    p->sock.set_option(tcp::no_delay(true), ec);
    http::async_write(p->sock, p->req, [this, p](beast::error_code ec2, size_t) { on_write(p, ec2); });
  }
  void on_write(Poll* p, beast::error_code ec) {
    if (ec) return fail(p, "write", ec, true);
    ++sent_;
    open_next();
    http::async_read(p->sock, p->buf, p->res, [this, p](beast::error_code ec2, size_t) { on_read(p, ec2); });
  }
  void on_read(Poll* p, beast::error_code ec) {
    p->answered_at = Clock::now();
    if (ec) return fail(p, "read", ec, false);
    p->ok = p->res.result_int() == 200 && p->res.body().find("got-x") != std::string::npos;
    if (!p->ok) note_error(fmt::format("answer {}: {}", p->res.result_int(), p->res.body().substr(0, 300)));
    // The connection stays open, as a client's that polls again would: closing it here would
    // put both sides' teardown on the path of the answers still to come.
    ++(p->ok ? answered_ : failed_);
  }
  void fail(Poll* p, const char* what, beast::error_code ec, bool open_another) {
    note_error(fmt::format("{}: {}", what, ec.message()));
    p->sock.close();
    ++failed_;
    if (open_another) open_next();
  }
  void note_error(std::string e) {
    std::lock_guard lock(mu_);
    if (first_error_.empty()) first_error_ = std::move(e);
  }

  Endpoint ep_;
  size_t window_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_ = asio::make_work_guard(ioc_);
  std::vector<std::unique_ptr<Poll>> polls_;
  size_t next_ = 0;  // io thread only
  std::atomic<size_t> sent_{0}, answered_{0}, failed_{0};
  std::mutex mu_;
  std::string first_error_;
  std::thread thread_;
};

// Waits until pred() or timeout; true if pred() held.
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout) {
  auto end = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// gap_ms: pause between two processes' input POSTs. 0 is a burst: every process gets its
// input within milliseconds, so the last answers wait for the daemon to write all before them.
void bench_longpoll(const Endpoint& ep, const Daemon& daemon, size_t procs, size_t users, size_t polls, int gap_ms) {
  std::cout << fmt::format(
      "long-polls: {} processes (`read x; echo got-$x`, pipes) over {} users, {} long-polls\n"
      "  GET /execute/{{id}}/status?wait=60&offset=0 ({} per process) on one asio thread;\n"
      "  then input to each process, {}\n",
      procs, users, polls, polls / procs,
      gap_ms == 0 ? std::string("all at once (burst)") : fmt::format("one every {} ms (paced)", gap_ms));
  header();
  const uint64_t rss_idle = daemon.rss_kib();
  Client setup(ep);
  struct Proc {
    std::string user, id;
    Clock::time_point input_returned;
  };
  std::vector<Proc> ps(procs);
  auto t_start = Clock::now();
  for (size_t i = 0; i < procs; ++i) {
    ps[i].user = fmt::format("bench-lp-{}", i % users);
    Reply r =
        setup.call(http::verb::post, "/execute", ps[i].user, {{"command", "read x; echo got-$x"}, {"pty", false}});
    if (r.status != 200 || r.body.value("status", "") != "running")
      throw Error(fmt::format("POST /execute (process {}): {} {}", i, r.status, r.detail()));
    ps[i].id = r.body.value("id", "");
  }
  row("start the processes (boxes included), total", ms(ms_between(t_start, Clock::now())));
  const uint64_t rss_procs = daemon.rss_kib();

  PollFleet fleet(ep, 256);
  for (size_t k = 0; k < polls; ++k) {
    const Proc& p = ps[k % procs];
    fleet.add("/execute/" + p.id + "/status?wait=60&offset=0", p.user, k % procs);
  }
  double cpu0 = daemon.cpu_ms();
  auto t_open = Clock::now();
  fleet.start();
  if (!wait_for([&] { return fleet.sent() + fleet.failed() >= polls; }, std::chrono::seconds(120)))
    throw Error(fmt::format("only {} of {} long-polls sent after 120 s", fleet.sent(), polls));
  if (fleet.failed() > 0) throw Error(fmt::format("{} long-polls failed: {}", fleet.failed(), fleet.first_error()));
  // Parked = the daemon has read and registered every request: its CPU time stops moving.
  double cpu_prev = -1;
  int still = 0;
  for (int i = 0; i < 100 && still < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    double cpu = daemon.cpu_ms();
    still = cpu == cpu_prev ? still + 1 : 0;
    cpu_prev = cpu;
  }
  const double park_ms = ms_between(t_open, Clock::now()) - 500;  // minus the quiet period
  const double park_cpu = daemon.cpu_ms() - cpu0;
  const uint64_t rss_parked = daemon.rss_kib();
  const size_t early = fleet.answered() + fleet.failed();
  row("long-polls sent and parked", fmt::format("{}", fleet.sent()), fmt::format("{}", polls),
      yes_no(fleet.sent() == polls && early == 0));
  row("answered before any input (should be 0)", fmt::format("{}", early));
  row("time to open and park them all (approx.)", ms(park_ms));
  row("daemon CPU to accept and park them", ms(park_cpu));
  row("daemon RSS before the processes (after exec bench)", fmt::format("{:.1f} MiB", rss_idle / 1024.0));
  row("daemon RSS with the processes running", fmt::format("{:.1f} MiB", rss_procs / 1024.0));
  row("daemon RSS with all long-polls parked", fmt::format("{:.1f} MiB", rss_parked / 1024.0), "< 200 MiB",
      yes_no(rss_parked < 200 * 1024));
  row("  growth per parked long-poll",
      fmt::format("{:.1f} KiB",
                  (static_cast<double>(rss_parked) - static_cast<double>(rss_procs)) / static_cast<double>(polls)));

  Client input(ep);
  const double cpu1 = daemon.cpu_ms(), self1 = self_cpu_ms();
  auto t_inputs = Clock::now();
  for (auto& p : ps) {
    if (gap_ms > 0 && &p != &ps.front()) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    Reply r = input.call(http::verb::post, "/execute/" + p.id + "/input", p.user, {{"input", "x\n"}});
    p.input_returned = Clock::now();
    if (r.status != 200) throw Error(fmt::format("POST /execute/{}/input: {} {}", p.id, r.status, r.detail()));
  }
  const double inputs_ms = ms_between(t_inputs, Clock::now());
  wait_for([&] { return fleet.answered() + fleet.failed() >= polls; }, std::chrono::seconds(70));
  const double answer_cpu = daemon.cpu_ms() - cpu1, answer_self = self_cpu_ms() - self1;
  fleet.stop();

  std::vector<double> delays;
  size_t before = 0;
  for (const auto& p : fleet.polls()) {
    if (!p->ok) continue;
    double d = ms_between(ps[p->proc].input_returned, p->answered_at);
    if (d < 0) ++before;
    delays.push_back(d);
  }
  row("input POSTs, all processes one after another", ms(inputs_ms));
  row("long-polls answered with the output", fmt::format("{}", delays.size()), fmt::format("{}", polls),
      yes_no(delays.size() == polls));
  if (delays.size() != polls) row("  first failure", fleet.first_error());
  row("delay input POST returned -> answer, p50", ms(percentile(delays, 50)));
  row("delay, p99", ms(percentile(delays, 99)));
  const double worst = delays.empty() ? 0 : *std::max_element(delays.begin(), delays.end());
  row("delay, max", ms(worst), "<= 50 ms", yes_no(!delays.empty() && worst <= 50));
  row("  answers that arrived before their POST returned", fmt::format("{}", before));
  Clock::time_point last_answer = t_inputs;
  for (const auto& p : fleet.polls()) last_answer = std::max(last_answer, p->answered_at);
  row("first input POST -> last answer", ms(ms_between(t_inputs, last_answer)));
  row("CPU, first input -> last answer: daemon + client", fmt::format("{:.0f}+{:.0f} ms", answer_cpu, answer_self));
}

// ---------------------------------------------------------------------------------------------
// 3. /files/view against cat

// A minimal HTTP server that answers every request with one file through sendfile(2): what
// a server can reach over loopback to curl on this machine, so the daemon's own cost can be
// told from the transport's and curl's.
class SendfileServer {
 public:
  explicit SendfileServer(std::string path) : path_(std::move(path)) {
    listen_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listen_) throw sys_error("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    check(::bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), "bind(127.0.0.1:0)");
    check(::listen(listen_.get(), 16), "listen");
    socklen_t len = sizeof addr;
    check(::getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&addr), &len), "getsockname");
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~SendfileServer() {
    ::shutdown(listen_.get(), SHUT_RDWR);  // accept() returns EINVAL: the thread ends
    thread_.join();
  }
  unsigned short port() const { return port_; }

 private:
  void serve() {
    for (;;) {
      UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) return;
      try {
        std::string head;
        char buf[4096];
        while (head.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = ::read(conn.get(), buf, sizeof buf);
          if (n <= 0) break;
          head.append(buf, static_cast<size_t>(n));
        }
        UniqueFd file(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
        struct stat st {};
        if (!file || ::fstat(file.get(), &st) != 0) continue;
        write_all(conn.get(),
                  fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", st.st_size));
        for (off_t off = 0; off < st.st_size;)
          if (::sendfile(conn.get(), file.get(), &off, static_cast<size_t>(st.st_size - off)) <= 0) break;
      } catch (const std::exception&) {
        // The client went away: next connection.
      }
    }
  }

  std::string path_;
  UniqueFd listen_;
  unsigned short port_ = 0;
  std::thread thread_;
};

// A download client that is not the bottleneck: one GET over a fresh connection, the body read
// with recv(2) into a 4 MiB buffer and dropped (curl reads 16 KiB at a time and spends as much
// CPU as the copy itself). Wall and CPU time of the whole exchange; throws unless 200 and all
// `expect_bytes` arrived.
RunTime raw_download(unsigned short port, const std::string& target, const std::vector<std::string>& headers,
                     off_t expect_bytes) {
  static std::vector<char> buf(4 << 20);
  rusage r0{}, r1{};
  ::getrusage(RUSAGE_THREAD, &r0);
  const auto t0 = Clock::now();
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock) throw sys_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  check(::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), "connect(127.0.0.1)");
  std::string request = fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n", target, port);
  for (const auto& h : headers) request += h + "\r\n";
  write_all(sock.get(), request + "\r\n");
  std::string head;
  size_t body = 0, end = std::string::npos;
  while (end == std::string::npos) {
    const ssize_t n = ::recv(sock.get(), buf.data(), 65536, 0);
    if (n <= 0) throw Error("raw download: connection closed in the headers");
    head.append(buf.data(), static_cast<size_t>(n));
    end = head.find("\r\n\r\n");
  }
  if (head.rfind("HTTP/1.1 200", 0) != 0) throw Error("raw download: " + head.substr(0, head.find('\r')));
  body = head.size() - end - 4;
  for (ssize_t n; (n = ::recv(sock.get(), buf.data(), buf.size(), 0)) > 0;) body += static_cast<size_t>(n);
  RunTime t;
  t.wall_ms = ms_between(t0, Clock::now());
  ::getrusage(RUSAGE_THREAD, &r1);
  auto ms_of = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
  };
  t.cpu_ms = ms_of(r1.ru_utime) - ms_of(r0.ru_utime) + ms_of(r1.ru_stime) - ms_of(r0.ru_stime);
  if (body != static_cast<size_t>(expect_bytes))
    throw Error(fmt::format("raw download: {} bytes, not {}", body, expect_bytes));
  return t;
}

void bench_view(const Endpoint& ep, const Daemon& daemon, const std::string& state_dir, int runs, int mib) {
  const std::string user = "bench-view";
  std::cout << fmt::format(
      "file download: GET /files/view of a {} MiB file (curl -o /dev/null) vs cat of it\n"
      "  to /dev/null, alternating, warm page cache, median of {}\n",
      mib, runs);
  header();
  Client client(ep);
  json done = client.run(
      user, {{"command", fmt::format("head -c {}M /dev/zero > big && echo $HOME", mib)}, {"pty", false}}, 300);
  std::string home;
  for (const auto& chunk : done["output"])
    if (chunk.value("type", "") == "stdout") home += chunk.value("data", "");
  home = home.substr(0, home.find('\n'));
  const std::string host_file = state_dir + "/volumes/" + home.substr(home.rfind('/') + 1) + "/home/big";
  struct stat st {};
  check(::stat(host_file.c_str(), &st), "stat(" + host_file + ")");
  const double bytes = static_cast<double>(st.st_size);
  if (st.st_size != static_cast<off_t>(mib) << 20)
    throw Error(fmt::format("{} is {} bytes, not {} MiB", host_file, st.st_size, mib));

  const std::vector<std::string> cat = {"cat", host_file};
  // curl's output: "STATUS BYTES".
  auto curl_of = [](const std::string& url, const std::vector<std::string>& headers) {
    std::vector<std::string> argv = {"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}"};
    for (const auto& h : headers) argv.insert(argv.end(), {"-H", h});
    argv.push_back(url);
    return argv;
  };
  const auto curl = curl_of(fmt::format("http://{}:{}/files/view?path=big", ep.host, ep.port),
                            {"Authorization: Bearer " + ep.key, "X-User-Id: " + user});
  spawn_wait(cat);  // warm the page cache
  const std::string probe = spawn_capture(curl).second;
  if (probe.rfind("200 ", 0) != 0) {
    Reply r =
        probe.rfind("404 ", 0) == 0 ? client.call(http::verb::get, "/files/view?path=nothing-here", user) : Reply{};
    row("GET /files/view", "skipped", "", fmt::format("answered {} {}", probe, r.detail()));
    return;
  }
  SendfileServer reference(host_file);
  const auto curl_ref = curl_of(fmt::format("http://127.0.0.1:{}/big", reference.port()), {});
  std::vector<double> cat_ms, view_ms, ref_ms, cat_cpu, curl_cpu, daemon_cpu;
  std::vector<double> raw_view_ms, raw_ref_ms, raw_cpu, raw_daemon_cpu;
  const std::vector<std::string> auth = {"Authorization: Bearer " + ep.key, "X-User-Id: " + user};
  for (int i = 0; i < runs; ++i) {
    raw_ref_ms.push_back(raw_download(reference.port(), "/big", {}, st.st_size).wall_ms);
    const double raw_cpu0 = daemon.cpu_ms();
    RunTime raw = raw_download(ep.port, "/files/view?path=big", auth, st.st_size);
    raw_daemon_cpu.push_back(daemon.cpu_ms() - raw_cpu0);
    raw_view_ms.push_back(raw.wall_ms);
    raw_cpu.push_back(raw.cpu_ms);
    auto [tr, ref_out] = spawn_capture(curl_ref);
    if (ref_out != fmt::format("200 {}", st.st_size)) throw Error("curl of the sendfile reference: " + ref_out);
    ref_ms.push_back(tr.wall_ms);
    RunTime tc = spawn_timed(cat);
    cat_ms.push_back(tc.wall_ms);
    cat_cpu.push_back(tc.cpu_ms);
    const double cpu0 = daemon.cpu_ms();
    auto [tv, out] = spawn_capture(curl);
    daemon_cpu.push_back(daemon.cpu_ms() - cpu0);
    if (out != fmt::format("200 {}", st.st_size)) throw Error("curl /files/view: " + out);
    view_ms.push_back(tv.wall_ms);
    curl_cpu.push_back(tv.cpu_ms);
  }
  const double cat_rate = bytes / (1 << 20) / (median(cat_ms) / 1000);
  const double view_rate = bytes / (1 << 20) / (median(view_ms) / 1000);
  row("cat to /dev/null, median", ms(median(cat_ms)));
  row("cat throughput", fmt::format("{:.0f} MiB/s", cat_rate));
  row("GET /files/view with curl, median", ms(median(view_ms)));
  row("/files/view throughput", fmt::format("{:.0f} MiB/s", view_rate));
  const double ref_rate = bytes / (1 << 20) / (median(ref_ms) / 1000);
  row("reference: minimal sendfile(2) server -> curl, median", ms(median(ref_ms)));
  row("reference throughput", fmt::format("{:.0f} MiB/s ({:.0f}% of cat)", ref_rate, 100 * ref_rate / cat_rate));
  row("CPU per run: cat", ms(median(cat_cpu)));
  row("CPU per run: daemon + curl", fmt::format("{:.0f}+{:.0f} ms", median(daemon_cpu), median(curl_cpu)));
  row("/files/view / cat throughput (curl)", fmt::format("{:.0f}%", 100 * view_rate / cat_rate));
  row("/files/view / reference throughput (curl)", fmt::format("{:.0f}%", 100 * view_rate / ref_rate));
  const double raw_rate = bytes / (1 << 20) / (median(raw_view_ms) / 1000);
  const double raw_ref_rate = bytes / (1 << 20) / (median(raw_ref_ms) / 1000);
  row("GET /files/view with a recv(4 MiB) client, median", ms(median(raw_view_ms)));
  row("/files/view throughput (recv client)", fmt::format("{:.0f} MiB/s", raw_rate));
  row("reference: sendfile(2) server -> recv client",
      fmt::format("{:.0f} MiB/s ({:.0f}% of cat)", raw_ref_rate, 100 * raw_ref_rate / cat_rate));
  row("CPU per run: daemon + recv client", fmt::format("{:.0f}+{:.0f} ms", median(raw_daemon_cpu), median(raw_cpu)));
  row("/files/view / cat throughput (recv client)", fmt::format("{:.0f}%", 100 * raw_rate / cat_rate), ">= 70%",
      yes_no(raw_rate >= 0.7 * cat_rate));
  row("/files/view / reference throughput (recv client)", fmt::format("{:.0f}%", 100 * raw_rate / raw_ref_rate));
}

// ---------------------------------------------------------------------------------------------
// 4. fair sharing of the file routes

// Files that cost their owner no disk and a reader 16 MiB of zeros each: the cheapest way for one
// user to make greps slow. While that user greps them (as many at once as the file routes have
// threads), another user's GET /files/list should not wait for those greps.
void bench_fairness(const Endpoint& ep, int files, double seconds) {
  constexpr int kGreps = 4;
  const std::string alice = "bench-fair-alice", bob = "bench-fair-bob";
  std::cout << fmt::format(
      "fair sharing: {} concurrent greps by one user over {} sparse 16 MiB files, in a loop;\n"
      "  another user's GET /files/list every 20 ms meanwhile, {} s\n",
      kGreps, files, seconds);
  Client client(ep);
  client.run(alice,
             {{"command", fmt::format("mkdir -p fair && cd fair && for i in $(seq 1 {}); do "
                                      "truncate -s 16M f$i; done",
                                      files)},
              {"pty", false}},
             300);
  Reply warm = client.call(http::verb::get, "/files/list", bob);  // bob's account exists before timing
  if (warm.status != 200) throw Error(fmt::format("GET /files/list: {} {}", warm.status, warm.detail()));

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string failure;
  std::vector<std::vector<double>> grep_ms(kGreps);
  std::vector<std::thread> greps;
  for (int g = 0; g < kGreps; ++g) {
    greps.emplace_back([&, g] {
      try {
        Client c(ep);
        while (!stop) {
          auto t0 = Clock::now();
          Reply r = c.call(http::verb::get, "/files/grep?query=needle&path=fair", alice);
          if (r.status != 200) throw Error(fmt::format("GET /files/grep: {} {}", r.status, r.detail()));
          grep_ms[g].push_back(ms_between(t0, Clock::now()));
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (failure.empty()) failure = e.what();
        stop = true;
      }
    });
  }
  std::vector<double> list_ms;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  try {
    Client c(ep);
    while (!stop && Clock::now() < end) {
      auto t0 = Clock::now();
      Reply r = c.call(http::verb::get, "/files/list", bob);
      if (r.status != 200) throw Error(fmt::format("GET /files/list: {} {}", r.status, r.detail()));
      list_ms.push_back(ms_between(t0, Clock::now()));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mu);
    if (failure.empty()) failure = e.what();
  }
  const double elapsed_s = ms_between(start, Clock::now()) / 1000;
  stop = true;
  for (auto& t : greps) t.join();
  if (!failure.empty()) throw Error("fairness: " + failure);

  std::vector<double> all_greps;
  for (const auto& g : grep_ms) all_greps.insert(all_greps.end(), g.begin(), g.end());
  const double p99 = percentile(list_ms, 99);
  std::cout << fmt::format(
                   "  other user's GET /files/list: p50 {} p99 {} max {} ({} calls in {:.1f} s); "
                   "greps done {} (median {}); p99 < 250 ms: {}\n",
                   ms(percentile(list_ms, 50)), ms(p99),
                   ms(list_ms.empty() ? 0 : *std::max_element(list_ms.begin(), list_ms.end())), list_ms.size(),
                   elapsed_s, all_greps.size(), ms(median(all_greps)), yes_no(!list_ms.empty() && p99 < 250))
            << std::flush;
}

// ---------------------------------------------------------------------------------------------
// 5. first exec of users arriving at once

void bench_firstexec(const Endpoint& ep, const std::vector<int>& crowds, int rounds) {
  std::cout << fmt::format(
      "first exec: N new users at once, each POST /execute?wait=20 of `true` (its box starts);\n"
      "  {} crowd(s) of each size\n",
      rounds);
  // Names no earlier run used: each user's first exec is its box's start.
  const std::string nonce = fmt::format("{:x}", Clock::now().time_since_epoch().count() & 0xffffffff);
  for (int n : crowds) {
    std::vector<double> samples, walls;
    for (int r = 0; r < rounds; ++r) {
      std::vector<std::vector<double>> took(n);
      std::latch ready(n), go(1);
      std::mutex mu;
      std::string failure;
      std::vector<std::thread> threads;
      for (int i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
          const std::string user = fmt::format("bench-first-{}-{}-{}-{}", nonce, n, r, i);
          try {
            Client c(ep);
            c.call(http::verb::get, "/health", user);  // connected before the start line
            ready.count_down();
            go.wait();
            auto t0 = Clock::now();
            c.run(user, {{"command", "true"}}, 20);
            took[i].push_back(ms_between(t0, Clock::now()));
          } catch (const std::exception& e) {
            std::lock_guard lock(mu);
            if (failure.empty()) failure = fmt::format("user {}: {}", user, e.what());
          }
        });
      }
      ready.wait();
      auto t0 = Clock::now();
      go.count_down();
      for (auto& t : threads) t.join();
      walls.push_back(ms_between(t0, Clock::now()));
      if (!failure.empty()) throw Error("firstexec: " + failure);
      for (const auto& t : took) samples.insert(samples.end(), t.begin(), t.end());
    }
    std::cout << fmt::format(
                     "  {:>2} users at once: first exec p50 {} p99 {} max {} ({} samples); all done in {} (median)\n",
                     n, ms(percentile(samples, 50)), ms(percentile(samples, 99)),
                     ms(*std::max_element(samples.begin(), samples.end())), samples.size(), ms(median(walls)))
              << std::flush;
  }
}

// ---------------------------------------------------------------------------------------------
// 6. one user's output flood against another's answers

// Round trips of `true` for `user`, sequential, for `seconds`.
std::vector<double> exec_round_trips(const Endpoint& ep, const std::string& user, double seconds) {
  Client c(ep);
  std::vector<double> out;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    auto t0 = Clock::now();
    c.run(user, {{"command", "true"}}, 5);
    out.push_back(ms_between(t0, Clock::now()));
  }
  return out;
}

void bench_flood(const Endpoint& ep, int floods, double seconds) {
  const std::string flooder = "bench-flood-alice", victim = "bench-flood-bob";
  std::cout << fmt::format(
      "output flood: one user's exec round trip of `true`, alone and while another user's {}\n"
      "  commands write output as fast as they can (pipes), {} s each\n",
      floods, seconds);
  Client a(ep);
  a.run(flooder, {{"command", "true"}}, 20);
  exec_round_trips(ep, victim, 1);  // the victim's box is up
  const std::vector<double> quiet = exec_round_trips(ep, victim, seconds);
  std::vector<std::string> ids;
  for (int i = 0; i < floods; ++i) {
    Reply r = a.call(
        http::verb::post, "/execute", flooder,
        {{"command", "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"}, {"pty", false}});
    if (r.status != 200) throw Error(fmt::format("POST /execute (flood): {} {}", r.status, r.detail()));
    ids.push_back(r.body.value("id", ""));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<double> flooded;
  uint64_t bytes_before = 0, bytes_after = 0;
  for (const auto& id : ids)
    bytes_before +=
        a.call(http::verb::get, "/execute/" + id + "/status?tail=1", flooder).body.value("next_offset", uint64_t{0});
  auto t0 = Clock::now();
  std::string failure;
  try {
    flooded = exec_round_trips(ep, victim, seconds);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const double flood_s = ms_between(t0, Clock::now()) / 1000;
  for (const auto& id : ids)
    bytes_after +=
        a.call(http::verb::get, "/execute/" + id + "/status?tail=1", flooder).body.value("next_offset", uint64_t{0});
  for (const auto& id : ids) a.call(http::verb::delete_, "/execute/" + id + "?force=true", flooder);
  if (!failure.empty()) throw Error("flood: " + failure);
  std::cout << fmt::format("  alone:   p50 {} p99 {} ({} execs)\n", ms(percentile(quiet, 50)),
                           ms(percentile(quiet, 99)), quiet.size())
            << fmt::format("  flooded: p50 {} p99 {} ({} execs) while the flood read {:.0f} MiB/s into the logs\n",
                           ms(percentile(flooded, 50)), ms(percentile(flooded, 99)), flooded.size(),
                           static_cast<double>(bytes_after - bytes_before) / (1 << 20) / flood_s)
            << std::flush;
}

void raise_nofile() {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  if (out.empty()) throw std::invalid_argument("empty list");
  return out;
}

constexpr const char* kUsage =
    "usage: api_bench --port P --pid DAEMON_PID --state DIR\n"
    "       [--only exec,longpoll,view,fairness,firstexec,flood]\n"
    "       [--clients 1,8,32] [--seconds 10] [--rounds 5] [--oneshots 100]\n"
    "       [--procs 100] [--users 10] [--polls 5000] [--input-gaps 0,20]\n"
    "       [--view-runs 5] [--view-mib 1024] [--sparse-files 300] [--crowds 1,10,50]\n"
    "       [--floods 4]\n"
    "       (API key from AGENTBOX_API_KEY)\n";

}  // namespace

int main(int argc, char** argv) {
  Endpoint ep;
  Daemon daemon;
  std::string state_dir, only = "exec,longpoll,view", clients = "1,8,32", gaps = "0,20", crowds = "1,10,50";
  double seconds = 10;
  int rounds = 5, oneshots = 100, view_runs = 5, view_mib = 1024, sparse_files = 300, floods = 4;
  size_t procs = 100, users = 10, polls = 5000;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--port")
        ep.port = static_cast<unsigned short>(std::stoi(value()));
      else if (a == "--pid")
        daemon.pid = std::stoi(value());
      else if (a == "--state")
        state_dir = value();
      else if (a == "--only")
        only = value();
      else if (a == "--clients")
        clients = value();
      else if (a == "--seconds")
        seconds = std::stod(value());
      else if (a == "--rounds")
        rounds = std::stoi(value());
      else if (a == "--oneshots")
        oneshots = std::stoi(value());
      else if (a == "--procs")
        procs = std::stoul(value());
      else if (a == "--users")
        users = std::stoul(value());
      else if (a == "--polls")
        polls = std::stoul(value());
      else if (a == "--input-gaps")
        gaps = value();
      else if (a == "--view-runs")
        view_runs = std::stoi(value());
      else if (a == "--view-mib")
        view_mib = std::stoi(value());
      else if (a == "--sparse-files")
        sparse_files = std::stoi(value());
      else if (a == "--crowds")
        crowds = value();
      else if (a == "--floods")
        floods = std::stoi(value());
      else
        throw std::invalid_argument("unknown option " + a);
    }
    if (ep.port == 0 || daemon.pid <= 0 || state_dir.empty())
      throw std::invalid_argument("--port, --pid and --state are required");
    if (rounds < 1 || procs == 0 || users == 0 || polls < procs || sparse_files < 1)
      throw std::invalid_argument("--rounds, --procs, --users, --sparse-files must be positive and --polls >= --procs");
    const char* key = std::getenv("AGENTBOX_API_KEY");
    if (!key || !*key) throw std::invalid_argument("AGENTBOX_API_KEY is not set");
    ep.key = key;
  } catch (const std::exception& e) {
    std::cerr << "api_bench: " << e.what() << "\n" << kUsage;
    return 2;
  }
  raise_nofile();
  auto wanted = [&](const char* s) { return ("," + only + ",").find(std::string(",") + s + ",") != std::string::npos; };
  try {
    if (wanted("exec")) bench_exec(ep, daemon, int_list(clients), seconds, rounds, oneshots);
    if (wanted("longpoll"))
      for (int gap : int_list(gaps)) bench_longpoll(ep, daemon, procs, users, polls, gap);
    if (wanted("view")) bench_view(ep, daemon, state_dir, view_runs, view_mib);
    if (wanted("fairness")) bench_fairness(ep, sparse_files, seconds);
    if (wanted("firstexec")) bench_firstexec(ep, int_list(crowds), rounds);
    if (wanted("flood")) bench_flood(ep, floods, seconds);
  } catch (const std::exception& e) {
    std::cerr << "api_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
