#include "cli/terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

namespace agentbox::cli {

RawTerminal::RawTerminal(int fd) : fd_(fd) {
  if (!::isatty(fd) || ::tcgetattr(fd, &saved_) != 0) return;
  termios raw = saved_;
  ::cfmakeraw(&raw);
  if (::tcsetattr(fd, TCSADRAIN, &raw) == 0) active_ = true;
}

RawTerminal::~RawTerminal() {
  if (active_) ::tcsetattr(fd_, TCSADRAIN, &saved_);
}

void copy_window_size(int from_fd, int pty_fd) {
  winsize ws{};
  if (::ioctl(from_fd, TIOCGWINSZ, &ws) == 0) ::ioctl(pty_fd, TIOCSWINSZ, &ws);
}

}  // namespace agentbox::cli
