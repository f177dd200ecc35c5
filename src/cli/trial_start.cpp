#include "cli/trial_start.hpp"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "box/box.hpp"
#include "box/start_steps.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

// Far above any configured range's first slots; the scratch home is this uid's for the trial.
constexpr uid_t kTrialUid = 2999999;

struct ScratchHome {
  std::string dir;
  ScratchHome(uid_t uid, gid_t gid) {
    char tmpl[] = "/tmp/agentbox-doctor-XXXXXX";
    if (!::mkdtemp(tmpl)) throw sys_error("mkdtemp");
    dir = tmpl;
    if (::chown(dir.c_str(), uid, gid) != 0) throw sys_error("chown(" + dir + ")");
  }
  ~ScratchHome() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

BoxSpec trial_spec(bool as_root, const std::string& home) {
  BoxSpec s;
  s.name = "doctor";
  s.hostname = "agentbox-doctor";
  s.uid = s.gid = as_root ? kTrialUid : 1000;
  s.identity = as_root ? IdentityMode::host_uid : IdentityMode::user_ns;
  s.outer_uid = ::getuid();
  s.outer_gid = ::getgid();
  s.home_source = home;
  s.home_target = "/home/doctor";
  s.use_cgroup = as_root;
  s.limits.memory_bytes = 64ull << 20;
  s.limits.pids = 64;
  return s;
}

// Starts the box, runs /bin/true in it and waits for its exit.
void run_true(const BoxSpec& spec, const BoxStartOptions& opts, TrialStart& t) {
  auto box = Box::start(spec, opts);
  t.plan = box->plan();
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  const int stdio[3] = {null.get(), null.get(), null.get()};
  SpawnRequest req;
  req.argv = {"/bin/true"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.tty = false;
  const uint64_t id = box->spawn(req, stdio).id;
  for (int i = 0; i < 100; ++i) {
    pollfd p{box->event_fd(), POLLIN, 0};
    ::poll(&p, 1, 100);
    bool gone = false;
    for (const auto& e : box->read_events(&gone))
      if (e.id == id) {
        if (e.status != 0) throw Error(fmt::format("/bin/true ended with status {:#x}", e.status));
        box->stop();
        t.ok = true;
        return;
      }
    if (gone) throw Error("init exited");
  }
  throw Error("/bin/true did not end within 10 s");
}

}  // namespace

std::vector<TrialStart> trial_starts(bool as_root) {
  std::vector<TrialStart> out;
  std::mutex mu;
  std::vector<std::string>* sink_to = nullptr;
  set_step_report_sink([&](const StartStepInfo& step, std::string_view reason) {
    std::lock_guard lock(mu);
    if (sink_to) sink_to->push_back(fmt::format("{}: {}", step.name, reason));
  });

  std::string why;
  std::unique_ptr<CgroupDriver> cgroups = as_root ? CgroupDriver::detect("/sys/fs/cgroup", &why) : nullptr;
  std::unique_ptr<Zygote> zygote;
  std::vector<std::string> ways =
      as_root ? std::vector<std::string>{"daemon (zygote)", "agentbox run"} : std::vector<std::string>{"agentbox run"};
  for (const auto& how : ways) {
    TrialStart t;
    t.how = how;
    {
      std::lock_guard lock(mu);
      sink_to = &t.fallbacks;
    }
    try {
      if (as_root && !cgroups) throw Error("cgroups: " + why);
      ScratchHome home(as_root ? kTrialUid : ::getuid(), as_root ? kTrialUid : ::getgid());
      BoxSpec spec = trial_spec(as_root, home.dir);
      BoxStartOptions opts;
      opts.init_path = default_init_path();
      opts.cgroups = cgroups.get();
      opts.cgroup_name = fmt::format("doctor-{}", ::getpid());
      if (how == "daemon (zygote)") {
        try {
          zygote = Zygote::start(opts.init_path);
          opts.zygote = zygote.get();
        } catch (const Error& e) {
          step_failed(StartStep::zygote, e.what());
        }
      }
      run_true(spec, opts, t);
    } catch (const std::exception& e) {
      t.error = e.what();
    }
    {
      std::lock_guard lock(mu);
      sink_to = nullptr;
    }
    out.push_back(std::move(t));
  }
  set_step_report_sink(nullptr);
  return out;
}

}  // namespace agentbox
