// box_bench: the box engine's own numbers, measured through the Box API the daemon uses.
//   cold    Box::start → ready, then stop, one box after another: the daemon's way (init cloned
//           by the zygote, in the account's network namespace) alternated with `agentbox run`'s
//           (init cloned and exec'd, in a fresh network namespace)
//   warm    spawn /bin/true in one running box (pipes mode) and wait for its exit event,
//           against a plain fork+exec+waitpid of /bin/true in this process
//   density N boxes alive at once (the daemon's way, each in a network namespace of its own):
//           PSS of their inits, kernel memory, 1st vs Nth start time; after a settling pause,
//           so the first boxes do not reuse the kernel objects a phase just before freed
// Must run as root (host_uid boxes with cgroups, like `agentbox run` as root).
//
//   box_bench [--cold N] [--warm N] [--density N] [--settle SECONDS] [--only cold|warm|density]
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "box/box.hpp"
#include "box/cgroup.hpp"
#include "box/contain/netns.hpp"
#include "box/zygote.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace {

using namespace agentbox;
using Clock = std::chrono::steady_clock;

constexpr uid_t kUidBase = 1'500'000;  // far above any host account and agentbox's own range
constexpr const char* kPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// CPU time of the calling thread, ms (precise, unlike rusage's ticks for other processes).
double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// CPU time a live process has run so far, ms: first field of /proc/<pid>/schedstat (ns).
double process_cpu_ms(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/schedstat", pid));
  double ns = 0;
  in >> ns;
  return ns / 1e6;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Nearest-rank percentile (p in 0..100) of a copy of the samples.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size()) + 0.999999);
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}
double median(const std::vector<double>& v) {
  if (v.empty()) return 0;
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// A straight line through y[0..n) against the index, fitted the Theil-Sen way (the median of all
// pairwise slopes, then the median intercept): a few slow outliers on a noisy machine barely move
// it, and it uses every sample, not only the two ends.
struct Trend {
  double slope = 0, intercept = 0;
  double at(size_t i) const { return intercept + slope * static_cast<double>(i); }
};
Trend theil_sen(const std::vector<double>& y) {
  Trend t;
  if (y.size() < 2) return t;
  std::vector<double> slopes;
  slopes.reserve(y.size() * (y.size() - 1) / 2);
  for (size_t i = 0; i < y.size(); ++i) {
    for (size_t j = i + 1; j < y.size(); ++j) slopes.push_back((y[j] - y[i]) / static_cast<double>(j - i));
  }
  t.slope = median(slopes);
  std::vector<double> intercepts;
  intercepts.reserve(y.size());
  for (size_t i = 0; i < y.size(); ++i) intercepts.push_back(y[i] - t.slope * static_cast<double>(i));
  t.intercept = median(intercepts);
  return t;
}

// One line of the result table.
void row(const std::string& metric, const std::string& value, const std::string& target = "",
         const std::string& met = "") {
  std::cout << fmt::format("  {:<58} {:>12}  {:<14} {}\n", metric, value, target, met);
}
std::string yes_no(bool ok) { return ok ? "yes" : "NO"; }

// The temp directory holding every box's home; removed at exit.
class Scratch {
 public:
  Scratch() {
    char tmpl[] = "/tmp/agentbox-bench-XXXXXX";
    if (!::mkdtemp(tmpl)) throw sys_error("mkdtemp");
    dir_ = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // A home owned by uid, as the CLI makes it.
  std::string home(const std::string& name, uid_t uid) const {
    const std::string path = dir_ + "/" + name;
    check(::mkdir(path.c_str(), 0700), "mkdir(" + path + ")");
    check(::chown(path.c_str(), uid, uid), "chown(" + path + ")");
    return path;
  }

 private:
  std::string dir_;
};

// A BoxSpec built the way `agentbox run` builds one as root.
BoxSpec bench_spec(uid_t uid, const std::string& home) {
  BoxSpec spec;
  spec.identity = IdentityMode::host_uid;
  spec.uid = spec.gid = uid;
  spec.name = "bench";
  spec.hostname = "bench";
  spec.home_source = home;
  spec.home_target = "/home/bench";
  spec.use_cgroup = true;
  return spec;
}

class Bench {
 public:
  Bench() {
    std::string why;
    cgroups_ = CgroupDriver::detect("/sys/fs/cgroup", &why);
    if (!cgroups_) throw Error("cgroups unavailable: " + why);
    init_path_ = default_init_path();
  }

  std::string cgroup_kind() const { return cgroups_->kind(); }

  Zygote& zygote() {
    if (!zygote_) zygote_ = Zygote::start(init_path_);
    return *zygote_;
  }

  // The daemon's way: init cloned by the zygote, in the account's persistent network namespace
  // (netns_fd; -1 makes a fresh one, as every new account gets). `agentbox run`'s way: init
  // cloned and exec'd, in a network namespace of its own.
  std::unique_ptr<Box> start(const BoxSpec& spec, int netns_fd = -1, bool daemon_way = true) {
    BoxStartOptions opts;
    opts.init_path = init_path_;
    opts.netns_fd = netns_fd;
    if (daemon_way) opts.zygote = &zygote();
    opts.cgroups = cgroups_.get();
    if (!daemon_way) opts.cgroup_use = CgroupUse::limits_only;  // as `agentbox run` does
    opts.cgroup_name = fmt::format("bench-{}-{}", ::getpid(), next_group_++);
    return Box::start(spec, opts);
  }

  // Two kinds of cold start, alternated so machine noise hits both alike:
  //  - the daemon's: an account's box starts in the account's network namespace, which
  //    persists across box restarts (made once, as BoxManager makes it; DESIGN §3-4), and its
  //    init is cloned by the zygote;
  //  - `agentbox run`'s: init is cloned and exec'd, with a network namespace of its own.
  void cold(int n) {
    std::vector<double> start_ms, stop_ms, fresh_ms;
    const std::string home = scratch_.home("cold", kUidBase);
    UniqueFd account_netns = netns::create_persistent();
    // CPU of a daemon-way start: this thread, the zygote's clone, and init, which is the
    // zygote's child (not reaped here): read from its schedstat just before it is stopped.
    const pid_t zygote_pid = zygote().pid();
    double cpu_account = 0;
    for (int i = 0; i < n; ++i) {
      const BoxSpec spec = bench_spec(kUidBase, home);
      const double cpu0 = thread_cpu_ms(), zygote0 = process_cpu_ms(zygote_pid);
      auto t0 = Clock::now();
      auto box = start(spec, account_netns.get());
      start_ms.push_back(ms_since(t0));
      const double init_cpu = process_cpu_ms(box->init_pid());
      t0 = Clock::now();
      box->stop();
      stop_ms.push_back(ms_since(t0));
      cpu_account += thread_cpu_ms() - cpu0 + process_cpu_ms(zygote_pid) - zygote0 + init_cpu;

      t0 = Clock::now();
      auto fresh = start(spec, -1, /*daemon_way=*/false);
      fresh_ms.push_back(ms_since(t0));
      fresh->stop();
    }
    const double med = median(start_ms);
    std::cout << fmt::format("\ncold start: {} boxes started and stopped one after another\n", n);
    row("Box::start -> ready, daemon (zygote, account netns), median", fmt::format("{:.2f} ms", med), "<= 5 ms",
        yes_no(med <= 5.0));
    row("Box::start -> ready, daemon, p90", fmt::format("{:.2f} ms", percentile(start_ms, 90)));
    row("Box::start -> ready, daemon, min", fmt::format("{:.2f} ms", percentile(start_ms, 0)));
    row("Box::stop, median", fmt::format("{:.2f} ms", median(stop_ms)));
    row("Box::stop, p90", fmt::format("{:.2f} ms", percentile(stop_ms, 90)));
    row("CPU (daemon thread + zygote + init) per start+stop, mean", fmt::format("{:.2f} ms", cpu_account / n));
    row("Box::start -> ready, exec + fresh netns (agentbox run), median", fmt::format("{:.2f} ms", median(fresh_ms)));
  }

  void warm(int n) {
    auto box = start(bench_spec(kUidBase + 1, scratch_.home("warm", kUidBase + 1)));
    UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!null) throw sys_error("open(/dev/null)");
    const int stdio[3] = {null.get(), null.get(), null.get()};
    SpawnRequest req;
    req.argv = {"/bin/true"};
    req.env = {kPath};
    req.tty = false;

    std::vector<double> in_box, plain;
    // Alternate the two so machine noise hits both alike.
    for (int i = 0; i < n; ++i) {
      auto t0 = Clock::now();
      spawn_and_wait(*box, req, stdio);
      in_box.push_back(ms_since(t0));
      t0 = Clock::now();
      fork_exec_wait("/bin/true", null.get());
      plain.push_back(ms_since(t0));
    }
    box->stop();
    const double overhead = median(in_box) - median(plain);
    std::cout << fmt::format("\nwarm spawn: /bin/true {} times, pipes mode, stdio /dev/null\n", n);
    row("spawn in box + exit event, median", fmt::format("{:.3f} ms", median(in_box)));
    row("spawn in box + exit event, p90", fmt::format("{:.3f} ms", percentile(in_box, 90)));
    row("spawn in box + exit event, min", fmt::format("{:.3f} ms", percentile(in_box, 0)));
    row("plain fork+exec+waitpid, median", fmt::format("{:.3f} ms", median(plain)));
    row("plain fork+exec+waitpid, p90", fmt::format("{:.3f} ms", percentile(plain, 90)));
    row("plain fork+exec+waitpid, min", fmt::format("{:.3f} ms", percentile(plain, 0)));
    row("overhead of the box (median - median)", fmt::format("{:.3f} ms", overhead), "<= 0.5 ms",
        yes_no(overhead <= 0.5));
  }

  // Right after boxes were stopped (a phase before, or the previous run), the first new boxes
  // reuse the kernel objects those freed, and only the later ones pay for fresh slab pages:
  // back to back, the trend below came out 1.1-1.7x; after a pause of 25-30 s, 0.84-1.08x.
  void density(int n, int settle_s) {
    if (settle_s > 0) {
      std::cout << fmt::format("\n(settling {} s before the density phase)\n", settle_s) << std::flush;
      ::sleep(static_cast<unsigned>(settle_s));
    }
    const Meminfo before = read_meminfo();
    std::vector<std::unique_ptr<Box>> boxes;
    std::vector<double> start_ms, start_cpu_ms;
    boxes.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const uid_t uid = kUidBase + 100 + static_cast<uid_t>(i);
      const BoxSpec spec = bench_spec(uid, scratch_.home(fmt::format("d{}", i), uid));
      const double cpu0 = thread_cpu_ms(), zygote0 = process_cpu_ms(zygote().pid());
      const auto t0 = Clock::now();
      boxes.push_back(start(spec));
      start_ms.push_back(ms_since(t0));
      // CPU spent on this start by the daemon side, the zygote and init: hardly moved by other load.
      start_cpu_ms.push_back(thread_cpu_ms() - cpu0 + process_cpu_ms(zygote().pid()) - zygote0 +
                             process_cpu_ms(boxes.back()->init_pid()));
    }
    // Let the kernel finish deferred work (RCU frees, per-cpu batches) before reading.
    ::sleep(2);
    const Meminfo after = read_meminfo();
    uint64_t pss_kib = 0, cgroup_bytes = 0;
    for (const auto& b : boxes) {
      pss_kib += pss_of(b->init_pid());
      cgroup_bytes += b->usage().memory_bytes;
    }
    const auto t0 = Clock::now();
    for (auto& b : boxes) b->stop();
    const double stop_all_ms = ms_since(t0);

    const size_t k = std::min<size_t>(20, start_ms.size());
    const std::vector<double> first(start_ms.begin(), start_ms.begin() + static_cast<long>(k));
    const std::vector<double> last(start_ms.end() - static_cast<long>(k), start_ms.end());
    const std::vector<double> first_cpu(start_cpu_ms.begin(), start_cpu_ms.begin() + static_cast<long>(k));
    const std::vector<double> last_cpu(start_cpu_ms.end() - static_cast<long>(k), start_cpu_ms.end());
    const double pss_per_box_kib = static_cast<double>(pss_kib) / n;
    const double slowdown = median(last) / median(first);
    auto per_box_kib = [n](int64_t kib) { return static_cast<double>(kib) / n; };

    std::cout << fmt::format("\ndensity: {} idle boxes alive at once (own uid, home, cgroup, netns each)\n", n);
    row("PSS of init, per box (smaps_rollup)", fmt::format("{:.0f} KiB", pss_per_box_kib), "<= 1 MiB",
        yes_no(pss_per_box_kib <= 1024));
    row("cgroup memory.usage_in_bytes, per box",
        fmt::format("{:.0f} KiB", static_cast<double>(cgroup_bytes) / 1024 / n));
    row("kernel side: MemAvailable drop / N (noisy)",
        fmt::format("{:.0f} KiB", per_box_kib(before.available - after.available)));
    row("kernel side: Slab+KernelStack+PageTables+Percpu+Shmem / N",
        fmt::format("{:.0f} KiB", per_box_kib(after.kernel() - before.kernel())));
    // The target: the Nth box starts as fast as the first. A median of 20 starts at either end
    // moves +-25% between runs on this VM (machine noise drifts over the minute the boxes take to
    // start), so the judgement uses the trend through all N starts; the end windows are shown too.
    const Trend wall = theil_sen(start_ms), cpu = theil_sen(start_cpu_ms);
    const size_t nth = start_ms.size() - 1;
    const double trend_ratio = wall.at(nth) / wall.at(0);
    row(fmt::format("start, trend through all {} starts: 1st", n), fmt::format("{:.2f} ms", wall.at(0)));
    row(fmt::format("start, trend through all {} starts: {}th", n, n), fmt::format("{:.2f} ms", wall.at(nth)),
        "<= 1.1x 1st", yes_no(trend_ratio <= 1.1));
    row("  Nth / 1st (trend), slope per 100 boxes", fmt::format("{:.2f}x, {:+.3f} ms", trend_ratio, wall.slope * 100));
    row("start CPU (daemon thread + zygote + init), trend: Nth / 1st", fmt::format("{:.2f}x", cpu.at(nth) / cpu.at(0)));
    row(fmt::format("start, median of first {}", k), fmt::format("{:.2f} ms", median(first)));
    row(fmt::format("start, median of last {} (boxes {}..{})", k, n - static_cast<int>(k) + 1, n),
        fmt::format("{:.2f} ms", median(last)));
    row("  last / first (medians of the end windows)", fmt::format("{:.2f}x", slowdown));
    row(fmt::format("start CPU, median of first {} / of last {}", k, k),
        fmt::format("{:.2f} / {:.2f} ms", median(first_cpu), median(last_cpu)));
    row(fmt::format("stop all {}", n), fmt::format("{:.0f} ms", stop_all_ms));
  }

 private:
  struct Meminfo {
    int64_t available = 0, slab = 0, kernel_stack = 0, page_tables = 0, percpu = 0, shmem = 0;  // KiB
    int64_t kernel() const { return slab + kernel_stack + page_tables + percpu + shmem; }
  };

  static Meminfo read_meminfo() {
    std::ifstream in("/proc/meminfo");
    Meminfo m;
    std::string key;
    int64_t kib = 0;
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      fields >> key >> kib;
      if (key == "MemAvailable:") m.available = kib;
      if (key == "Slab:") m.slab = kib;
      if (key == "KernelStack:") m.kernel_stack = kib;
      if (key == "PageTables:") m.page_tables = kib;
      if (key == "Percpu:") m.percpu = kib;
      if (key == "Shmem:") m.shmem = kib;
    }
    return m;
  }

  // The Pss line of /proc/<pid>/smaps_rollup, KiB.
  static uint64_t pss_of(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/smaps_rollup", pid));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Pss:", 0) == 0) return std::strtoull(line.c_str() + 4, nullptr, 10);
    }
    throw Error(fmt::format("no Pss in /proc/{}/smaps_rollup", pid));
  }

  static void spawn_and_wait(Box& box, const SpawnRequest& req, const int (&stdio)[3]) {
    const uint64_t id = box.spawn(req, stdio).id;
    for (;;) {
      pollfd p{box.event_fd(), POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) throw Error("warm: no exit event within 10 s");
      bool init_gone = false;
      for (const auto& e : box.read_events(&init_gone)) {
        if (e.id == id) return;
      }
      if (init_gone) throw Error("warm: the box's init exited");
    }
  }

  static void fork_exec_wait(const char* path, int null_fd) {
    const pid_t pid = ::fork();
    if (pid < 0) throw sys_error("fork");
    if (pid == 0) {
      for (int fd = 0; fd < 3; ++fd) ::dup2(null_fd, fd);
      const char* argv[] = {path, nullptr};
      ::execv(path, const_cast<char**>(argv));
      ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }

  Scratch scratch_;
  std::unique_ptr<CgroupDriver> cgroups_;
  std::string init_path_;
  std::unique_ptr<Zygote> zygote_;  // the daemon's init factory, made on first use
  int next_group_ = 0;
};

