#pragma once
// The messages between the daemon, the zygote and a box's init, as typed structs with one
// schema (messages.cpp). On the wire (box/protocol.hpp) each is a JSON object
// {"v": kVersion, "t": <kType>, <fields>}; decode() refuses another version, a type the
// receiver does not expect there, and a field that is missing or of the wrong kind.
//
// Sockets and who speaks when:
//   zygote socket   daemon → zygote CloneInit            zygote → daemon Cloned | CloneFailed
//   control (fd 3)  daemon → init StartBox first (or inside CloneInit), [CgroupJoined], then
//                   any number of requests, each with an id; init answers the start once
//                   (Ready | StartFailed), then every request in the order sent, echoing its id
//   events (fd 4)   init → daemon Exited, tagged with the id of the Spawn that started it
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "box/box_spec.hpp"
#include "box/protocol.hpp"
#include "box/start_plan.hpp"
#include "util/error.hpp"

namespace agentbox::protocol {

// Raised when any part of the message set changes shape.
inline constexpr int kVersion = 4;

// ---- daemon → init

// The box to build; the first message init gets. Descriptors: the netns (has_netns), then the
// /etc tree (etc == parent_tree).
struct StartBox {
  static constexpr const char* kType = "start";
  BoxSpec spec;
  bool has_netns = false;
  bool legacy_mounts = false;  // build the root with mount(2)
  bool await_cgroup = false;   // CgroupTiming::join_after_clone: wait for CgroupJoined
  EtcSource etc = EtcSource::init_copy;
  std::vector<std::string> etc_tree_dirs;  // parent_tree: the host directories to bind into it
  bool etc_template_mounted = false;       // set by the zygote: its template tmpfs covers /tmp
  bool hold_before_ready = false;          // test hook: contain, then never answer the start
};

// The box's cgroup is ready (CgroupTiming::join_after_clone). Descriptors: none when the
// daemon has attached init already (v2); else (v1) one `tasks` file per hierarchy, and init
// writes "0" to each to join itself (Cgroup::open_self_join says why).
struct CgroupJoined {
  static constexpr const char* kType = "cgroup";
  bool join_self = false;
};

// Start a command. Descriptors: stdin, stdout, stderr in pipes mode (req.tty false).
struct Spawn {
  static constexpr const char* kType = "spawn";
  uint64_t id = 0;
  SpawnRequest req;
};

// Signal the process group of a command that init started and has not reaped yet; with
// whole_session, every process of its session (a terminal's shell and its jobs, background ones
// included: each command starts a session of its own).
struct Signal {
  static constexpr const char* kType = "signal";
  uint64_t id = 0;
  uint64_t spawn = 0;  // the Spawn's id
  int sig = 0;
  bool whole_session = false;
};

// How many processes besides init (the idle check).
struct CountProcesses {
  static constexpr const char* kType = "count";
  uint64_t id = 0;
};

// The TCP sockets listening in the box (GET /ports).
struct ListPorts {
  static constexpr const char* kType = "list_ports";
  uint64_t id = 0;
};

// ---- init → daemon, control socket

struct Ready {
  static constexpr const char* kType = "ready";
  int landlock_abi = 0;
};

struct StartFailed {
  static constexpr const char* kType = "start_failed";
  std::string message;  // the failed step and why
};

// Descriptors: the pty master when req.tty.
struct Spawned {
  static constexpr const char* kType = "spawned";
  uint64_t id = 0;
  pid_t pid = 0;  // in the box's pid namespace
};

// Whose fault a failed spawn is: the command's (its cwd, its file), or a limit it met: its
// box's own ptys (devpts max=, Limits::ptys) or the host's pool of them (kernel.pty.max).
enum class SpawnFailure { command, box_ptys, host_ptys };

// The command could not be run (cwd, exec, terminal): err is the errno.
struct SpawnFailed {
  static constexpr const char* kType = "spawn_failed";
  uint64_t id = 0;
  std::string message;
  int err = 0;
  SpawnFailure cause = SpawnFailure::command;
};

struct Signalled {
  static constexpr const char* kType = "signalled";
  uint64_t id = 0;
  bool delivered = false;  // false: the command had already been reaped (its exit is sent)
};

struct ProcessCount {
  static constexpr const char* kType = "count_result";
  uint64_t id = 0;
  int count = 0;
};

struct ListeningPort {
  uint16_t port = 0;
  pid_t pid = 0;     // a process holding the socket (0: none found, e.g. already gone)
  std::string name;  // its command name (/proc/PID/comm)
  bool operator==(const ListeningPort&) const = default;
};

struct Ports {
  static constexpr const char* kType = "ports";
  uint64_t id = 0;
  std::vector<ListeningPort> ports;  // by port, each port once
};

// A request init could not carry out (not a command's failure: see SpawnFailed).
struct Refused {
  static constexpr const char* kType = "refused";
  uint64_t id = 0;
  std::string message;
};

// ---- init → daemon, events socket

struct Exited {
  static constexpr const char* kType = "exited";
  uint64_t spawn = 0;  // the Spawn's id
  int status = 0;      // raw wait status
};

// ---- daemon ⇄ zygote

// Clone a box init. Descriptors: control, events, then the netns (start.has_netns) and the
// cgroup directory (CLONE_INTO_CGROUP in flags).
struct CloneInit {
  static constexpr const char* kType = "clone";
  uint64_t flags = 0;  // clone3 flags: the box's namespaces
  StartBox start;      // what the new init starts on, without waiting for a message
};

// Descriptors: the new init's pidfd.
struct Cloned {
  static constexpr const char* kType = "cloned";
  pid_t pid = 0;
  // The zygote has no /etc template (why); the init was told to copy /etc instead.
  std::string etc_template_error;
};

struct CloneFailed {
  static constexpr const char* kType = "clone_failed";
  std::string message;
  int err = 0;
};

// What each receiver accepts, where.
using InitRequest = std::variant<CgroupJoined, Spawn, Signal, CountProcesses, ListPorts>;
using InitReply = std::variant<Ready, StartFailed, Spawned, SpawnFailed, Signalled, ProcessCount, Ports, Refused>;
using InitEvent = std::variant<Exited>;
using ZygoteReply = std::variant<Cloned, CloneFailed>;

// A message that breaks the schema: another version, an unexpected type, a bad field.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

#define AGENTBOX_MESSAGE_JSON(T)               \
  void to_json(nlohmann::json& j, const T& m); \
  void from_json(const nlohmann::json& j, T& m);
AGENTBOX_MESSAGE_JSON(StartBox)
AGENTBOX_MESSAGE_JSON(CgroupJoined)
AGENTBOX_MESSAGE_JSON(Spawn)
AGENTBOX_MESSAGE_JSON(Signal)
AGENTBOX_MESSAGE_JSON(CountProcesses)
AGENTBOX_MESSAGE_JSON(ListPorts)
AGENTBOX_MESSAGE_JSON(Ports)
AGENTBOX_MESSAGE_JSON(Ready)
AGENTBOX_MESSAGE_JSON(StartFailed)
AGENTBOX_MESSAGE_JSON(Spawned)
AGENTBOX_MESSAGE_JSON(SpawnFailed)
AGENTBOX_MESSAGE_JSON(Signalled)
AGENTBOX_MESSAGE_JSON(ProcessCount)
AGENTBOX_MESSAGE_JSON(Refused)
AGENTBOX_MESSAGE_JSON(Exited)
AGENTBOX_MESSAGE_JSON(CloneInit)
AGENTBOX_MESSAGE_JSON(Cloned)
AGENTBOX_MESSAGE_JSON(CloneFailed)
#undef AGENTBOX_MESSAGE_JSON

// The wire form of one message.
template <class M>
nlohmann::json encode(const M& m) {
  nlohmann::json j = m;
  j["v"] = kVersion;
  j["t"] = M::kType;
  return j;
}

// The type name of a body ("" when it has none), for errors and logs.
std::string type_of(const nlohmann::json& body);

// Checks the envelope: an object of this version that names its type. Throws ProtocolError.
void check_envelope(const nlohmann::json& body);

// A field the schema could not read, as a ProtocolError naming the message.
[[noreturn]] void malformed(const char* type, const std::exception& e);

// The body as M, whose type it must name. Throws ProtocolError.
template <class M>
M decode_as(const nlohmann::json& body) {
  check_envelope(body);
  if (type_of(body) != M::kType)
    throw ProtocolError("protocol: expected '" + std::string(M::kType) + "', got '" + type_of(body) + "'");
  M m;
  try {
    from_json(body, m);
  } catch (const std::exception& e) {
    malformed(M::kType, e);
  }
  return m;
}

// The one alternative of Set whose type the body names. Throws ProtocolError.
template <class Set>
Set decode(const nlohmann::json& body) {
  check_envelope(body);
  const std::string t = type_of(body);
  std::optional<Set> out;
  [&]<class... Ms>(std::type_identity<std::variant<Ms...>>) {
    ((!out && t == Ms::kType ? (out.emplace(decode_as<Ms>(body)), 0) : 0), ...);
  }(std::type_identity<Set>{});
  if (!out) throw ProtocolError("protocol: unexpected message '" + t + "'");
  return std::move(*out);
}

// Sends a typed message with its descriptors (protocol::send).
template <class M>
void send_message(int sock, const M& m, std::span<const int> fds = {}) {
  send(sock, encode(m), fds);
}

}  // namespace agentbox::protocol
