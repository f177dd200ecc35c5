/* The floor of a one-shot box on this machine: the least a program can do to run a command the
 * way `agentbox run -- CMD` does, timed beside agentbox and bwrap by bench/oneshot.sh.
 *
 * One static C program, no C++ runtime, no init process, no protocol: a vfork-style clone into
 * the box's namespaces (mount, pid, ipc, uts, net, cgroup), then in the child the box's mounts as
 * box/contain/mounts.cpp makes them (a new root on tmpfs, the system tree bound read-only, an
 * /etc of the allowlisted host entries and the box's own passwd, group, hostname, hosts and
 * resolv.conf, /proc with its masks, /dev with its own devpts, /tmp, a home), pivot_root, the
 * hostname, a host uid without capabilities, no_new_privs and exec. No Landlock, no seccomp, no
 * cgroup: those are agentbox's own additions over bwrap, left out so this is a floor.
 *
 *   oneshot_floor [--etc=snapshot|bind|copy|none] [--bwrap] -- CMD [ARGS...]   (as root)
 *
 * --etc: how the host's allowlisted /etc files reach the box. snapshot (the default, what
 * `agentbox run` does: box/etc_snapshots.hpp): one read-only bind of a directory holding their
 * copies and the box's own files, made once in /tmp/agentbox-floor-etc (outside the timed work
 * after the first run); bind: one read-only bind per file; copy: the files copied into the box's
 * root; none: only the box's own files. The allowlisted directories are bound in every mode but
 * none. --bwrap: bwrap's mounts in bench/oneshot.sh instead (/usr read-only, the /lib, /lib64
 * and /bin links, /proc, /dev), the floor of what bwrap is asked there.
 * Exits with the command's status; 125 when a step fails (the step is named on stderr). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum etc_mode { ETC_SNAPSHOT, ETC_BIND, ETC_COPY, ETC_NONE };

static enum etc_mode etc_mode = ETC_SNAPSHOT;
static const char kSnapshot[] = "/tmp/agentbox-floor-etc";
static int bwrap_like = 0;
static char** command;

static void die(const char* what) {
  fprintf(stderr, "oneshot_floor: %s: %s\n", what, strerror(errno));
  _exit(125);
}

static void must(int rc, const char* what) {
  if (rc != 0) die(what);
}

static void mnt(const char* src, const char* target, const char* type, unsigned long flags, const char* data) {
  if (mount(src, target, type, flags, data) != 0) die(target);
}

/* A read-only (unless writable) nosuid,nodev bind of source onto target, recursive. */
static void bind(const char* source, const char* target, int writable) {
  int tree = (int)syscall(SYS_open_tree, AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
  if (tree < 0) die(source);
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY)};
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) die(source);
  if (syscall(SYS_move_mount, tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0) die(target);
  close(tree);
}

static void touch(const char* path, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) die(path);
  close(fd);
}

static void write_new(const char* path, const char* content) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) die(path);
  if (write(fd, content, strlen(content)) != (ssize_t)strlen(content)) die(path);
  close(fd);
}

static void copy_link(const char* from, const char* to) {
  char target[4096];
  ssize_t n = readlink(from, target, sizeof target - 1);
  if (n < 0) die(from);
  target[n] = '\0';
  must(symlink(target, to), to);
}

/* The names of box/contain/mounts.cpp's etc_allowlist(). */
static const char* const etc_names[] = {"nsswitch.conf",
                                        "ld.so.cache",
                                        "ld.so.conf",
                                        "ld.so.conf.d",
                                        "host.conf",
                                        "gai.conf",
                                        "protocols",
                                        "services",
                                        "networks",
                                        "rpc",
                                        "ethertypes",
                                        "localtime",
                                        "timezone",
                                        "locale.alias",
                                        "locale.conf",
                                        "os-release",
                                        "debian_version",
                                        "lsb-release",
                                        "issue",
                                        "shells",
                                        "profile",
                                        "bash.bashrc",
                                        "bash_completion",
                                        "bash_completion.d",
                                        "inputrc",
                                        "terminfo",
                                        "login.defs",
                                        "mtab",
                                        "ssl/certs",
                                        "ssl/openssl.cnf",
                                        "ca-certificates",
                                        "ca-certificates.conf",
                                        "alternatives",
                                        "mime.types",
                                        "mailcap",
                                        "magic",
                                        "magic.mime",
                                        "manpath.config",
                                        "papersize",
                                        "vim",
                                        "python3",
                                        "python3.11",
                                        "perl",
                                        "fonts",
                                        "ImageMagick-6",
                                        "java-17-openjdk",
                                        "R",
                                        "emacs",
                                        "xdg"};

