#include "box/box_owner.hpp"

#include <boost/asio/post.hpp>

#include <fmt/format.h>

#include "audit/trail.hpp"
#include "box/box_error.hpp"
#include "box/spawn_failure.hpp"
#include "box/start_steps.hpp"

namespace agentbox {

namespace asio = boost::asio;
using Descriptor = asio::posix::stream_descriptor;

namespace {

// Seconds a client is told to wait after its box timed out: a new start is tried then.
constexpr int kRetryAfterTimeout = 5;

double seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000; }

// A command that never started, for the audit trail: its box did not start (or went away
// first), or init refused it. cmd is "" when the trail is off.
void audit_launch_failed(const std::string& box, const std::string& cmd, const std::string& why) {
  audit::process({audit::now_ms(), true, box, 0, cmd, std::nullopt, false, why});
}

}  // namespace

BoxOwner::BoxOwner(BoxStrand strand, FairPool& blocking, std::string name, Options options, OnGone on_gone)
    : strand_(std::move(strand)),
      blocking_(blocking),
      name_(std::move(name)),
      options_(std::move(options)),
      on_gone_(std::move(on_gone)),
      timer_(strand_) {
  start_deadline_ = Clock::now() + options_.start_timeout;
  metrics::add(metrics::events().boxes_starting, 1);
  // The first reply init sends answers the start.
  Pending start;
  start.deadline = start_deadline_;
  start.on_reply = [this](protocol::InitReply& reply, std::vector<UniqueFd>&) {
    if (auto* failed = std::get_if<protocol::StartFailed>(&reply)) {
      start_failure_ = metrics::StartFailure::init;
      stop("box " + name_ + " did not start: " + failed->message);
    } else if (auto* ready = std::get_if<protocol::Ready>(&reply)) {
      start_failure_ = metrics::StartFailure::protocol;
      if (!box_->cgroup_confirmed) return stop("box " + name_ + ": init is ready without its cgroup");
      (void)ready;
      state_ = State::ready;
      metrics::Events& m = metrics::events();
      m.box_start_seconds.observe(std::chrono::duration<double>(Clock::now() - created_).count());
      metrics::add(m.boxes_started);
      metrics::add(m.boxes_starting, -1);
      metrics::add(m.boxes_running, 1);
    } else {
      start_failure_ = metrics::StartFailure::protocol;
      stop("box " + name_ + ": init answered its start out of turn");
    }
  };
  start.on_fail = [](const std::string&) {};
  awaiting_.push_back(std::move(start));
}

const char* BoxOwner::phase() const {
  switch (state_) {
    case State::launching:
    case State::starting: return "starting";
    case State::ready: return "running";
    case State::stopping: return "stopping";
    case State::gone: break;
  }
  return "stopped";
}

BoxOwner::~BoxOwner() {
  // Normally gone by now; a loop torn down under a live owner still ends its box.
  if (box_) {
    try {
      box_->end();
    } catch (const Error&) {
    }
  }
}

void BoxOwner::launched(std::unique_ptr<LaunchedBox> box) {
  if (state_ != State::launching) {
    // Stopped while it launched: end it where blocking is allowed.
    blocking_.post(name_, [box = std::shared_ptr<LaunchedBox>(std::move(box))] {
      try {
        box->end();
      } catch (const Error&) {
      }
    });
    return;
  }
  box_ = std::move(box);
  control_.emplace(strand_, box_->control.release());
  events_.emplace(strand_, box_->events.release());
  control_->non_blocking(true);
  events_->non_blocking(true);
  state_ = State::starting;
  last_event_ = Clock::now();
  flush();
  read_control();
  read_events();
  arm_timer();
}

void BoxOwner::launch_failed(const std::string& why) {
  start_failure_ = metrics::StartFailure::launch;
  stop(why);
}

