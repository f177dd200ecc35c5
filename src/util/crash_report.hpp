#pragma once
// A daemon that dies should say why: on a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGABRT) the signal, the thread and a backtrace go to stderr (the daemon's log) before the
// signal takes its default course (a core dump where the host keeps them); an exception nobody
// caught is named before std::terminate aborts. Sanitizer builds keep their own, better
// reports, so this does nothing there.

namespace agentbox {

// Once, early in main. `who` (static storage) starts every line it writes.
void install_crash_report(const char* who);

}  // namespace agentbox
