#include "box/contain/mounts.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>

#include "box/agent_paths.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::mounts {
namespace {

// Which kernel mount API makes the binds: the new one (open_tree + mount_setattr, which sets
// flags on every submount) or the classic mount(2) for kernels before 5.12.
enum class Api { new_api, legacy };

// The scratch root: any directory that exists on every host. We mount over it only inside the
// box's private mount namespace, then pivot into it so the host tree sits at /oldroot while the
// box root is assembled at /newroot (bind sources are read through /oldroot).
constexpr const char* kScratch = "/tmp";
constexpr const char* kOld = "/oldroot";
constexpr const char* kNew = "/newroot";
// The box's one writable tmpfs, mounted in the scratch root (so detached with it): its
// directories are bound as /tmp, /dev/shm and the masks' empty directory.
constexpr const char* kBoxTmp = "/boxtmp";

constexpr unsigned long kSafe = MS_NOSUID | MS_NODEV;

void do_mount(const char* src, const std::string& target, const char* type, unsigned long flags,
              const std::string& data = {}) {
  if (::mount(src, target.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0)
    throw sys_error(fmt::format("mount({}, {}, {})", src ? src : "none", target, type ? type : ""));
}

void mkdir_p(const std::string& path, mode_t mode = 0755) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) throw sys_error("mkdir(" + part + ")");
  }
}

void touch(const std::string& path, mode_t mode = 0644) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) throw sys_error("create(" + path + ")");
}

// Creates `name` under dir (AT_FDCWD: a path) holding content; it must not exist yet.
void write_new_file(int dir, const std::string& name, const std::string& content, mode_t mode = 0644) {
  UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) throw sys_error("create(" + name + ")");
  write_all(fd.get(), content);
}

// Mount flags a user namespace may not clear (they are locked on binds of the host's mounts):
// carried over so a remount does not fail with EPERM.
unsigned long locked_flags(const std::string& path) {
  struct statvfs sv {};
  if (::statvfs(path.c_str(), &sv) != 0) return 0;
  unsigned long f = 0;
  if (sv.f_flag & ST_RDONLY) f |= MS_RDONLY;
  if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  return f;
}

