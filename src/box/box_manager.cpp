#include "box/box_manager.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <vector>

#include "box/contain/netns.hpp"

namespace agentbox {

BoxManager::BoxManager(BoxManagerOptions opts) : opts_(std::move(opts)) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw sys_error("epoll_create1");
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throw sys_error("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_.get();
  check(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev), "epoll_ctl(wake)");
  thread_ = std::thread([this] { watch(); });
}

BoxManager::~BoxManager() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  thread_.join();
  stop_all();
}

std::shared_ptr<Box> BoxManager::ensure(const std::string& account, const BoxSpec& spec) {
  if (auto box = find(account)) {
    touch(account);
    return box;
  }
  // Starts are serialized so two requests for one account make one box; a start takes
  // milliseconds, and other accounts' running boxes are not blocked by it.
  std::lock_guard start_lock(start_mu_);
  if (auto box = find(account)) return box;

  int netns_fd;
  {
    std::lock_guard lock(mu_);
    auto& ns = netns_[account];
    if (!ns) ns = netns::create_persistent();
    netns_fd = ns.get();
  }
  BoxStartOptions so;
  so.init_path = opts_.init_path;
  so.netns_fd = netns_fd;
  so.cgroups = opts_.cgroups;
  so.cgroup_name = "box-" + std::to_string(::getpid()) + "-" + std::to_string(++box_serial_);
  if (opts_.zygote && spec.identity == IdentityMode::host_uid) {
    if (!zygote_) zygote_ = Zygote::start(opts_.init_path);
    so.zygote = zygote_.get();
  }
  std::shared_ptr<Box> box = Box::start(spec, so);

  std::lock_guard lock(mu_);
  boxes_[account] = Entry{box, std::chrono::steady_clock::now(), 0};
  by_event_fd_[box->event_fd()] = account;
  add_to_epoll(account, *box);
  return box;
}

void BoxManager::add_to_epoll(const std::string&, Box& box) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = box.event_fd();
  check(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, box.event_fd(), &ev), "epoll_ctl(box)");
}

std::shared_ptr<Box> BoxManager::find(const std::string& account) {
  std::lock_guard lock(mu_);
  auto it = boxes_.find(account);
  return it == boxes_.end() ? nullptr : it->second.box;
}

SpawnResult BoxManager::spawn(const std::string& account, const BoxSpec& spec,
                              const SpawnRequest& req, std::span<const int> stdio) {
  auto box = ensure(account, spec);
  {
    // Counted before the spawn so an exit reported immediately cannot go below zero.
    std::lock_guard lock(mu_);
    if (auto it = boxes_.find(account); it != boxes_.end()) ++it->second.live;
  }
  try {
    return box->spawn(req, stdio);
  } catch (...) {
    std::lock_guard lock(mu_);
    if (auto it = boxes_.find(account); it != boxes_.end()) --it->second.live;
    throw;
  }
}

void BoxManager::touch(const std::string& account) {
  std::lock_guard lock(mu_);
  if (auto it = boxes_.find(account); it != boxes_.end())
    it->second.last_active = std::chrono::steady_clock::now();
}

void BoxManager::stop(const std::string& account) { remove(account, true); }

void BoxManager::stop_all() {
  std::vector<std::string> accounts;
  {
    std::lock_guard lock(mu_);
    for (const auto& [a, e] : boxes_) accounts.push_back(a);
  }
  for (const auto& a : accounts) remove(a, true);
}

size_t BoxManager::running() const {
  std::lock_guard lock(mu_);
  return boxes_.size();
}

void BoxManager::remove(const std::string& account, bool notify) {
  std::shared_ptr<Box> box;
  {
    std::lock_guard lock(mu_);
    auto it = boxes_.find(account);
    if (it == boxes_.end()) return;
    box = it->second.box;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, box->event_fd(), nullptr);
    by_event_fd_.erase(box->event_fd());
    boxes_.erase(it);
  }
  box->stop();  // outside the lock: it waits for init to die
  if (notify && opts_.on_stopped) opts_.on_stopped(account);
}

void BoxManager::handle_events(const std::string& account) {
  std::shared_ptr<Box> box = find(account);
  if (!box) return;
  bool init_gone = false;
  const auto events = box->read_events(&init_gone);
  {
    std::lock_guard lock(mu_);
    if (auto it = boxes_.find(account); it != boxes_.end()) {
      it->second.live -= static_cast<int>(events.size());
      if (it->second.live < 0) it->second.live = 0;
      it->second.last_active = std::chrono::steady_clock::now();
    }
  }
  if (opts_.on_exit)
    for (const auto& e : events) opts_.on_exit(account, e.pid, e.status);
  if (init_gone) remove(account, true);
}

void BoxManager::sweep_idle() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, std::shared_ptr<Box>>> candidates;
  {
    std::lock_guard lock(mu_);
    for (const auto& [a, e] : boxes_)
      if (e.live == 0 && now - e.last_active >= opts_.idle_timeout) candidates.emplace_back(a, e.box);
  }
  for (const auto& [account, box] : candidates) {
    // Background processes the user left running (a server, a build) keep the box alive.
    int procs = -1;
    try {
      procs = box->process_count();
    } catch (const Error&) {
      procs = 0;  // init is not answering: the box is gone anyway
    }
    if (procs == 0) {
      remove(account, true);
    } else {
      touch(account);
    }
  }
}

void BoxManager::watch() {
  auto next_sweep = std::chrono::steady_clock::now() + opts_.sweep_interval;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        next_sweep - std::chrono::steady_clock::now());
    epoll_event evs[64];
    const int n = ::epoll_wait(epoll_.get(), evs, 64, std::max<int>(0, static_cast<int>(wait.count())));
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.fd == wake_.get()) continue;
      std::string account;
      {
        std::lock_guard lock(mu_);
        auto it = by_event_fd_.find(evs[i].data.fd);
        if (it == by_event_fd_.end()) continue;
        account = it->second;
      }
      handle_events(account);
    }
    if (std::chrono::steady_clock::now() >= next_sweep) {
      sweep_idle();
      next_sweep = std::chrono::steady_clock::now() + opts_.sweep_interval;
    }
  }
}

}  // namespace agentbox