void BoxOwner::spawn(uint64_t id, SpawnRequest req, std::vector<UniqueFd> stdio, SpawnHandlers handlers) {
  if (!accepting()) {
    auto failed = std::move(handlers.failed);
    const std::string why = "box " + name_ + " is stopping; try again";
    audit_launch_failed(name_, audit::on() ? audit::command_line(req.argv) : std::string(), why);
    failed(std::make_exception_ptr(BoxUnavailable(why, 1)));
    return;
  }
  last_event_ = Clock::now();
  spawns_[id].handlers = std::move(handlers);
  Pending p;
  p.id = id;
  p.on_reply = [this, id, tty = req.tty, cmd = audit::on() ? audit::command_line(req.argv) : std::string()](
                   protocol::InitReply& reply, std::vector<UniqueFd>& fds) {
    auto it = spawns_.find(id);
    if (it == spawns_.end()) return;
    SpawnEntry& e = it->second;
    if (auto* spawned = std::get_if<protocol::Spawned>(&reply)) {
      SpawnResult r;
      r.id = id;
      r.pid = spawned->pid;
      if (tty) {
        if (fds.size() != 1) return stop("box " + name_ + ": init sent no terminal with a spawn");
        r.pty_master = std::move(fds[0]);
      }
      e.started = true;
      e.pid = spawned->pid;
      metrics::add(metrics::events().box_commands_running, 1);
      audit::process({audit::now_ms(), true, name_, spawned->pid, cmd, {}, false});
      auto started = e.handlers.started;
      started(std::move(r));
      if (auto again = spawns_.find(id); again != spawns_.end() && again->second.early_exit)
        on_exit(id, *again->second.early_exit);
      return;
    }
    auto failed = std::move(e.handlers.failed);
    std::exception_ptr error;
    std::string why;
    if (auto* f = std::get_if<protocol::SpawnFailed>(&reply)) {
      error = spawn_failure_error(*f);
      why = f->message;
    } else if (auto* refused = std::get_if<protocol::Refused>(&reply)) {
      why = "spawn: " + refused->message;
      error = std::make_exception_ptr(Error(why));
    } else {
      why = "spawn: init answered out of turn";
      error = std::make_exception_ptr(Error(why));
    }
    audit_launch_failed(name_, cmd, why);
    spawns_.erase(it);
    failed(error);
  };
  p.on_fail = [this, id, cmd = audit::on() ? audit::command_line(req.argv) : std::string()](const std::string& why) {
    auto it = spawns_.find(id);
    if (it == spawns_.end() || it->second.started) return;  // a started one ends in fail_all
    auto failed = std::move(it->second.handlers.failed);
    spawns_.erase(it);
    audit_launch_failed(name_, cmd, why);
    failed(std::make_exception_ptr(BoxUnavailable(why, retry_after_)));
  };
  std::string data = protocol::encode(protocol::Spawn{id, std::move(req)}).dump();
  queue(std::move(data), std::move(stdio), std::move(p));
}

void BoxOwner::signal(uint64_t spawn, int sig, bool whole_session, std::function<void(bool)> done) {
  if (!accepting()) return done(false);
  const uint64_t id = next_request_id();
  Pending p;
  p.id = id;
  p.on_reply = [done](protocol::InitReply& reply, std::vector<UniqueFd>&) {
    auto* s = std::get_if<protocol::Signalled>(&reply);
    done(s && s->delivered);
  };
  p.on_fail = [done](const std::string&) { done(false); };
  queue(protocol::encode(protocol::Signal{id, spawn, sig, whole_session}).dump(), {}, std::move(p));
}

void BoxOwner::count_processes(std::function<void(std::optional<int>)> done) {
  if (!accepting()) return done(std::nullopt);
  const uint64_t id = next_request_id();
  Pending p;
  p.id = id;
  p.on_reply = [done](protocol::InitReply& reply, std::vector<UniqueFd>&) {
    auto* c = std::get_if<protocol::ProcessCount>(&reply);
    done(c ? std::optional<int>(c->count) : std::nullopt);
  };
  p.on_fail = [done](const std::string&) { done(std::nullopt); };
  queue(protocol::encode(protocol::CountProcesses{id}).dump(), {}, std::move(p));
}

