#pragma once
// BoxSpec: everything that defines one box, as plain data with no syscalls, so it can be built
// from config, API requests or stored rows and unit-tested without privileges. Clone flags,
// mounts, Landlock rules, seccomp, cgroup limits and rlimits are each derived from it in one
// function (see their files). It travels to agentbox-init as JSON (box_spec_json.cpp).
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace agentbox {

// An extra host path made visible inside the box.
struct BindMount {
  std::string source;     // host path (absolute)
  std::string target;     // path inside the box (absolute)
  bool writable = false;  // read-only unless set
};

// Resource limits; 0 means "no limit of this kind".
struct Limits {
  uint64_t memory_bytes = 0;          // cgroup memory limit, bytes
  uint64_t pids = 4096;               // cgroup pids.max, processes+threads
  uint32_t cpu_millicores = 0;        // cgroup CPU quota, 1000 = one core
  uint64_t tmp_bytes = 512ull << 20;  // size of the private tmpfs /tmp and /dev/shm share, bytes
  uint64_t nofile = 65536;            // RLIMIT_NOFILE soft=hard
  uint64_t nproc = 0;                 // RLIMIT_NPROC (per uid; only meaningful with own uid)
  uint64_t file_size = 0;             // RLIMIT_FSIZE, bytes (a server account's disk quota); 0: none
  // Pseudo-terminals the box's own devpts hands out (its `max=`): every devpts draws on the
  // host's one pool (kernel.pty.max less kernel.pty.reserve), so no box may take much of it.
  uint32_t ptys = 256;
  // Socket buffers of the box's TCP connections, bytes: they come out of the host-wide
  // net.ipv4.tcp_mem, past whose pressure limit every TCP socket on the host stalls. cgroup v1:
  // memory.kmem.tcp.limit_in_bytes (charged and bounded); v2 charges them to memory_bytes and has
  // no knob of its own. 0: not bounded separately.
  uint64_t tcp_memory_bytes = 0;
};

// How the box's uid is made.
enum class IdentityMode {
  host_uid,  // daemon/CLI runs as root: the box runs as a real host uid from the range
  user_ns,   // ordinary user: a user namespace maps the box uid to the caller's own uid
};

struct BoxSpec {
  std::string name;      // the box's key (store/box_key.hpp); the account name shown inside unless login says
  std::string login;     // the passwd entry and $USER when not name (a profile's box: the account); "" = name
  std::string hostname;  // uts hostname inside the box
  uid_t uid = 0;         // uid inside the box (and on the host in host_uid mode)
  gid_t gid = 0;         // gid inside the box (and on the host in host_uid mode)
  IdentityMode identity = IdentityMode::host_uid;
  uid_t outer_uid = 0;  // user_ns mode: the caller's uid the box maps onto
  gid_t outer_gid = 0;  // user_ns mode: the caller's gid the box maps onto

  std::string home_source;  // host directory shown read-write as home
  std::string home_target;  // "/home/NAME" inside the box
  std::string shell = "/bin/bash";
  std::vector<BindMount> binds;  // extra mounts, applied after the system tree

  // Read-only system tree: each present host path is bound (a symlink is copied as a symlink).
  std::vector<std::string> system_paths = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"};

  Limits limits;
  // Stopped after this long idle (no command, no process); 0: BoxManagerOptions::idle_timeout.
  // A profile's `idle_timeout` (config/profile_config.hpp).
  std::chrono::milliseconds idle_timeout{0};
  bool use_cgroup = true;  // false only where cgroups are not available (non-root run)

  // Network: by default the box gets a fresh network namespace holding only `lo`. When
  // netns_fd is passed at start (server accounts), the box joins that persistent one instead.
  // That namespace is the whole network boundary: no Landlock TCP rule, so the box's programs
  // reach their own servers on its loopback, on any port (DESIGN §3).
  // The daemon's egress proxy listens in that namespace on 127.0.0.1:egress_proxy_port; its
  // commands get HTTP_PROXY and friends pointing there (box_env.hpp). 0: no proxy.
  uint16_t egress_proxy_port = 0;
  // The daemon's inference gateway listens there on 127.0.0.1:inference_port; its commands get
  // ANTHROPIC_BASE_URL pointing there and a placeholder key (the gateway adds the real one).
  // 0: no gateway.
  uint16_t inference_port = 0;

  // Landlock is required where the kernel has it; a host without it needs this opt-out.
  bool allow_without_landlock = false;
};

// One command to start inside a running box.
// The user name shown inside the box: login, else name.
inline const std::string& login_name(const BoxSpec& spec) { return spec.login.empty() ? spec.name : spec.login; }

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH from env
  std::vector<std::string> env;   // the whole environment, "K=V"
  std::string cwd;                // inside the box; empty = home
  bool tty = true;                // true: init allocates a pty in the box's devpts
  uint16_t rows = 24, cols = 80;  // initial pty size
  // When set, argv stands for this shell command (see exec/plain_command.hpp): argv runs with
  // the environment the shell would have given it, and if argv[0] cannot be run (not on PATH,
  // not executable, no #!) this runs instead, so the shell reports it as it would have.
  std::vector<std::string> shell_fallback;
};

}  // namespace agentbox
