#include "util/log.hpp"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>

namespace agentbox::log {

namespace {

std::atomic<Sink> g_sink{nullptr};
std::atomic<int> g_level{static_cast<int>(Level::info)};

}  // namespace

std::string_view level_name(Level level) noexcept {
  switch (level) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warn: return "warning";
    case Level::error: return "error";
  }
  return "?";
}

Sink set_sink(Sink sink) noexcept { return g_sink.exchange(sink, std::memory_order_acq_rel); }

void set_level(Level level) noexcept { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

bool enabled(Level level) noexcept { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

void write_stderr(Level level, std::string_view component, std::string_view message) noexcept {
  try {
    const auto now = std::chrono::system_clock::now();
    const time_t seconds = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    tm local{};
    ::localtime_r(&seconds, &local);
    std::string line = fmt::format("[{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}] [{}] [{}] {}\n", local.tm_year + 1900,
                                   local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, ms,
                                   component, level_name(level), message);
    for (std::string_view left = line; !left.empty();) {
      const ssize_t n = ::write(STDERR_FILENO, left.data(), left.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // stderr is gone: nowhere left to say so
      left.remove_prefix(static_cast<size_t>(n));
    }
  } catch (...) {  // out of memory for the line: it is lost, the caller goes on
  }
}

void write(Level level, std::string_view component, std::string_view message) noexcept {
  if (!enabled(level)) return;
  if (Sink sink = g_sink.load(std::memory_order_acquire)) {
    try {
      sink(level, component, message);
      return;
    } catch (...) {  // the line still reaches someone, and never throws into the code that logs
    }
  }
  write_stderr(level, component, message);
}

}  // namespace agentbox::log
