#include "util/crash_report.hpp"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <typeinfo>

#include <cxxabi.h>

namespace agentbox {

// Sanitizer builds keep their own reports.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(AGENTBOX_SANITIZE)
#define AGENTBOX_CRASH_REPORT 0
#else
#define AGENTBOX_CRASH_REPORT 1
#endif

#if AGENTBOX_CRASH_REPORT
namespace {

const char* g_who = "agentbox";

// Async-signal-safe output: write(2) only, numbers formatted by hand.
void put(const char* s) {
  for (size_t n = ::strlen(s); n > 0;) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void put_number(unsigned long v, unsigned base) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '\0';
  do {
    *--p = "0123456789abcdef"[v % base];
    v /= base;
  } while (v != 0);
  if (base == 16) *--p = 'x', *--p = '0';
  put(p);
}

void on_fatal_signal(int sig, siginfo_t* info, void*) {
  put(g_who);
  put(": fatal signal ");
  put(::sigabbrev_np(sig) ? ::sigabbrev_np(sig) : "?");
  if (sig != SIGABRT) {
    put(" at address ");
    put_number(reinterpret_cast<unsigned long>(info->si_addr), 16);
  }
  put(" in thread ");
  put_number(static_cast<unsigned long>(::syscall(SYS_gettid)), 10);
  put("; backtrace (addr2line -f -C -e <binary> <offset> names the lines):\n");
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND put the default action back: the signal ends the process as it would have.
  ::raise(sig);
}

[[noreturn]] void on_terminate() {
  if (auto ex = std::current_exception()) {
    const char* type = "?";
    if (const std::type_info* t = abi::__cxa_current_exception_type()) type = t->name();
    try {
      std::rethrow_exception(ex);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: terminating on an uncaught exception (%s): %s\n", g_who, type, e.what());
    } catch (...) {
      std::fprintf(stderr, "%s: terminating on an uncaught exception (%s)\n", g_who, type);
    }
  } else {
    std::fprintf(stderr, "%s: std::terminate called without an exception\n", g_who);
  }
  std::abort();  // on to SIGABRT's backtrace
}

}  // namespace
#endif

void install_crash_report(const char* who) {
#if !AGENTBOX_CRASH_REPORT
  (void)who;
#else
  g_who = who;
  std::set_terminate(on_terminate);
  void* warm[1];
  ::backtrace(warm, 1);  // loads libgcc now: not from a signal handler, where malloc may be broken

  // The main thread's stack overflow still gets its report, on a stack of its own.
  static char alt_stack[64 << 10];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);

  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::sigaction(sig, &sa, nullptr);
#endif
}

}  // namespace agentbox