// 500 boxes hold 3 descriptors each: lift the soft limit to the hard one.
void raise_nofile() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int cold_n = 200, warm_n = 1000, density_n = 500, settle_s = 30;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--cold")
        cold_n = std::stoi(value());
      else if (a == "--warm")
        warm_n = std::stoi(value());
      else if (a == "--density")
        density_n = std::stoi(value());
      else if (a == "--settle")
        settle_s = std::stoi(value());
      else if (a == "--only")
        only = value();
      else
        throw std::invalid_argument("unknown option " + a);
    } catch (const std::exception& e) {
      std::cerr << "box_bench: " << e.what()
                << "\nusage: box_bench [--cold N] [--warm N] [--density N] [--settle SECONDS]"
                   " [--only cold|warm|density]\n";
      return 2;
    }
  }
  if (::geteuid() != 0) {
    std::cerr << "box_bench: run as root (host-uid boxes with cgroups)\n";
    return 2;
  }
  raise_nofile();
  try {
    Bench bench;
    std::cout << fmt::format("box_bench: init {}, cgroup driver {}\n",
                             std::filesystem::path(default_init_path()).filename().string(), bench.cgroup_kind());
    std::cout << fmt::format("  {:<58} {:>12}  {:<14} {}\n", "metric", "value", "target", "met");
    if (only.empty() || only == "cold") bench.cold(cold_n);
    if (only.empty() || only == "warm") bench.warm(warm_n);
    if (only.empty() || only == "density") bench.density(density_n, settle_s);
  } catch (const std::exception& e) {
    std::cerr << "box_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
