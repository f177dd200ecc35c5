#pragma once
// The caller's terminal while a box command runs in a pty: raw mode for the duration (so
// ctrl-C, ctrl-Z and every key go to the box's own line discipline), restored on the way out.
#include <termios.h>

namespace agentbox::cli {

class RawTerminal {
 public:
  explicit RawTerminal(int fd);  // no-op when fd is not a terminal
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  int fd_;
  bool active_ = false;
  termios saved_{};
};

// Copies fd's window size onto pty (SIGWINCH).
void copy_window_size(int from_fd, int pty_fd);

}  // namespace agentbox::cli
