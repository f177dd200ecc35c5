#include "box/box.hpp"

#include <signal.h>

#include <fmt/format.h>

#include "box/spawn_failure.hpp"

namespace agentbox {

std::unique_ptr<Box> Box::start(const BoxSpec& spec, const BoxStartOptions& opts) {
  std::unique_ptr<Box> box(new Box());
  box->box_ = launch_box(spec, opts);
  box->ready_pending_ = true;
  box->ready_timeout_ms_ = static_cast<int>(opts.ready_timeout.count());
  if (opts.await_ready) box->take_ready();
  return box;
}

Box::~Box() {
  try {
    stop();
  } catch (const Error&) {
    // A caller that cares about a cgroup left behind calls stop() itself.
  }
}

void Box::take_ready() {
  if (!ready_pending_) return;
  ready_pending_ = false;
  try {
    protocol::Message m = protocol::recv_reply(box_->control.get(), ready_timeout_ms_, "box start");
    auto reply = protocol::decode<protocol::InitReply>(m.body);
    if (const auto* failed = std::get_if<protocol::StartFailed>(&reply)) throw Error(failed->message);
    const auto* ready = std::get_if<protocol::Ready>(&reply);
    if (!ready) throw Error("box start: unexpected reply " + protocol::type_of(m.body));
    if (!box_->cgroup_confirmed) throw Error("box start: init is ready without its cgroup");
    landlock_abi_ = ready->landlock_abi;
  } catch (const Error& e) {
    throw e.wrap("box " + box_->spec.name);
  }
}

protocol::InitReply Box::request(const nlohmann::json& msg, std::span<const int> fds, int timeout_ms, const char* what,
                                 std::vector<UniqueFd>* reply_fds) {
  if (stopped_) throw Error(std::string(what) + ": box is stopped", ESRCH);
  try {
    protocol::send(box_->control.get(), msg, fds);
  } catch (const Error&) {
    take_ready();  // an init that gave up at its start has closed its end: its error says why
    throw;
  }
  take_ready();
  protocol::Message m = protocol::recv_reply(box_->control.get(), timeout_ms, what);
  auto reply = protocol::decode<protocol::InitReply>(m.body);
  if (const auto* refused = std::get_if<protocol::Refused>(&reply))
    throw Error(std::string(what) + ": " + refused->message);
  if (reply_fds) *reply_fds = std::move(m.fds);
  return reply;
}

SpawnResult Box::spawn(const SpawnRequest& req, std::span<const int> stdio) {
  if (!req.tty && stdio.size() != 3) throw Error("spawn: pipes mode needs stdin, stdout, stderr");
  const uint64_t id = next_id_++;
  std::vector<UniqueFd> fds;
  auto reply = request(protocol::encode(protocol::Spawn{id, req}), req.tty ? std::span<const int>{} : stdio, 10000,
                       "spawn", &fds);
  if (const auto* failed = std::get_if<protocol::SpawnFailed>(&reply))
    std::rethrow_exception(spawn_failure_error(*failed));
  const auto* spawned = std::get_if<protocol::Spawned>(&reply);
  if (!spawned || spawned->id != id) throw Error("spawn: unexpected reply");
  SpawnResult r;
  r.id = id;
  r.pid = spawned->pid;
  if (req.tty) {
    if (fds.size() != 1) throw Error("spawn: init sent no pty");
    r.pty_master = std::move(fds[0]);
  }
  return r;
}

bool Box::signal(uint64_t spawn, int sig, bool whole_session) {
  if (stopped_) return false;
  const uint64_t id = next_id_++;
  auto reply = request(protocol::encode(protocol::Signal{id, spawn, sig, whole_session}), {}, 5000, "signal");
  const auto* signalled = std::get_if<protocol::Signalled>(&reply);
  if (!signalled || signalled->id != id) throw Error("signal: unexpected reply");
  return signalled->delivered;
}

int Box::process_count() {
  if (stopped_) return 0;
  const uint64_t id = next_id_++;
  auto reply = request(protocol::encode(protocol::CountProcesses{id}), {}, 5000, "count");
  const auto* count = std::get_if<protocol::ProcessCount>(&reply);
  if (!count || count->id != id) throw Error("count: unexpected reply");
  return count->count;
}

std::vector<protocol::ListeningPort> Box::list_ports() {
  if (stopped_) return {};
  const uint64_t id = next_id_++;
  auto reply = request(protocol::encode(protocol::ListPorts{id}), {}, 5000, "list ports");
  auto* ports = std::get_if<protocol::Ports>(&reply);
  if (!ports || ports->id != id) throw Error("list ports: unexpected reply");
  return std::move(ports->ports);
}

std::vector<ExitEvent> Box::read_events(bool* init_gone) {
  std::vector<ExitEvent> out;
  *init_gone = false;
  for (;;) {
    protocol::Message m;
    auto st = protocol::recv(box_->events.get(), m, /*nonblocking=*/true);
    if (st == protocol::RecvStatus::would_block) break;
    if (st == protocol::RecvStatus::eof) {
      *init_gone = true;
      break;
    }
    const auto exited = protocol::decode_as<protocol::Exited>(m.body);
    out.push_back({exited.spawn, exited.status});
  }
  return out;
}

CgroupUsage Box::usage() const { return box_->cgroup ? box_->cgroup->usage() : CgroupUsage{}; }

void Box::stop() {
  if (stopped_ || !box_) return;  // !box_: the launch failed, and ended what it had made
  stopped_ = true;
  box_->end();
}

}  // namespace agentbox
