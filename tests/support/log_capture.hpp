#pragma once
// What the code under test logs (util/log.hpp): while a LogCapture lives, every line goes to it
// instead of stderr. One at a time (the sink is process-wide); lines of every thread are kept.
//
// Runs on: made and read on the test's thread; its sink on whichever thread logs (one mutex).
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "util/log.hpp"

namespace agentbox::testing {

class LogCapture {
 public:
  struct Line {
    log::Level level;
    std::string component;
    std::string message;
  };

  LogCapture() {
    std::lock_guard lock(mu());
    lines().clear();
    previous_ = log::set_sink(&LogCapture::sink);
  }
  ~LogCapture() { log::set_sink(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<Line> lines_now() const {
    std::lock_guard lock(mu());
    return lines();
  }

  std::vector<std::string> messages() const {
    std::vector<std::string> out;
    for (const Line& l : lines_now()) out.push_back(l.message);
    return out;
  }

  // Every line as "[component] [level] message\n", for substring checks and failure output.
  std::string text() const {
    std::string out;
    for (const Line& l : lines_now())
      out += "[" + l.component + "] [" + std::string(log::level_name(l.level)) + "] " + l.message + "\n";
    return out;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<Line>& lines() {
    static std::vector<Line> l;
    return l;
  }
  static void sink(log::Level level, std::string_view component, std::string_view message) {
    std::lock_guard lock(mu());
    lines().push_back({level, std::string(component), std::string(message)});
  }

  log::Sink previous_ = nullptr;
};

}  // namespace agentbox::testing