void BoxOwner::list_ports(std::function<void(std::vector<protocol::ListeningPort>)> done) {
  if (!accepting()) return done({});
  const uint64_t id = next_request_id();
  Pending p;
  p.id = id;
  p.on_reply = [done](protocol::InitReply& reply, std::vector<UniqueFd>&) {
    auto* ports = std::get_if<protocol::Ports>(&reply);
    done(ports ? std::move(ports->ports) : std::vector<protocol::ListeningPort>{});
  };
  p.on_fail = [done](const std::string&) { done({}); };
  queue(protocol::encode(protocol::ListPorts{id}).dump(), {}, std::move(p));
}

// ---- sending

void BoxOwner::queue(std::string data, std::vector<UniqueFd> fds, Pending pending) {
  const bool was_empty = awaiting_.empty();
  awaiting_.push_back(std::move(pending));
  outbox_.push_back({std::move(data), std::move(fds)});
  if (was_empty) arm_timer();
  flush();
}

// Sends what the socket takes now; waits for room for the rest. Before the launch is done
// there is no socket yet: launched() flushes.
void BoxOwner::flush() {
  if (!control_ || writing_) return;
  while (!outbox_.empty()) {
    Outgoing& o = outbox_.front();
    std::vector<int> fds;
    for (const auto& fd : o.fds) fds.push_back(fd.get());
    bool sent;
    try {
      sent = protocol::try_send(control_->native_handle(), o.data, fds);
    } catch (const Error& e) {
      return stop("box " + name_ + ": " + e.what());  // init is gone (EPIPE) or the message is bad
    }
    if (!sent) {
      writing_ = true;
      control_->async_wait(Descriptor::wait_write, [self = shared_from_this()](const boost::system::error_code& ec) {
        self->writing_ = false;
        if (!ec) self->flush();
      });
      return;
    }
    outbox_.pop_front();  // the copies of the descriptors are init's now; ours close here
  }
}

// ---- receiving

void BoxOwner::read_control() {
  control_->async_wait(Descriptor::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || !self->control_) return;
    for (;;) {
      protocol::Message m;
      protocol::RecvStatus st;
      try {
        st = protocol::recv(self->control_->native_handle(), m, /*nonblocking=*/true);
      } catch (const Error& e) {
        return self->stop("box " + self->name_ + ": " + e.what());
      }
      if (st == protocol::RecvStatus::would_block) break;
      if (st == protocol::RecvStatus::eof) {
        // Its answer to a failed start came before this, and stopped us already.
        return self->stop("box " + self->name_ + ": init exited", 1);
      }
      self->on_reply(m);
      if (!self->control_) return;  // the reply stopped the box
    }
    self->read_control();
  });
}

void BoxOwner::read_events() {
  events_->async_wait(Descriptor::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || !self->events_) return;
    for (;;) {
      protocol::Message m;
      try {
        const auto st = protocol::recv(self->events_->native_handle(), m, /*nonblocking=*/true);
        if (st == protocol::RecvStatus::would_block) break;
        if (st == protocol::RecvStatus::eof) return self->stop("box " + self->name_ + ": init exited", 1);
        const auto exited = protocol::decode_as<protocol::Exited>(m.body);
        self->on_exit(exited.spawn, exited.status);
      } catch (const Error& e) {
        return self->stop("box " + self->name_ + ": " + e.what());
      }
      if (!self->events_) return;
    }
    self->read_events();
  });
}

void BoxOwner::on_reply(protocol::Message& m) {
  last_event_ = Clock::now();
  std::optional<protocol::InitReply> reply;
  try {
    reply = protocol::decode<protocol::InitReply>(m.body);
  } catch (const Error& e) {
    return stop("box " + name_ + ": " + e.what());
  }
  if (awaiting_.empty()) return stop("box " + name_ + ": a reply nobody asked for");
  Pending p = std::move(awaiting_.front());
  awaiting_.pop_front();
  // Every reply but the start's echoes its request's id.
  const uint64_t id = std::visit(
      [](const auto& r) -> uint64_t {
        if constexpr (requires { r.id; }) return r.id;
        return 0;
      },
      *reply);
  if (id != p.id) return stop(fmt::format("box {}: reply for request {} where {} was next", name_, id, p.id));
  arm_timer();
  p.on_reply(*reply, m.fds);
}