static void copy_file(const char* from, const char* to, mode_t mode) {
  int in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) die(from);
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 0644);
  if (out < 0) die(to);
  for (;;) {
    ssize_t n = sendfile(out, in, NULL, 1 << 20);
    if (n == 0) break;
    if (n < 0 && errno != EINTR) die(to);
  }
  close(in);
  close(out);
}

static const char kPasswd[] =
    "root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:1000000:1000000:agent:/home/agent:/bin/bash\n";
static const char kGroup[] = "root:x:0:\ntty:x:5:\nagent:x:1000000:\n";

static void write_own_files(const char* etc) {
  static const char* const names[] = {"passwd", "group", "hostname", "hosts", "resolv.conf"};
  static const char* const contents[] = {kPasswd, kGroup, "agentbox\n", "127.0.0.1\tlocalhost\n127.0.1.1\tagentbox\n",
                                         "nameserver 127.0.0.1\n"};
  char path[512];
  for (size_t i = 0; i < sizeof names / sizeof *names; ++i) {
    snprintf(path, sizeof path, "%s/%s", etc, names[i]);
    write_new(path, contents[i]);
  }
}

/* The snapshot, made once before the clone (as `agentbox run` finds its own made): the
 * allowlisted files copied, the allowlisted directories empty, the box's own files. */
static void make_snapshot(void) {
  char tmp[] = "/tmp/agentbox-floor-etc.XXXXXX", host[512], box[512];
  struct stat st;
  if (stat(kSnapshot, &st) == 0) return;
  if (!mkdtemp(tmp) || chmod(tmp, 0755) != 0) die("mkdtemp snapshot");
  for (size_t i = 0; i < sizeof etc_names / sizeof *etc_names; ++i) {
    snprintf(host, sizeof host, "/etc/%s", etc_names[i]);
    snprintf(box, sizeof box, "%s/%s", tmp, etc_names[i]);
    if (lstat(host, &st) != 0) continue;
    const char* slash = strchr(etc_names[i], '/');
    if (slash) {
      char parent[512];
      snprintf(parent, sizeof parent, "%s/%.*s", tmp, (int)(slash - etc_names[i]), etc_names[i]);
      if (mkdir(parent, 0755) != 0 && errno != EEXIST) die(parent);
    }
    if (S_ISLNK(st.st_mode))
      copy_link(host, box);
    else if (S_ISDIR(st.st_mode))
      must(mkdir(box, 0755), box);
    else if (S_ISREG(st.st_mode))
      copy_file(host, box, st.st_mode);
  }
  write_own_files(tmp);
  if (rename(tmp, kSnapshot) != 0 && errno != EEXIST && errno != ENOTEMPTY) die("rename snapshot");
}

