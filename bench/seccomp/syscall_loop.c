// syscall_loop FILTER|none N: installs the seccomp program in FILTER (raw sock_filter bytes, as
// export_filter writes it) the way a box's init does (no_new_privs, then seccomp), then times N
// rounds of getpid, stat("/") and a 1-byte read of /dev/zero; prints nanoseconds per round.
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) return fprintf(stderr, "usage: syscall_loop FILTER|none N\n"), 2;
  const long n = atol(argv[2]);
  if (strcmp(argv[1], "none") != 0) {
    static struct sock_filter program[4096];
    FILE* f = fopen(argv[1], "rb");
    if (!f) return perror(argv[1]), 1;
    const size_t count = fread(program, sizeof program[0], 4096, f);
    fclose(f);
    struct sock_fprog fprog = {(unsigned short)count, program};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0)
      return perror("seccomp"), 1;
  }
  const int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  char byte;
  struct stat st;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; ++i) {
    syscall(SYS_getpid);
    stat("/", &st);
    if (read(zero, &byte, 1) != 1) return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
  return 0;
}
