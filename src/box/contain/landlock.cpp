#include "box/contain/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

// Newer than Debian 12's header; values from the kernel's uapi (never change once released).
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)  // ABI 2
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  // ABI 5
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  // ABI 6
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)  // ABI 6
#endif

namespace agentbox::landlock {
namespace {

// The newest ABI whose rights this file knows. ABI 7 added audit-log flags only, so a newer
// kernel gets the ABI 7 ruleset (older rulesets stay valid on newer kernels).
constexpr int kNewestKnownAbi = 7;

// struct landlock_ruleset_attr as of ABI 6. The header's copy may hold only the first field;
// the kernel accepts any prefix size, so the size passed follows the ABI.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI >= 4; left 0: the box's network namespace is the boundary
  uint64_t scoped;              // ABI >= 6
};

// Each filesystem right and the ABI that introduced it.
struct FsRight {
  int abi;
  uint64_t bit;
};
constexpr FsRight kFsRights[] = {
    {1, LANDLOCK_ACCESS_FS_EXECUTE},   {1, LANDLOCK_ACCESS_FS_WRITE_FILE}, {1, LANDLOCK_ACCESS_FS_READ_FILE},
    {1, LANDLOCK_ACCESS_FS_READ_DIR},  {1, LANDLOCK_ACCESS_FS_REMOVE_DIR}, {1, LANDLOCK_ACCESS_FS_REMOVE_FILE},
    {1, LANDLOCK_ACCESS_FS_MAKE_CHAR}, {1, LANDLOCK_ACCESS_FS_MAKE_DIR},   {1, LANDLOCK_ACCESS_FS_MAKE_REG},
    {1, LANDLOCK_ACCESS_FS_MAKE_SOCK}, {1, LANDLOCK_ACCESS_FS_MAKE_FIFO},  {1, LANDLOCK_ACCESS_FS_MAKE_BLOCK},
    {1, LANDLOCK_ACCESS_FS_MAKE_SYM},  {2, LANDLOCK_ACCESS_FS_REFER},      {3, LANDLOCK_ACCESS_FS_TRUNCATE},
    {5, LANDLOCK_ACCESS_FS_IOCTL_DEV},
};

constexpr uint64_t kReadOnly = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// Everything except making device nodes (a box never needs one; without CAP_MKNOD the kernel
// refuses anyway) and device ioctls (meaningless outside /dev).
constexpr uint64_t kReadWrite =
    kReadOnly | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
    LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
    LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE;
// No MAKE_*: /dev is init's; O_TRUNC on a device is ignored by the kernel, no TRUNCATE needed.
constexpr uint64_t kDevice = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                             LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_IOCTL_DEV;
constexpr uint64_t kListOnly = LANDLOCK_ACCESS_FS_READ_DIR;
// The rights the kernel accepts on a rule for a non-directory.
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                 LANDLOCK_ACCESS_FS_IOCTL_DEV;

uint64_t fs_rights_of(int abi) {
  uint64_t rights = 0;
  for (const FsRight& r : kFsRights)
    if (abi >= r.abi) rights |= r.bit;
  return rights;
}

uint64_t rights_of(Access access) {
  switch (access) {
    case Access::read_only: return kReadOnly;
    case Access::read_write: return kReadWrite;
    case Access::device: return kDevice;
    case Access::list_only: return kListOnly;
  }
  return 0;
}

// Adds one path rule; a path missing in this box is skipped (system_paths lists /lib32 etc.
// for hosts that have them), any other failure is an error.
void add_path_rule(int ruleset, const PathRule& rule, uint64_t handled) {
  if (rule.path.empty() || rule.path.front() != '/')
    throw Error("landlock: rule path is not absolute: '" + rule.path + "'", EINVAL);
  UniqueFd fd(::open(rule.path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return;
    throw sys_error("open(" + rule.path + ", O_PATH)");
  }
  struct stat st {};
  check(::fstat(fd.get(), &st), "fstat(" + rule.path + ")");
  uint64_t allowed = rights_of(rule.access) & handled;
  if (!S_ISDIR(st.st_mode)) allowed &= kFileRights;
  if (allowed == 0) return;  // e.g. list_only on a file: nothing to grant
  landlock_path_beneath_attr attr{};
  attr.allowed_access = allowed;
  attr.parent_fd = fd.get();
  check(::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0),
        "landlock_add_rule(" + rule.path + ")");
}

}  // namespace

int abi_version() {
  const long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

std::vector<PathRule> rules_for(const BoxSpec& spec) {
  std::vector<PathRule> rules;
  // Listing "/" (and, since rules hold for everything beneath, any directory) is allowed so
  // `ls /`, shells and file pickers work. It reveals names only, never contents or write
  // access, and the box's root is a tmpfs holding just the mounts init chose.
  rules.push_back({"/", Access::list_only});
  for (const std::string& p : spec.system_paths) rules.push_back({p, Access::read_only});
  rules.push_back({"/etc", Access::read_only});
  // /proc: read-only. EXECUTE there grants nothing: /proc holds no executable files, and
  // /proc/self/exe and the like are magic links Landlock checks at their target's path.
  rules.push_back({"/proc", Access::read_only});
  rules.push_back({"/dev", Access::device});
  if (!spec.home_target.empty()) rules.push_back({spec.home_target, Access::read_write});
  rules.push_back({"/tmp", Access::read_write});
  rules.push_back({"/dev/shm", Access::read_write});
  for (const BindMount& b : spec.binds)
    rules.push_back({b.target, b.writable ? Access::read_write : Access::read_only});
  return rules;
}

int apply_in_child(const BoxSpec& spec) {
  const int abi = std::min(abi_version(), kNewestKnownAbi);
  if (abi == 0) {
    if (spec.allow_without_landlock) return 0;
    throw Error("landlock: not available in this kernel (allow_without_landlock is not set)", EOPNOTSUPP);
  }

  RulesetAttr attr{};
  size_t attr_size = offsetof(RulesetAttr, handled_access_net);
  attr.handled_access_fs = fs_rights_of(abi);
  // No TCP rights are handled (DESIGN §3): the box's network namespace holds only its own `lo`,
  // so a connect reaches nothing outside the box, and the box's programs must reach their own
  // servers there on any port.
  if (abi >= 6) {
    attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
    attr_size = sizeof(RulesetAttr);
  }
  UniqueFd ruleset(
      static_cast<int>(check(::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0), "landlock_create_ruleset")));

  for (const PathRule& rule : rules_for(spec)) add_path_rule(ruleset.get(), rule, attr.handled_access_fs);

  check(::syscall(SYS_landlock_restrict_self, ruleset.get(), 0), "landlock_restrict_self");
  return abi;
}

}  // namespace agentbox::landlock
