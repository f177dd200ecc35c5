#include "box/box_manager.hpp"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "box/box_error.hpp"
#include "box/contain/netns.hpp"
#include "box/start_steps.hpp"

namespace agentbox {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// How long stop_all() waits for boxes to go.
constexpr auto kStopAllWait = std::chrono::seconds(30);
// Seconds a client is told to wait when every box slot is taken.
constexpr int kRetryAfterFull = 30;

}  // namespace

struct BoxManager::Impl : std::enable_shared_from_this<Impl> {
  // One account: its strand and, on that strand only, everything else.
  struct Slot {
    explicit Slot(std::shared_ptr<const BoxStrand> s) : held(std::move(s)), strand(*held) {}
    std::shared_ptr<const BoxStrand> held;  // keeps it the account's (util/account_strands.hpp)
    BoxStrand strand;
    std::shared_ptr<BoxOwner> owner;        // the current box, if any
    std::shared_ptr<const UniqueFd> netns;  // the account's network namespace (a start holds a copy)
    Clock::time_point last_active = Clock::now();
    bool retired = false;  // removed from the map: work for it goes to a new slot
    bool checking_idle = false;
    std::chrono::milliseconds idle_timeout{0};     // the current box's (BoxSpec::idle_timeout); 0: opts'
    std::vector<std::function<void()>> when_gone;  // stop() completions
  };

  Impl(BoxLoop& l, BoxManagerOptions o)
      : loop(l),
        opts(std::move(o)),
        launcher(opts.launch_threads, 1, "launcher"),
        sweep_strand(asio::make_strand(loop.context())),
        sweep(sweep_strand) {}

  // ---- any thread

  std::shared_ptr<Slot> slot_of(const std::string& account) {
    std::lock_guard lock(mu);
    auto& slot = slots[account];
    if (!slot) slot = std::make_shared<Slot>(loop.strand_of(account));
    return slot;
  }

  // Runs fn(slot) on the account's strand; a slot retired meanwhile hands it to its successor.
  template <class Fn>
  void on_slot(const std::string& account, Fn fn) {
    auto slot = slot_of(account);
    asio::post(slot->strand, [self = shared_from_this(), account, slot, fn = std::move(fn)]() mutable {
      if (slot->retired) return self->on_slot(account, std::move(fn));
      fn(slot);
    });
  }

  Zygote* zygote_for_launch() {
    std::lock_guard lock(zygote_mu);
    if (!opts.zygote || zygote_failed) return nullptr;
    if (!zygote) {
      try {
        zygote = Zygote::start(opts.init_path);
      } catch (const Error& e) {
        zygote_failed = true;
        step_failed(StartStep::zygote, e.what());
        return nullptr;
      }
    }
    return zygote.get();
  }

  bool is_closed(const std::string& account) const {
    std::lock_guard lock(mu);
    return closed.contains(account);
  }

  // Takes one of max_active places, or says why not.
  void reserve_place() {
    size_t n = active.load();
    do {
      if (opts.max_active && n >= opts.max_active)
        throw BoxUnavailable(fmt::format("{} boxes are running, the most this server allows; try again later", n),
                             kRetryAfterFull);
    } while (!active.compare_exchange_weak(n, n + 1));
  }

  void release_place() {
    {
      std::lock_guard lock(gone_mu);
      --active;
    }
    gone_cv.notify_all();
  }

  // ---- the account's strand

  std::shared_ptr<BoxOwner> ensure_owner(const std::string& account, const std::shared_ptr<Slot>& slot,
                                         const BoxSpec& spec) {
    if (slot->owner && slot->owner->accepting()) return slot->owner;
    if (closing) throw BoxUnavailable("the server is stopping", 0);
    if (is_closed(account)) throw BoxUnavailable("this account has been deleted", 0);
    reserve_place();
    BoxOwner::Options oo;
    oo.start_timeout = opts.start_timeout;
    oo.request_timeout = opts.request_timeout;
    auto owner = std::make_shared<BoxOwner>(
        slot->strand, launcher, spec.name, oo,
        [self = shared_from_this(), slot](const std::shared_ptr<BoxOwner>& gone, const std::string&) {
          self->owner_gone(slot, gone);
        });
    slot->owner = owner;
    slot->idle_timeout = spec.idle_timeout;
    launch(account, slot, owner, spec);
    return owner;
  }

