// The schema of every message in messages.hpp: which fields, of which kind. Readers are strict:
// a missing field, a field of another JSON kind or an integer out of range is a ProtocolError.
#include "box/messages.hpp"

#include <limits>

#include "box/box_spec_json.hpp"

namespace agentbox::protocol {
namespace {

using nlohmann::json;

const json& at(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) throw ProtocolError(std::string("missing field '") + name + "'");
  return *it;
}

[[noreturn]] void wrong_kind(const char* name, const char* kind) {
  throw ProtocolError(std::string("field '") + name + "' must be " + kind);
}

template <class Int>
Int integer(const json& j, const char* name) {
  const json& v = at(j, name);
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<Int>::max())) wrong_kind(name, "an integer in range");
    return static_cast<Int>(u);
  }
  if (!v.is_number_integer()) wrong_kind(name, "an integer");
  const auto i = v.get<int64_t>();
  if (i < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
      (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<Int>::max())))
    wrong_kind(name, "an integer in range");
  return static_cast<Int>(i);
}

bool boolean(const json& j, const char* name) {
  const json& v = at(j, name);
  if (!v.is_boolean()) wrong_kind(name, "true or false");
  return v.get<bool>();
}

std::string string(const json& j, const char* name) {
  const json& v = at(j, name);
  if (!v.is_string()) wrong_kind(name, "a string");
  return v.get<std::string>();
}

