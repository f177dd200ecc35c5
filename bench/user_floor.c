/* The memory floor of one active user on this machine: what the kernel takes for the least a box
 * can be, measured the way bench/users_bench.py measures agentbox (issue 37: <= 0.5 MiB per user).
 *
 * For each level below, N children are made and kept alive at once; each is one sleeping process
 * (a small static program's worth: this one, forked) with what the level adds. The figures are
 * the kernel's counters before and after, divided by N: MemAvailable's drop, and the kernel-side
 * part of it (Slab + KernelStack + PageTables + Percpu + Shmem in /proc/meminfo).
 *
 *   process     fork, then pause()
 *   netns       + its own network namespace (unshare CLONE_NEWNET), loopback up
 *   listener    + a TCP listener on 127.0.0.1 in it (the egress proxy's, one socket)
 *   namespaces  + mount, pid, ipc, uts and cgroup namespaces (a box has all six)
 *   cgroups     + its own memory, pids and cpu group (cgroup v1 here; v2 when mounted alone)
 *   box         in its own groups, COMMAND: bench/oneshot.sh's floor of a box (oneshot_floor:
 *               all six namespaces and a box's mounts: a tmpfs root, the system tree, /etc,
 *               /proc, /dev with devpts, /tmp, a home) around `sleep`; no listener
 *
 *   user_floor [N] [ROUNDS] [-- COMMAND...]     (as root; N = 500, ROUNDS = 3)
 * USER_FLOOR_LEVEL=NAME measures that level alone (how a level's cost grows with N).
 *
 * A box has more than this (its mounts, a tmpfs root, Landlock and seccomp state, the daemon's
 * own bookkeeping), so agentbox's per-user cost cannot be below the last level's. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum level { PROCESS, NETNS, LISTENER, NAMESPACES, CGROUPS, BOX, LEVELS };
static const char *const level_names[LEVELS] = {"process", "netns", "listener", "namespaces", "cgroups", "box"};
static char **box_command; /* after --: the box level's command (oneshot_floor -- sleep ...) */
static const char *const v1_controllers[] = {"memory", "pids", "cpu"};

struct counters {
  long available_kib, kernel_kib;
};

static struct counters read_counters(void) {
  struct counters c = {0, 0};
  FILE *f = fopen("/proc/meminfo", "r");
  char key[64];
  long value;
  while (f && fscanf(f, "%63[^:]: %ld kB\n", key, &value) == 2) {
    if (!strcmp(key, "MemAvailable")) c.available_kib = value;
    if (!strcmp(key, "Slab") || !strcmp(key, "KernelStack") || !strcmp(key, "PageTables") || !strcmp(key, "Percpu") ||
        !strcmp(key, "Shmem"))
      c.kernel_kib += value;
  }
  if (f) fclose(f);
  return c;
}

static void die(const char *what) {
  fprintf(stderr, "user_floor: %s: %s\n", what, strerror(errno));
  _exit(125);
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) < 0) die(path);
  close(fd);
}

/* cgroup v1 when its memory hierarchy is mounted, else the v2 tree. */
static int cgroup_v1(void) { return access("/sys/fs/cgroup/memory/cgroup.procs", F_OK) == 0; }

static void join_own_groups(int i) {
  char path[256], pid[32];
  snprintf(pid, sizeof pid, "%d", getpid());
  if (!cgroup_v1()) {
    snprintf(path, sizeof path, "/sys/fs/cgroup/user-floor/u%d", i);
    if (mkdir(path, 0755) && errno != EEXIST) die(path);
    strncat(path, "/cgroup.procs", sizeof path - strlen(path) - 1);
    write_file(path, pid);
    return;
  }
  for (size_t c = 0; c < sizeof v1_controllers / sizeof *v1_controllers; c++) {
    snprintf(path, sizeof path, "/sys/fs/cgroup/%s/user-floor/u%d", v1_controllers[c], i);
    if (mkdir(path, 0755) && errno != EEXIST) die(path);
    strncat(path, "/cgroup.procs", sizeof path - strlen(path) - 1);
    write_file(path, pid);
  }
}

static void remove_groups(int n) {
  char path[256];
  for (int i = 0; i < n; i++) {
    if (!cgroup_v1()) {
      snprintf(path, sizeof path, "/sys/fs/cgroup/user-floor/u%d", i);
      rmdir(path);
      continue;
    }
    for (size_t c = 0; c < sizeof v1_controllers / sizeof *v1_controllers; c++) {
      snprintf(path, sizeof path, "/sys/fs/cgroup/%s/user-floor/u%d", v1_controllers[c], i);
      rmdir(path);
    }
  }
}

static void loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr)) die("lo flags");
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr)) die("lo up");
  close(s);
}

static void listen_on_loopback(void) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(3128)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 64)) die("listener");
}

/* The child, already in the level's namespaces: takes on the rest, tells the parent, then sleeps
 * until killed. */