  // The blocking part of the start, on a launcher thread; the result goes back to the strand.
  void launch(const std::string& account, const std::shared_ptr<Slot>& slot, const std::shared_ptr<BoxOwner>& owner,
              const BoxSpec& spec) {
    const bool hold = opts.hold_start && opts.hold_start(account);
    launcher.post(account,
                  [self = shared_from_this(), account, slot, owner, spec, hold, netns = slot->netns]() mutable {
                    std::shared_ptr<LaunchedBox> box;
                    std::string error;
                    try {
                      // A user_ns box makes its own in its user namespace: none is kept for it.
                      const bool own_netns = spec.identity == IdentityMode::user_ns;
                      if (!netns && !own_netns) {
                        netns = std::make_shared<const UniqueFd>(netns::create_persistent());
                        if (self->opts.on_netns_created) self->opts.on_netns_created(account, netns->get());
                      }
                      BoxStartOptions so;
                      so.init_path = self->opts.init_path;
                      so.netns_fd = own_netns ? -1 : netns->get();
                      so.cgroups = self->opts.cgroups;
                      so.cgroup_name = fmt::format("box-{}-{}", ::getpid(), ++self->box_serial);
                      so.zygote = spec.identity == IdentityMode::host_uid ? self->zygote_for_launch() : nullptr;
                      so.hold_before_ready = hold;
                      box = launch_box(spec, so);
                      if (own_netns && self->opts.on_own_netns) self->opts.on_own_netns(account, box->init_pid);
                    } catch (const std::exception& e) {
                      error = e.what();
                    }
                    asio::post(slot->strand, [slot, owner, netns, box, error]() mutable {
                      if (!slot->netns && netns) slot->netns = netns;  // kept for the account's next boxes
                      if (!box) return owner->launch_failed(error);
                      // The owner takes the box; a shared_ptr held nowhere else gives it up.
                      owner->launched(std::make_unique<LaunchedBox>(std::move(*box)));
                    });
                  });
  }

  void owner_gone(const std::shared_ptr<Slot>& slot, const std::shared_ptr<BoxOwner>& gone) {
    if (slot->owner == gone) slot->owner.reset();
    slot->last_active = Clock::now();
    release_place();
    if (!slot->owner) {
      auto when_gone = std::move(slot->when_gone);
      slot->when_gone.clear();
      for (auto& done : when_gone) done();
    }
  }

  void check_idle(const std::string& account, const std::shared_ptr<Slot>& slot) {
    const auto now = Clock::now();
    auto owner = slot->owner;
    if (!owner) {
      if (now - slot->last_active < opts.netns_linger) return;
      // Nothing of the account's is left here: give back its namespace and forget it.
      {
        std::lock_guard lock(mu);
        if (auto it = slots.find(account); it != slots.end() && it->second == slot) slots.erase(it);
      }
      slot->retired = true;
      if (slot->netns && opts.on_netns_released) opts.on_netns_released(account);
      slot->netns.reset();
      return;
    }
    const auto last = std::max(slot->last_active, owner->last_event());
    const auto idle_timeout = slot->idle_timeout.count() > 0 ? slot->idle_timeout : opts.idle_timeout;
    if (!owner->ready() || owner->live_commands() > 0 || now - last < idle_timeout || slot->checking_idle) return;
    slot->checking_idle = true;
    owner->count_processes([self = shared_from_this(), slot, owner](std::optional<int> n) {
      slot->checking_idle = false;
      if (slot->owner != owner) return;
      if (!n) {
        step_failed(StartStep::idle_check, "init did not say how many processes run");
        return owner->stop("box stopped: its init did not answer the idle check");
      }
      // Background processes the user left running (a server, a build) keep the box alive.
      if (*n == 0 && owner->live_commands() == 0) return owner->stop("");
      slot->last_active = Clock::now();
    });
  }

  void arm_sweep() {
    sweep.expires_after(opts.sweep_interval);
    sweep.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->closing) return;
      std::vector<std::pair<std::string, std::shared_ptr<Slot>>> all;
      {
        std::lock_guard lock(self->mu);
        all.assign(self->slots.begin(), self->slots.end());
      }
      for (auto& [account, slot] : all)
        asio::post(slot->strand, [self, account = account, slot = slot] {
          if (!slot->retired) self->check_idle(account, slot);
        });
      self->arm_sweep();
    });
  }

  BoxLoop& loop;
  const BoxManagerOptions opts;
  // The blocking half of starts and stops, fair per account: one job of an account at a time,
  // so one account's stuck start holds one thread, never all of them.
  FairPool launcher;
  BoxStrand sweep_strand;
  asio::steady_timer sweep;  // on sweep_strand

  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<Slot>> slots;  // guarded by mu
  std::set<std::string> closed;                        // guarded by mu: deleted accounts

  std::atomic<uint64_t> next_spawn{1};
  std::atomic<uint64_t> box_serial{0};
  std::atomic<size_t> active{0};  // owners not yet gone
  std::atomic<bool> closing{false};
  std::mutex gone_mu;  // with gone_cv: stop_all waits for active to reach 0
  std::condition_variable gone_cv;

  std::mutex zygote_mu;
  std::unique_ptr<Zygote> zygote;  // guarded by zygote_mu
  bool zygote_failed = false;      // guarded by zygote_mu
};

BoxManager::BoxManager(BoxLoop& loop, BoxManagerOptions opts) : impl_(std::make_shared<Impl>(loop, std::move(opts))) {
  asio::post(impl_->sweep_strand, [impl = impl_] { impl->arm_sweep(); });
}

BoxManager::~BoxManager() { shut_down(); }