std::vector<std::string> strings(const json& j, const char* name) {
  const json& v = at(j, name);
  if (!v.is_array()) wrong_kind(name, "a list of strings");
  std::vector<std::string> out;
  for (const json& e : v) {
    if (!e.is_string()) wrong_kind(name, "a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

const char* etc_name(EtcSource s) {
  switch (s) {
    case EtcSource::zygote_template: return "zygote_template";
    case EtcSource::parent_tree: return "parent_tree";
    case EtcSource::init_copy: return "init_copy";
  }
  return "init_copy";
}

EtcSource etc_source(const json& j, const char* name) {
  const std::string s = string(j, name);
  for (EtcSource e : {EtcSource::zygote_template, EtcSource::parent_tree, EtcSource::init_copy})
    if (s == etc_name(e)) return e;
  wrong_kind(name, "zygote_template, parent_tree or init_copy");
}

const char* failure_name(SpawnFailure f) {
  switch (f) {
    case SpawnFailure::command: return "command";
    case SpawnFailure::box_ptys: return "box_ptys";
    case SpawnFailure::host_ptys: return "host_ptys";
  }
  return "command";
}

SpawnFailure spawn_failure(const json& j, const char* name) {
  const std::string s = string(j, name);
  for (SpawnFailure f : {SpawnFailure::command, SpawnFailure::box_ptys, SpawnFailure::host_ptys})
    if (s == failure_name(f)) return f;
  wrong_kind(name, "command, box_ptys or host_ptys");
}

}  // namespace

std::string type_of(const json& body) {
  auto it = body.is_object() ? body.find("t") : body.end();
  return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void check_envelope(const json& body) {
  if (!body.is_object()) throw ProtocolError("protocol: a message must be a JSON object");
  auto v = body.find("v");
  if (v == body.end() || !v->is_number_integer()) throw ProtocolError("protocol: message without a version");
  if (v->get<int64_t>() != kVersion)
    throw ProtocolError("protocol: unknown version " + v->dump() + " (this side speaks " + std::to_string(kVersion) +
                        ")");
  if (type_of(body).empty()) throw ProtocolError("protocol: message without a type");
}

void malformed(const char* type, const std::exception& e) {
  throw ProtocolError(std::string("protocol: malformed '") + type + "': " + e.what());
}

void to_json(json& j, const StartBox& m) {
  j = {{"spec", m.spec},
       {"has_netns", m.has_netns},
       {"legacy_mounts", m.legacy_mounts},
       {"await_cgroup", m.await_cgroup},
       {"etc", etc_name(m.etc)},
       {"etc_tree_dirs", m.etc_tree_dirs},
       {"etc_template_mounted", m.etc_template_mounted},
       {"hold_before_ready", m.hold_before_ready}};
}
void from_json(const json& j, StartBox& m) {
  m.spec = at(j, "spec").get<BoxSpec>();
  m.has_netns = boolean(j, "has_netns");
  m.legacy_mounts = boolean(j, "legacy_mounts");
  m.await_cgroup = boolean(j, "await_cgroup");
  m.etc = etc_source(j, "etc");
  m.etc_tree_dirs = strings(j, "etc_tree_dirs");
  m.etc_template_mounted = boolean(j, "etc_template_mounted");
  m.hold_before_ready = boolean(j, "hold_before_ready");
}

void to_json(json& j, const CgroupJoined& m) { j = {{"join_self", m.join_self}}; }
void from_json(const json& j, CgroupJoined& m) { m.join_self = boolean(j, "join_self"); }

void to_json(json& j, const Spawn& m) { j = {{"id", m.id}, {"req", m.req}}; }
void from_json(const json& j, Spawn& m) {
  m.id = integer<uint64_t>(j, "id");
  m.req = at(j, "req").get<SpawnRequest>();
}

void to_json(json& j, const Signal& m) {
  j = {{"id", m.id}, {"spawn", m.spawn}, {"sig", m.sig}, {"whole_session", m.whole_session}};
}
void from_json(const json& j, Signal& m) {
  m.id = integer<uint64_t>(j, "id");
  m.spawn = integer<uint64_t>(j, "spawn");
  m.sig = integer<int>(j, "sig");
  m.whole_session = boolean(j, "whole_session");
}

void to_json(json& j, const CountProcesses& m) { j = {{"id", m.id}}; }
void from_json(const json& j, CountProcesses& m) { m.id = integer<uint64_t>(j, "id"); }

void to_json(json& j, const ListPorts& m) { j = {{"id", m.id}}; }
void from_json(const json& j, ListPorts& m) { m.id = integer<uint64_t>(j, "id"); }

void to_json(json& j, const Ports& m) {
  json ports = json::array();
  for (const auto& p : m.ports) ports.push_back({{"port", p.port}, {"pid", p.pid}, {"name", p.name}});
  j = {{"id", m.id}, {"ports", std::move(ports)}};
}
void from_json(const json& j, Ports& m) {
  m.id = integer<uint64_t>(j, "id");
  const json& ports = at(j, "ports");
  if (!ports.is_array()) wrong_kind("ports", "a list");
  for (const json& p : ports) {
    if (!p.is_object()) wrong_kind("ports", "a list of objects");
    m.ports.push_back({integer<uint16_t>(p, "port"), integer<pid_t>(p, "pid"), string(p, "name")});
  }
}

void to_json(json& j, const Ready& m) { j = {{"landlock_abi", m.landlock_abi}}; }
void from_json(const json& j, Ready& m) { m.landlock_abi = integer<int>(j, "landlock_abi"); }

void to_json(json& j, const StartFailed& m) { j = {{"message", m.message}}; }
void from_json(const json& j, StartFailed& m) { m.message = string(j, "message"); }

void to_json(json& j, const Spawned& m) { j = {{"id", m.id}, {"pid", m.pid}}; }
void from_json(const json& j, Spawned& m) {
  m.id = integer<uint64_t>(j, "id");
  m.pid = integer<pid_t>(j, "pid");
}

void to_json(json& j, const SpawnFailed& m) {
  j = {{"id", m.id}, {"message", m.message}, {"err", m.err}, {"cause", failure_name(m.cause)}};
}
void from_json(const json& j, SpawnFailed& m) {
  m.id = integer<uint64_t>(j, "id");
  m.message = string(j, "message");
  m.err = integer<int>(j, "err");
  m.cause = spawn_failure(j, "cause");
}

void to_json(json& j, const Signalled& m) { j = {{"id", m.id}, {"delivered", m.delivered}}; }
void from_json(const json& j, Signalled& m) {
  m.id = integer<uint64_t>(j, "id");
  m.delivered = boolean(j, "delivered");
}

void to_json(json& j, const ProcessCount& m) { j = {{"id", m.id}, {"count", m.count}}; }
void from_json(const json& j, ProcessCount& m) {
  m.id = integer<uint64_t>(j, "id");
  m.count = integer<int>(j, "count");
}

void to_json(json& j, const Refused& m) { j = {{"id", m.id}, {"message", m.message}}; }
void from_json(const json& j, Refused& m) {
  m.id = integer<uint64_t>(j, "id");
  m.message = string(j, "message");
}

void to_json(json& j, const Exited& m) { j = {{"spawn", m.spawn}, {"status", m.status}}; }
void from_json(const json& j, Exited& m) {
  m.spawn = integer<uint64_t>(j, "spawn");
  m.status = integer<int>(j, "status");
}

void to_json(json& j, const CloneInit& m) { j = {{"flags", m.flags}, {"start", m.start}}; }
void from_json(const json& j, CloneInit& m) {
  m.flags = integer<uint64_t>(j, "flags");
  from_json(at(j, "start"), m.start);
}

void to_json(json& j, const Cloned& m) { j = {{"pid", m.pid}, {"etc_template_error", m.etc_template_error}}; }
void from_json(const json& j, Cloned& m) {
  m.pid = integer<pid_t>(j, "pid");
  m.etc_template_error = string(j, "etc_template_error");
}

void to_json(json& j, const CloneFailed& m) { j = {{"message", m.message}, {"err", m.err}}; }
void from_json(const json& j, CloneFailed& m) {
  m.message = string(j, "message");
  m.err = integer<int>(j, "err");
}

}  // namespace agentbox::protocol