void BoxOwner::on_exit(uint64_t spawn, int status) {
  last_event_ = Clock::now();
  auto it = spawns_.find(spawn);
  if (it == spawns_.end()) return;  // not ours (init reports only commands we started)
  if (!it->second.started) {
    it->second.early_exit = status;  // its Spawned reply is still unread: it ends after it starts
    return;
  }
  auto ended = std::move(it->second.handlers.ended);
  audit::process({audit::now_ms(), false, name_, it->second.pid, {}, audit::exit_code_of(status), false});
  spawns_.erase(it);
  metrics::add(metrics::events().box_commands_running, -1);
  ended(SpawnEnd{true, status});
}

// ---- timing out

void BoxOwner::arm_timer() {
  if (state_ == State::stopping || state_ == State::gone) return;
  if (awaiting_.empty()) {
    timer_.cancel();
    return;
  }
  Pending& head = awaiting_.front();
  if (head.deadline == Clock::time_point{}) head.deadline = Clock::now() + options_.request_timeout;
  const uint64_t id = head.id;
  timer_.expires_at(head.deadline);
  timer_.async_wait([self = shared_from_this(), id](const boost::system::error_code& ec) {
    if (ec || self->awaiting_.empty() || self->awaiting_.front().id != id) return;
    if (Clock::now() < self->awaiting_.front().deadline) return;
    if (id == 0) {
      self->start_failure_ = metrics::StartFailure::timeout;
      self->stop(fmt::format("box {} did not start within {:g} s", self->name_, seconds(self->options_.start_timeout)),
                 kRetryAfterTimeout);
    } else {
      self->stop(fmt::format("box {}: init did not answer within {:g} s", self->name_,
                             seconds(self->options_.request_timeout)),
                 kRetryAfterTimeout);
    }
  });
}

// ---- stopping

void BoxOwner::fail_all(const std::string& why) {
  auto awaiting = std::move(awaiting_);
  awaiting_.clear();
  outbox_.clear();
  for (auto& p : awaiting) p.on_fail(why);
  // Commands that started: their exits will not come any more.
  auto spawns = std::move(spawns_);
  spawns_.clear();
  for (auto& [id, e] : spawns) {
    if (e.started) {
      metrics::add(metrics::events().box_commands_running, -1);
      audit::process({audit::now_ms(), false, name_, e.pid, {}, std::nullopt, true});
      if (e.handlers.ended) e.handlers.ended(SpawnEnd{false, 0});
    } else if (e.handlers.failed) {
      e.handlers.failed(std::make_exception_ptr(BoxUnavailable(why, retry_after_)));
    }
  }
}

void BoxOwner::stop(std::string why, int retry_after) {
  if (state_ == State::stopping || state_ == State::gone) return;
  const bool launching = state_ == State::launching;
  if (state_ == State::ready) {
    metrics::add(metrics::events().boxes_running, -1);
  } else {  // launching or starting: the start ends here, failed
    metrics::add(metrics::events().boxes_starting, -1);
    metrics::count_start_failure(start_failure_);
  }
  state_ = State::stopping;
  stop_why_ = why;
  retry_after_ = retry_after;
  timer_.cancel();
  if (control_) control_->close();
  if (events_) events_->close();
  control_.reset();
  events_.reset();
  fail_all(why.empty() ? "box " + name_ + " stopped" : why);
  if (launching || !box_) {
    // Nothing to end yet (a launch still running ends its box when it lands: launched()).
    finish();
    return;
  }
  std::shared_ptr<LaunchedBox> box(std::move(box_));
  blocking_.post(name_, [self = shared_from_this(), box] {
    std::string cgroup_error;
    try {
      box->end();
    } catch (const Error& e) {
      cgroup_error = e.what();
    }
    asio::post(self->strand_, [self, cgroup_error] {
      if (!cgroup_error.empty() && self->stop_why_.empty()) self->stop_why_ = cgroup_error;
      self->finish();
    });
  });
}

void BoxOwner::finish() {
  if (state_ == State::gone) return;
  state_ = State::gone;
  auto on_gone = std::move(on_gone_);
  on_gone_ = nullptr;
  if (on_gone) on_gone(shared_from_this(), stop_why_);
}

}  // namespace agentbox