void BoxManager::shut_down() {
  if (impl_->closing.exchange(true)) return;
  stop_all();
  asio::post(impl_->sweep_strand, [impl = impl_] { impl->sweep.cancel(); });
  // Launches and stops still on the launcher threads finish; none may outlive the pool.
  impl_->launcher.stop();
  std::lock_guard lock(impl_->zygote_mu);
  impl_->zygote.reset();
}

uint64_t BoxManager::spawn(const std::string& account, const BoxSpec& spec, SpawnRequest req,
                           std::vector<UniqueFd> stdio, SpawnHandlers handlers) {
  const uint64_t id = impl_->next_spawn++;
  impl_->on_slot(account, [impl = impl_, account, spec, id, req = std::move(req), stdio = std::move(stdio),
                           handlers = std::move(handlers)](const std::shared_ptr<Impl::Slot>& slot) mutable {
    slot->last_active = Clock::now();
    std::shared_ptr<BoxOwner> owner;
    try {
      owner = impl->ensure_owner(account, slot, spec);
    } catch (...) {
      return handlers.failed(std::current_exception());
    }
    owner->spawn(id, std::move(req), std::move(stdio), std::move(handlers));
  });
  return id;
}

void BoxManager::signal(const std::string& account, uint64_t id, int sig, std::function<void(bool)> done,
                        bool whole_session) {
  if (!done) done = [](bool) {};
  impl_->on_slot(account, [id, sig, whole_session, done = std::move(done)](const std::shared_ptr<Impl::Slot>& slot) {
    if (!slot->owner) return done(false);
    slot->owner->signal(id, sig, whole_session, done);
  });
}

void BoxManager::list_ports(const std::string& account,
                            std::function<void(std::vector<protocol::ListeningPort>)> done) {
  impl_->on_slot(account, [done = std::move(done)](const std::shared_ptr<Impl::Slot>& slot) {
    if (!slot->owner || !slot->owner->ready()) return done({});
    slot->owner->list_ports(done);
  });
}

void BoxManager::open_socket_in_box(const std::string& account, int family,
                                    std::function<void(UniqueFd, std::string)> done) {
  impl_->on_slot(account,
                 [impl = impl_, account, family, done = std::move(done)](const std::shared_ptr<Impl::Slot>& slot) {
                   if (!slot->owner || !slot->owner->ready() || !slot->netns)
                     return done(UniqueFd(), "no box is running for this user");
                   // setns on a launcher thread, back to our own namespace before the thread serves anything
                   // else: a socket belongs to the namespace it was made in, wherever it is used from.
                   impl->launcher.post(account, [netns = slot->netns, family, done] {
                     try {
                       done(netns::socket_in(netns->get(), family), {});
                     } catch (const Error& e) {
                       done(UniqueFd(), e.what());
                     }
                   });
                 });
}

void BoxManager::touch(const std::string& account) {
  impl_->on_slot(account, [](const std::shared_ptr<Impl::Slot>& slot) { slot->last_active = Clock::now(); });
}

void BoxManager::stop(const std::string& account, std::function<void()> done) {
  if (!done) done = [] {};
  impl_->on_slot(account, [done = std::move(done)](const std::shared_ptr<Impl::Slot>& slot) {
    if (!slot->owner) return done();
    slot->when_gone.push_back(done);
    slot->owner->stop("");
  });
}

void BoxManager::close(const std::string& account, std::function<void()> done) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->closed.insert(account);
  }
  // Queued behind anything already on the strand, so a spawn that got there first is stopped too.
  stop(account, std::move(done));
}

void BoxManager::box_states(std::function<void(std::map<std::string, std::string>)> done) {
  struct Gather {
    std::mutex mu;
    std::map<std::string, std::string> states;
    size_t left = 0;
    std::function<void(std::map<std::string, std::string>)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->done = std::move(done);
  std::vector<std::pair<std::string, std::shared_ptr<Impl::Slot>>> all;
  {
    std::lock_guard lock(impl_->mu);
    all.assign(impl_->slots.begin(), impl_->slots.end());
  }
  if (all.empty()) return gather->done({});
  gather->left = all.size();
  for (auto& [account, slot] : all)
    asio::post(slot->strand, [gather, account = account, slot = slot] {
      std::lock_guard lock(gather->mu);
      if (slot->owner && !slot->retired) gather->states[account] = slot->owner->phase();
      if (--gather->left == 0) gather->done(std::move(gather->states));
    });
}

void BoxManager::stop_all() {
  std::vector<std::shared_ptr<Impl::Slot>> all;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [account, slot] : impl_->slots) all.push_back(slot);
  }
  for (auto& slot : all)
    asio::post(slot->strand, [slot] {
      if (slot->owner) slot->owner->stop("");
    });
  std::unique_lock lock(impl_->gone_mu);
  impl_->gone_cv.wait_for(lock, kStopAllWait, [&] { return impl_->active.load() == 0; });
}

size_t BoxManager::running() const { return impl_->active.load(); }

size_t BoxManager::accounts_held() const {
  std::lock_guard lock(impl_->mu);
  return impl_->slots.size();
}

}  // namespace agentbox