// Binds source (a host path under /oldroot) onto target with nosuid,nodev and, unless
// writable, read-only — on every submount with the new API, on the top mount with the legacy one.
void bind(const std::string& source, const std::string& target, bool writable, Api api) {
  if (api == Api::new_api) {
    UniqueFd tree(::open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (!tree) throw sys_error("open_tree(" + source + ")");
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY);
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
      throw sys_error("mount_setattr(" + source + ")");
    if (::move_mount(tree.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
      throw sys_error(fmt::format("move_mount({}, {})", source, target));
    return;
  }
  do_mount(source.c_str(), target, nullptr, MS_BIND | MS_REC);
  unsigned long flags = MS_BIND | MS_REMOUNT | kSafe | locked_flags(target);
  if (!writable) flags |= MS_RDONLY;
  do_mount(nullptr, target, nullptr, flags);
}

// Makes the mount point for a bind of something of this mode: a directory for directories,
// an empty file otherwise.
void make_mount_point(mode_t source_mode, const std::string& target) {
  auto slash = target.rfind('/');
  if (slash > 0) mkdir_p(target.substr(0, slash));
  if (S_ISDIR(source_mode)) {
    if (::mkdir(target.c_str(), 0755) != 0 && errno != EEXIST) throw sys_error("mkdir(" + target + ")");
  } else {
    touch(target);
  }
}

// Makes `to` (under to_dir) a symlink with the target of `from` (under from_dir).
void copy_symlink_at(int from_dir, const std::string& from, int to_dir, const std::string& to) {
  char target[4096];
  const ssize_t n = ::readlinkat(from_dir, from.c_str(), target, sizeof target - 1);
  if (n < 0) throw sys_error("readlink(" + from + ")");
  target[n] = '\0';
  if (::symlinkat(target, to_dir, to.c_str()) != 0) throw sys_error("symlink(" + to + ")");
}

// Binds a directory of the box's own tmpfs (no host mount: no locked flags) with `flags`.
void bind_own(const std::string& source, const std::string& target, unsigned long flags) {
  do_mount(source.c_str(), target, nullptr, MS_BIND);
  do_mount(nullptr, target, nullptr, MS_BIND | MS_REMOUNT | flags);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void pivot(const char* new_root, const char* put_old) {
  if (::syscall(SYS_pivot_root, new_root, put_old) != 0)
    throw sys_error(fmt::format("pivot_root({}, {})", new_root, put_old));
}

void build_system_tree(const BoxSpec& spec, Api api) {
  for (const auto& p : spec.system_paths) {
    const std::string host = kOld + p, box = kNew + p;
    struct stat st {};
    if (::lstat(host.c_str(), &st) != 0) continue;  // not on this host
    if (S_ISLNK(st.st_mode)) {
      copy_symlink_at(AT_FDCWD, host, AT_FDCWD, box);  // as a symlink: merged-/usr has /bin -> usr/bin
      continue;
    }
    make_mount_point(st.st_mode, box);
    bind(host, box, /*writable=*/false, api);
  }
}

// Copies a small host file into the box's tmpfs: the kernel moves the bytes (sendfile), no
// buffer here. The box sees a snapshot taken at its start.
void copy_file_at(int from_dir, int to_dir, const char* name, const struct stat& st) {
  UniqueFd from(::openat(from_dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!from) throw sys_error(fmt::format("open(/etc/{})", name));
  UniqueFd to(::openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, st.st_mode & 0644));
  if (!to) throw sys_error(fmt::format("create(/etc/{})", name));
  for (;;) {  // to the end, whatever size the file has grown to since the stat
    const ssize_t n = ::sendfile(to.get(), from.get(), nullptr, 1 << 20);
    if (n == 0) break;
    if (n < 0 && errno != EINTR) throw sys_error(fmt::format("sendfile(/etc/{})", name));
  }
}

// The host's allowlisted /etc entries into the directory dest_dir: regular files copied,
// symlinks as symlinks, and for each directory an empty one, handed to on_dir(name) (to bind).
template <class OnDir>
void fill_etc(int host_dir, int dest_dir, OnDir&& on_dir) {
  for (const auto& name : etc_allowlist()) {
    struct stat st {};
    if (::fstatat(host_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (const size_t slash = name.find('/'); slash != std::string::npos) {  // "ssl/certs": its parent, empty
      const std::string parent = name.substr(0, slash);
      if (::mkdirat(dest_dir, parent.c_str(), 0755) != 0 && errno != EEXIST)
        throw sys_error("mkdir(/etc/" + parent + ")");
    }
    if (S_ISLNK(st.st_mode)) {
      copy_symlink_at(host_dir, name, dest_dir, name);
    } else if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(dest_dir, name.c_str(), 0755) != 0) throw sys_error("mkdir(/etc/" + name + ")");
      on_dir(name);
    } else if (S_ISREG(st.st_mode)) {
      copy_file_at(host_dir, dest_dir, name.c_str(), st);
    }
  }
  // Claude Code's managed directory, whatever the host's is: the operator's skills when the box
  // has them (box/agent_paths.hpp), else a link to nothing. A link, not a mount point, so boxes
  // keep a shared /etc.
  if (::symlinkat(kClaudeManagedDir, dest_dir, kEtcClaudeCode) != 0)
    throw sys_error(std::string("symlink(/etc/") + kEtcClaudeCode + ")");
}

// fill_etc from host_etc into dest (paths), the host's directories bound read-only.
void fill_etc_bound(const std::string& host_etc, const std::string& dest, Api api) {
  UniqueFd host_dir(::open(host_etc.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  UniqueFd dest_dir(::open(dest.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!host_dir || !dest_dir) throw sys_error("open(" + host_etc + ", " + dest + ")");
  fill_etc(host_dir.get(), dest_dir.get(),
           [&](const std::string& name) { bind(host_etc + "/" + name, dest + "/" + name, false, api); });
}

// No DNS server is reachable from a box, and the host's servers are not its business: lookups
// fail at once (nothing listens on the box's own port 53), while HTTP clients hand names to the
// egress proxy (HTTP_PROXY), which resolves them.
constexpr const char* kResolvConf =
    "# agentbox: no DNS in this box; its egress proxy (HTTP_PROXY) resolves names\n"
    "nameserver 127.0.0.1\n"
    "options timeout:1 attempts:1\n";

// What only this box has in /etc.
std::vector<std::pair<const char*, std::string>> own_etc_files(const BoxSpec& spec) {
  return {{"passwd", passwd_file(spec)},
          {"group", group_file(spec)},
          {"hostname", spec.hostname + "\n"},
          {"hosts", hosts_file(spec)},
          {"resolv.conf", kResolvConf}};
}

void build_etc(const BoxSpec& spec, Api api) {
  const std::string etc = std::string(kNew) + "/etc";
  check(::mkdir(etc.c_str(), 0755), "mkdir(" + etc + ")");
  fill_etc_bound(std::string(kOld) + "/etc", etc, api);
  for (const auto& [name, content] : own_etc_files(spec)) write_new_file(AT_FDCWD, etc + "/" + name, content);
}

// /etc from the zygote's template (tree: its clone, taken before the host tree moved away):
// attached read-only, then the box's own files bound over the template's empty ones. They are
// written on the scratch tmpfs, which is detached with the old root at the end, so they show
// only in /etc (and the box's root tmpfs can still be made read-only: a file unlinked while a
// bind holds it would keep that remount busy).
void build_etc_from_template(const BoxSpec& spec, const UniqueFd& tree) {
  const std::string etc = std::string(kNew) + "/etc";
  check(::mkdir(etc.c_str(), 0755), "mkdir(" + etc + ")");
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    throw sys_error("mount_setattr(/etc template)");
  if (::move_mount(tree.get(), "", AT_FDCWD, etc.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    throw sys_error("move_mount(/etc template)");
  for (const auto& [name, content] : own_etc_files(spec)) {
    const std::string staged = std::string("/etc-") + name;  // in the scratch root
    write_new_file(AT_FDCWD, staged, content);
    bind(staged, etc + "/" + name, false, Api::new_api);
  }
}

// /etc from the parent's tree (build_etc_tree): attached, then the host's allowlisted
// directories the parent named bound onto the empty ones it made for them (one that is no
// longer a directory on the host is left out, as if it had changed after the start).
void attach_etc_tree(int tree, const std::vector<std::string>& dirs, Api api) {
  const std::string etc = std::string(kNew) + "/etc", host_etc = std::string(kOld) + "/etc";
  check(::mkdir(etc.c_str(), 0755), "mkdir(" + etc + ")");
  if (::move_mount(tree, "", AT_FDCWD, etc.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    throw sys_error("move_mount(/etc tree)");
  UniqueFd host_dir(::open(host_etc.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!host_dir) throw sys_error("open(" + host_etc + ")");
  for (const auto& name : etc_allowlist()) {  // only allowlisted names, whatever dirs holds
    if (std::find(dirs.begin(), dirs.end(), name) == dirs.end()) continue;
    struct stat st {};
    if (::fstatat(host_dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    bind(host_etc + "/" + name, etc + "/" + name, false, api);
  }
}

// One tmpfs for all a box writes outside its home: /tmp, /dev/shm and the empty directory the
// /proc masks show are its directories. Each superblock alive on the host costs every memory
// cgroup a slot in its shrinker table, so separate tmpfs mounts made each box's kernel memory grow
// with the number of boxes (bench/RESULTS.md, "Many users on one node"). They share its size.
void mount_box_tmpfs(const BoxSpec& spec) {
  mkdir_p(kBoxTmp);
  do_mount("tmpfs", kBoxTmp, "tmpfs", kSafe, fmt::format("mode=0755,size={}", spec.limits.tmp_bytes));
  for (auto [name, mode] : {std::pair{"tmp", 01777}, std::pair{"shm", 01777}, std::pair{"empty", 0555}}) {
    const std::string dir = std::string(kBoxTmp) + "/" + name;
    check(::mkdir(dir.c_str(), 0700), "mkdir(" + dir + ")");
    check(::chmod(dir.c_str(), static_cast<mode_t>(mode)), "chmod(" + dir + ")");
  }
}

// /dev is a directory of the root tmpfs (read-only once the root is frozen): binds of the host's
// device nodes, the box's own devpts, links, and /dev/shm from the box's tmpfs.
void build_dev(const BoxSpec& spec) {
  const std::string dev = std::string(kNew) + "/dev";
  mkdir_p(dev);
  // Device nodes are binds of the host's (mknod would need CAP_MKNOD in the initial namespace).
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string host = std::string(kOld) + "/dev/" + node, box = dev + "/" + node;
    touch(box, 0666);
    do_mount(host.c_str(), box, nullptr, MS_BIND);
  }
  // Its own devpts instance: ptys made in the box are invisible to every other box. Every
  // instance draws on the host's one pool, so the box gets at most limits.ptys of it (max=).
  mkdir_p(dev + "/pts");
  std::string pts_opts = "newinstance,ptmxmode=0666,mode=0620";
  if (spec.identity == IdentityMode::host_uid) pts_opts += ",gid=5";
  if (spec.limits.ptys) pts_opts += fmt::format(",max={}", spec.limits.ptys);
  do_mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, pts_opts);
  struct Link {
    const char* target;
    const char* name;
  };
  for (Link l : {Link{"pts/ptmx", "ptmx"}, Link{"/proc/self/fd", "fd"}, Link{"/proc/self/fd/0", "stdin"},
                 Link{"/proc/self/fd/1", "stdout"}, Link{"/proc/self/fd/2", "stderr"}}) {
    const std::string path = dev + "/" + l.name;
    if (::symlink(l.target, path.c_str()) != 0) throw sys_error("symlink(" + path + ")");
  }
  mkdir_p(dev + "/shm");
  bind_own(std::string(kBoxTmp) + "/shm", dev + "/shm", kSafe | MS_NOEXEC);
}

// /proc, with what Docker's and runc's defaults hide hidden too: files that show kernel memory,
// keys, timers and scheduler internals of the whole host, or the host's boot command line and
// kernel configuration, read empty (/dev/null bound over them); directories of host hardware
// show an empty read-only directory; /proc/sys is read-only. Paths this kernel lacks are skipped.
// diskstats and partitions list every block device with its I/O counters: each account's
// volume is a loop device, so they would show who else is here and how busy their disks are.
constexpr const char* kMaskedProcFiles[] = {
    "kcore",   "keys",      "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats", "sysrq-trigger",
    "cmdline", "config.gz", "kallsyms",  "modules",    "interrupts",  "diskstats",   "partitions",
};
constexpr const char* kMaskedProcDirs[] = {"acpi", "asound", "scsi", "bus", "irq", "fs"};

}  // namespace

void mask_proc(const std::string& proc, const std::string& null, const std::string& empty_dir) {
  for (const char* name : kMaskedProcFiles) {
    const std::string path = proc + "/" + name;
    if (!exists(path)) continue;
    do_mount(null.c_str(), path, nullptr, MS_BIND);
  }
  for (const char* name : kMaskedProcDirs) {
    const std::string path = proc + "/" + name;
    if (!exists(path)) continue;
    bind_own(empty_dir, path, MS_RDONLY | kSafe | MS_NOEXEC);
  }
  const std::string sys = proc + "/sys";
  do_mount(sys.c_str(), sys, nullptr, MS_BIND | MS_REC);
  do_mount(nullptr, sys, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | kSafe | MS_NOEXEC);
}

namespace {

void build_home_and_binds(const BoxSpec& spec, Api api) {
  const std::string home = kNew + spec.home_target;
  mkdir_p(home);
  bind(kOld + spec.home_source, home, /*writable=*/true, api);

  // Parents before children, so a bind inside another bind lands on top of it.
  std::vector<BindMount> binds = spec.binds;
  std::stable_sort(binds.begin(), binds.end(), [](const BindMount& a, const BindMount& b) {
    return std::count(a.target.begin(), a.target.end(), '/') < std::count(b.target.begin(), b.target.end(), '/');
  });
  for (const auto& b : binds) {
    const std::string host = kOld + b.source, box = kNew + b.target;
    if (!exists(box)) {
      struct stat st {};
      if (::stat(host.c_str(), &st) != 0) throw sys_error("stat(" + host + ")");
      make_mount_point(st.st_mode, box);
    }
    bind(host, box, b.writable, api);
  }
}

}  // namespace

// What programs need from the host's /etc to run, and nothing where administrators keep
// secrets: no environment, profile.d, npmrc, wgetrc, gitconfig, gnupg or subversion (proxy
// credentials, registry and API tokens), no ssl/private or pki (host keys), no resolv.conf (the
// box has its own stub: names are resolved by its egress proxy). A name with a slash brings that
// entry alone, in an otherwise empty parent.
const std::vector<std::string>& etc_allowlist() {
  static const std::vector<std::string> names = {
      // name service and libc
      "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "host.conf", "gai.conf", "protocols", "services",
      "networks", "rpc", "ethertypes",
      // locale, time, identity of the OS
      "localtime", "timezone", "locale.alias", "locale.conf", "os-release", "debian_version", "lsb-release", "issue",
      // shells and terminals
      "shells", "profile", "bash.bashrc", "bash_completion", "bash_completion.d", "inputrc", "terminfo", "login.defs",
      "mtab",
      // certificates
      "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
      // tools' system configuration
      "alternatives", "mime.types", "mailcap", "magic", "magic.mime", "manpath.config", "papersize", "vim", "python3",
      "python3.11", "perl", "fonts", "ImageMagick-6", "java-17-openjdk", "R", "emacs", "xdg",
      // notebooks' plots (Debian keeps matplotlib's defaults here) and office previews
      // (LibreOffice's registry and sofficerc are links into /etc/libreoffice)
      "matplotlibrc", "libreoffice"};
  return names;
}

// The box user, plus root and nobody so tools that look them up find them (unless the box
// user is one of them, e.g. `agentbox run` by nobody).
std::string passwd_file(const BoxSpec& spec) {
  std::string out;
  const std::string& name = login_name(spec);
  if (spec.uid != 0 && name != "root") out += "root:x:0:0:root:/root:/usr/sbin/nologin\n";
  out += fmt::format("{0}:x:{1}:{2}:{0}:{3}:{4}\n", name, spec.uid, spec.gid, spec.home_target, spec.shell);
  if (spec.uid != 65534 && name != "nobody") out += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  return out;
}

std::string group_file(const BoxSpec& spec) {
  std::string out;
  const std::string& name = login_name(spec);
  if (spec.gid != 0 && name != "root") out += "root:x:0:\n";
  if (spec.gid != 5 && name != "tty") out += "tty:x:5:\n";
  out += fmt::format("{}:x:{}:\n", name, spec.gid);
  if (spec.gid != 65534 && name != "nogroup") out += "nogroup:x:65534:\n";
  return out;
}

std::string hosts_file(const BoxSpec& spec) {
  return fmt::format("127.0.0.1\tlocalhost\n127.0.1.1\t{0}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                     spec.hostname);
}

void build_etc_template(const std::string& dir) {
  check(::mkdir(dir.c_str(), 0755), "mkdir(" + dir + ")");
  fill_etc_bound("/etc", dir, Api::new_api);
  // Empty files where each box binds its own (their names: own_etc_files, whatever the spec).
  for (const auto& file : own_etc_files(BoxSpec{})) touch(dir + "/" + file.first);
}

std::vector<std::string> fill_etc_dir(int host_etc, int dest_dir, const BoxSpec& spec) {
  std::vector<std::string> dirs;
  fill_etc(host_etc, dest_dir, [&](const std::string& name) { dirs.push_back(name); });
  for (const auto& [name, content] : own_etc_files(spec)) write_new_file(dest_dir, name, content);
  return dirs;
}

EtcFingerprint etc_fingerprint(int host_etc, const BoxSpec& spec) {
  EtcFingerprint f;
  for (const auto& name : etc_allowlist()) {
    struct stat st {};
    if (::fstatat(host_etc, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) throw sys_error("stat(/etc/" + name + ")");
      continue;  // not on this host: fill_etc leaves it out
    }
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = ::readlinkat(host_etc, name.c_str(), target, sizeof target - 1);
      if (n < 0) throw sys_error("readlink(/etc/" + name + ")");
      f.text += fmt::format("link {} {}\n", name, std::string_view(target, static_cast<size_t>(n)));
    } else if (S_ISDIR(st.st_mode)) {
      f.text += fmt::format("dir {}\n", name);  // its content is bound, not copied
      f.dirs.push_back(name);
    } else if (S_ISREG(st.st_mode)) {
      // Any write changes ctime (which no one can set back); a replacement changes the inode.
      f.text += fmt::format("file {} {}:{} {} {:o} {}:{} {}.{:09} {}.{:09}\n", name, st.st_dev, st.st_ino, st.st_size,
                            st.st_mode, st.st_uid, st.st_gid, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ctim.tv_sec,
                            st.st_ctim.tv_nsec);
    }
  }
  f.text += fmt::format("link {} {}\n", kEtcClaudeCode, kClaudeManagedDir);
  for (const auto& [name, content] : own_etc_files(spec))
    f.text += fmt::format("own {} {}\n{}", name, content.size(), content);
  return f;
}

EtcTree build_etc_tree(const BoxSpec& spec) {
  UniqueFd fs(::fsopen("tmpfs", FSOPEN_CLOEXEC));
  if (!fs) throw sys_error("fsopen(tmpfs)");
  if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, "mode", "0755", 0) != 0 ||
      ::fsconfig(fs.get(), FSCONFIG_SET_STRING, "size", "1m", 0) != 0 ||
      ::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    throw sys_error("fsconfig(tmpfs)");
  UniqueFd tree(::fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
  if (!tree) throw sys_error("fsmount(tmpfs)");
  UniqueFd host_dir(::open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!host_dir) throw sys_error("open(/etc)");
  std::vector<std::string> dirs = fill_etc_dir(host_dir.get(), tree.get(), spec);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    throw sys_error("mount_setattr(/etc tree, ro)");
  return {std::move(tree), std::move(dirs)};
}

void apply_in_child(const BoxSpec& spec, bool legacy_mounts, const EtcFrom& etc) {
  const Api api = legacy_mounts ? Api::legacy : Api::new_api;
  // Nothing mounted from here on may propagate back to the host.
  do_mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE);

  // The zygote's /etc template sits on a tmpfs over /tmp: clone it (with its binds) if this box
  // uses it, then take that tmpfs away so /tmp (scratch below, and bind sources) is the host's.
  UniqueFd etc_template;
  if (etc.source == EtcSource::zygote_template) {
    etc_template.reset(::open_tree(AT_FDCWD, kEtcTemplate, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (!etc_template) throw sys_error(std::string("open_tree(") + kEtcTemplate + ")");
  }
  if (etc.template_mounted) check(::umount2(kScratch, MNT_DETACH), "umount2(/etc template)");

  do_mount("tmpfs", kScratch, "tmpfs", kSafe, "mode=0755,size=64k");
  check(::chdir(kScratch), "chdir(scratch)");
  check(::mkdir("newroot", 0755), "mkdir(newroot)");
  check(::mkdir("oldroot", 0755), "mkdir(oldroot)");
  pivot(".", "oldroot");
  check(::chdir("/"), "chdir(/)");

  do_mount("tmpfs", kNew, "tmpfs", kSafe, "mode=0755,size=1m");
  build_system_tree(spec, api);
  if (etc_template) {
    build_etc_from_template(spec, etc_template);
  } else if (etc.source == EtcSource::parent_tree && etc.tree_fd >= 0) {
    attach_etc_tree(etc.tree_fd, etc.tree_dirs, api);
  } else {
    build_etc(spec, api);
  }
  mount_box_tmpfs(spec);
  mkdir_p(std::string(kNew) + "/proc");
  do_mount("proc", std::string(kNew) + "/proc", "proc", kSafe | MS_NOEXEC);
  mask_proc(std::string(kNew) + "/proc", std::string(kOld) + "/dev/null", std::string(kBoxTmp) + "/empty");
  build_dev(spec);
  mkdir_p(std::string(kNew) + "/tmp");
  bind_own(std::string(kBoxTmp) + "/tmp", std::string(kNew) + "/tmp", kSafe);
  mkdir_p(std::string(kNew) + "/root", 0700);
  build_home_and_binds(spec, api);

  // The root tmpfs (mount points, /etc) is done: freeze it.
  do_mount(nullptr, kNew, nullptr, MS_REMOUNT | MS_RDONLY | kSafe);

  // Pivot into the box root with the old root stacked on top of it, then detach the old root
  // (and the host tree below it) lazily.
  check(::chdir(kNew), "chdir(newroot)");
  pivot(".", ".");
  check(::umount2(".", MNT_DETACH), "umount2(oldroot)");
  check(::chdir("/"), "chdir(/)");
}

}  // namespace agentbox::mounts