static void become_user(enum level level, int i, int ready) {
  if (level >= CGROUPS) join_own_groups(i);
  if (level >= NETNS) loopback_up();
  if (level >= LISTENER) listen_on_loopback();
  if (write(ready, "", 1) != 1) die("ready");
  close(ready);
  for (;;) pause();
}

/* The box level is ready once its command runs as the grandchild (oneshot_floor's box, the init
 * of its pid namespace, which outlives a killed oneshot_floor): returns its pid. */
static pid_t await_box(pid_t pid) {
  char path[96], text[64];
  for (int tries = 0; tries < 5000; tries++) {
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    FILE *f = fopen(path, "r");
    int box = 0;
    if (f && fscanf(f, "%d", &box) != 1) box = 0;
    if (f) fclose(f);
    if (box > 0) {
      snprintf(path, sizeof path, "/proc/%d/comm", box);
      f = fopen(path, "r");
      int running = f && fgets(text, sizeof text, f) && !strcmp(text, "sleep\n");
      if (f) fclose(f);
      if (running) return box;
    }
    usleep(1000);
  }
  fprintf(stderr, "user_floor: the box command never started\n");
  _exit(125);
}

static int compare_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

static void measure(enum level level, int n, int rounds) {
  long available[16], kernel[16];
  for (int r = 0; r < rounds; r++) {
    pid_t *pids = calloc((size_t)n, sizeof *pids), *boxes = calloc((size_t)n, sizeof *boxes);
    sync();
    write_file("/proc/sys/vm/drop_caches", "3");
    struct counters before = read_counters();
    for (int i = 0; i < n; i++) {
      int ready[2];
      if (pipe2(ready, O_CLOEXEC)) die("pipe");
      long flags = SIGCHLD;
      if (level == BOX) {
        pids[i] = fork();
        if (pids[i] < 0) die("fork");
        if (pids[i] == 0) {
          join_own_groups(i);
          execv(box_command[0], box_command);
          die(box_command[0]);
        }
        close(ready[0]);
        close(ready[1]);
        boxes[i] = await_box(pids[i]);
        continue;
      }
      if (level >= NETNS) flags |= CLONE_NEWNET;
      if (level >= NAMESPACES) flags |= CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
      pids[i] = (pid_t)syscall(SYS_clone, flags, 0, 0, 0, 0); /* fork, into new namespaces */
      if (pids[i] < 0) die("fork");
      if (pids[i] == 0) {
        close(ready[0]);
        become_user(level, i, ready[1]);
      }
      close(ready[1]);
      char byte;
      if (read(ready[0], &byte, 1) != 1) die("child failed");
      close(ready[0]);
    }
    sleep(2); /* let RCU free what setup allocated and dropped */
    struct counters after = read_counters();
    for (int i = 0; i < n; i++) {
      if (boxes[i] > 0) kill(boxes[i], SIGKILL); /* its pid namespace, and so the box, ends */
      kill(pids[i], SIGKILL);
    }
    for (int i = 0; i < n; i++) waitpid(pids[i], NULL, 0);
    sleep(1); /* the groups empty once the boxes' pid namespaces are gone */
    remove_groups(level >= CGROUPS ? n : 0);
    free(pids);
    free(boxes);
    available[r] = (before.available_kib - after.available_kib) * 1024 / n;
    kernel[r] = (after.kernel_kib - before.kernel_kib) * 1024 / n;
    sleep(1);
  }
  qsort(available, (size_t)rounds, sizeof *available, compare_long);
  qsort(kernel, (size_t)rounds, sizeof *kernel, compare_long);
  printf("  %-11s  MemAvailable drop %5ld KiB/user   kernel side %5ld KiB/user\n", level_names[level],
         available[rounds / 2] / 1024, kernel[rounds / 2] / 1024);
  fflush(stdout);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--")) {
      box_command = argv + i + 1;
      argc = i;
    }
  int n = argc > 1 ? atoi(argv[1]) : 500;
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  if (n <= 0 || rounds <= 0 || rounds > 16) {
    fprintf(stderr, "usage: user_floor [N] [ROUNDS<=16] [-- COMMAND...]\n");
    return 2;
  }
  char path[256];
  if (cgroup_v1())
    for (size_t c = 0; c < sizeof v1_controllers / sizeof *v1_controllers; c++) {
      snprintf(path, sizeof path, "/sys/fs/cgroup/%s/user-floor", v1_controllers[c]);
      mkdir(path, 0755);
    }
  else
    mkdir("/sys/fs/cgroup/user-floor", 0755);
  printf("user floor: %d users at once, median of %d rounds (cgroup %s)\n", n, rounds, cgroup_v1() ? "v1" : "v2");
  const char *only = getenv("USER_FLOOR_LEVEL"); /* one level's name: that level alone */
  for (int level = PROCESS; level < LEVELS; level++)
    if ((level != BOX || (box_command && *box_command)) && (!only || !strcmp(only, level_names[level])))
      measure((enum level)level, n, rounds);
  return 0;
}