static void build_etc(void) {
  must(mkdir("/newroot/etc", 0755), "mkdir /newroot/etc");
  if (etc_mode == ETC_SNAPSHOT) {
    char host[512], box[512];
    bind("/oldroot/tmp/agentbox-floor-etc", "/newroot/etc", 0);
    for (size_t i = 0; i < sizeof etc_names / sizeof *etc_names; ++i) {
      struct stat st;
      snprintf(host, sizeof host, "/oldroot/etc/%s", etc_names[i]);
      if (lstat(host, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      snprintf(box, sizeof box, "/newroot/etc/%s", etc_names[i]);
      bind(host, box, 0);
    }
    return;
  }
  if (etc_mode != ETC_NONE) {
    char host[512], box[512];
    for (size_t i = 0; i < sizeof etc_names / sizeof *etc_names; ++i) {
      struct stat st;
      snprintf(host, sizeof host, "/oldroot/etc/%s", etc_names[i]);
      snprintf(box, sizeof box, "/newroot/etc/%s", etc_names[i]);
      if (lstat(host, &st) != 0) continue;
      const char* slash = strchr(etc_names[i], '/');
      if (slash) {
        char parent[512];
        snprintf(parent, sizeof parent, "/newroot/etc/%.*s", (int)(slash - etc_names[i]), etc_names[i]);
        if (mkdir(parent, 0755) != 0 && errno != EEXIST) die(parent);
      }
      if (S_ISLNK(st.st_mode)) {
        copy_link(host, box);
      } else if (S_ISDIR(st.st_mode)) {
        must(mkdir(box, 0755), box);
        bind(host, box, 0);
      } else if (S_ISREG(st.st_mode)) {
        if (etc_mode == ETC_COPY) {
          copy_file(host, box, st.st_mode);
        } else {
          touch(box, 0644);
          bind(host, box, 0);
        }
      }
    }
  }
  write_own_files("/newroot/etc");
}

static void build_proc(void) {
  static const char* const files[] = {"kcore",       "keys",          "key-users",     "timer_list", "timer_stats",
                                      "sched_debug", "latency_stats", "sysrq-trigger", "cmdline",    "config.gz",
                                      "kallsyms",    "modules",       "interrupts",    "diskstats",  "partitions"};
  static const char* const dirs[] = {"acpi", "asound", "scsi", "bus", "irq", "fs"};
  char path[256];
  struct stat st;
  must(mkdir("/newroot/proc", 0755), "mkdir /newroot/proc");
  mnt("proc", "/newroot/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  if (bwrap_like) return;
  for (size_t i = 0; i < sizeof files / sizeof *files; ++i) {
    snprintf(path, sizeof path, "/newroot/proc/%s", files[i]);
    if (lstat(path, &st) == 0) mnt("/oldroot/dev/null", path, NULL, MS_BIND, NULL);
  }
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; ++i) {
    snprintf(path, sizeof path, "/newroot/proc/%s", dirs[i]);
    if (lstat(path, &st) == 0)
      mnt("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555");
  }
  mnt("/newroot/proc/sys", "/newroot/proc/sys", NULL, MS_BIND | MS_REC, NULL);
  mnt(NULL, "/newroot/proc/sys", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static void build_dev(void) {
  static const char* const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  char host[64], box[64];
  must(mkdir("/newroot/dev", 0755), "mkdir /newroot/dev");
  mnt("tmpfs", "/newroot/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
  for (size_t i = 0; i < sizeof nodes / sizeof *nodes; ++i) {
    snprintf(host, sizeof host, "/oldroot/dev/%s", nodes[i]);
    snprintf(box, sizeof box, "/newroot/dev/%s", nodes[i]);
    touch(box, 0666);
    mnt(host, box, NULL, MS_BIND, NULL);
  }
  must(mkdir("/newroot/dev/pts", 0755), "mkdir /newroot/dev/pts");
  mnt("devpts", "/newroot/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
      "newinstance,ptmxmode=0666,mode=0620,gid=5,max=256");
  must(symlink("pts/ptmx", "/newroot/dev/ptmx"), "symlink ptmx");
  must(symlink("/proc/self/fd", "/newroot/dev/fd"), "symlink fd");
  must(symlink("/proc/self/fd/0", "/newroot/dev/stdin"), "symlink stdin");
  must(symlink("/proc/self/fd/1", "/newroot/dev/stdout"), "symlink stdout");
  must(symlink("/proc/self/fd/2", "/newroot/dev/stderr"), "symlink stderr");
  if (bwrap_like) return;
  must(mkdir("/newroot/dev/shm", 0755), "mkdir /newroot/dev/shm");
  mnt("tmpfs", "/newroot/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=67108864");
}

static void build_system_tree(void) {
  static const char* const paths[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"};
  char host[64], box[64];
  for (size_t i = 0; i < sizeof paths / sizeof *paths; ++i) {
    struct stat st;
    if (bwrap_like && i > 0) break; /* bwrap: /usr, and the links below */
    snprintf(host, sizeof host, "/oldroot%s", paths[i]);
    snprintf(box, sizeof box, "/newroot%s", paths[i]);
    if (lstat(host, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      copy_link(host, box);
      continue;
    }
    must(mkdir(box, 0755), box);
    bind(host, box, 0);
  }
  if (bwrap_like) {
    must(symlink("usr/lib", "/newroot/lib"), "symlink lib");
    must(symlink("usr/lib64", "/newroot/lib64"), "symlink lib64");
    must(symlink("usr/bin", "/newroot/bin"), "symlink bin");
  }
}

/* The child, between clone and exec: raw system calls and stack buffers only. */
static int child(void* arg) {
  (void)arg;
  mnt(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
  mnt("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k");
  must(chdir("/tmp"), "chdir scratch");
  must(mkdir("newroot", 0755), "mkdir newroot");
  must(mkdir("oldroot", 0755), "mkdir oldroot");
  must((int)syscall(SYS_pivot_root, ".", "oldroot"), "pivot_root scratch");
  must(chdir("/"), "chdir /");
  mnt("tmpfs", "/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m");
  build_system_tree();
  if (!bwrap_like) build_etc();
  build_proc();
  build_dev();
  if (!bwrap_like) {
    must(mkdir("/newroot/tmp", 0755), "mkdir /newroot/tmp");
    mnt("tmpfs", "/newroot/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=536870912");
    must(mkdir("/newroot/root", 0700), "mkdir /newroot/root");
    must(mkdir("/newroot/home", 0755), "mkdir /newroot/home");
    must(mkdir("/newroot/home/agent", 0755), "mkdir /newroot/home/agent");
    bind("/oldroot/tmp/agentbox-floor-home", "/newroot/home/agent", 1);
  }
  mnt(NULL, "/newroot", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
  must(chdir("/newroot"), "chdir newroot");
  must((int)syscall(SYS_pivot_root, ".", "."), "pivot_root box");
  must(umount2(".", MNT_DETACH), "umount oldroot");
  must(chdir("/"), "chdir / (box)");
  must(sethostname("agentbox", 8), "sethostname");
  /* A host uid without capabilities: the bounding set goes with the uid change below only for
   * the effective/permitted sets, so it is dropped explicitly, as identity.cpp does. */
  if (!bwrap_like) {
    for (int cap = 0; cap <= 40; ++cap)
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) die("PR_CAPBSET_DROP");
    must(setgroups(0, NULL), "setgroups");
    must(setresgid(1000000, 1000000, 1000000), "setresgid");
    must(setresuid(1000000, 1000000, 1000000), "setresuid");
    must(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
  }
  execvp(command[0], command);
  die(command[0]);
  return 0;
}

int main(int argc, char** argv) {
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    if (strcmp(argv[i], "--etc=snapshot") == 0)
      etc_mode = ETC_SNAPSHOT;
    else if (strcmp(argv[i], "--etc=bind") == 0)
      etc_mode = ETC_BIND;
    else if (strcmp(argv[i], "--etc=copy") == 0)
      etc_mode = ETC_COPY;
    else if (strcmp(argv[i], "--etc=none") == 0)
      etc_mode = ETC_NONE;
    else if (strcmp(argv[i], "--bwrap") == 0)
      bwrap_like = 1;
    else {
      fprintf(stderr, "usage: oneshot_floor [--etc=snapshot|bind|copy|none] [--bwrap] -- CMD [ARGS...]\n");
      return 2;
    }
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "usage: oneshot_floor [--etc=snapshot|bind|copy|none] [--bwrap] -- CMD [ARGS...]\n");
    return 2;
  }
  command = argv + i + 1;
  if (!bwrap_like && mkdir("/tmp/agentbox-floor-home", 0700) != 0 && errno != EEXIST) die("mkdir home");
  if (!bwrap_like && etc_mode == ETC_SNAPSHOT) make_snapshot();
  static char stack[64 * 1024];
  const int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP;
  pid_t pid = clone(child, stack + sizeof stack, flags | CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
  if (pid < 0) die("clone");
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) die("waitpid");
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}
