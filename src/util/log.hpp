#pragma once
// The one logging API of every room: a level, a component and a message, handed to one
// process-wide sink.
//
//   log::warn("volumes", "spare volume {}: {}", image, e.what());
//
// The component names what the line is about, usually the room it comes from ("http" for the
// HTTP server and its sessions, "box", "volumes", "backup", "daemon", ...). The message is
// formatted by fmt (header-only, so the static `agentbox` links no logging library).
//
// The sink is set once at start: agentbox-serve installs spdlog's (daemon/spdlog_sink.hpp), so
// the daemon's log reads as it always has; every other process (the `agentbox` CLI, tests) keeps
// the default sink, one line on stderr in the same shape. Tests swap the sink to see what is
// logged (tests/support/log_capture.hpp).
//
// Runs on: any thread; the sink is called on the thread that logs, concurrently with others.
#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace agentbox::log {

enum class Level { debug, info, warn, error };

// spdlog's names ("debug", "info", "warning", "error"), as the lines have always shown them.
std::string_view level_name(Level level) noexcept;

// Receives every line that passes the level. It must be thread-safe; what it throws is caught
// (the line then goes to the default sink).
using Sink = void (*)(Level level, std::string_view component, std::string_view message);

// Installs sink for the whole process (nullptr: the default sink) and returns the one it replaces.
Sink set_sink(Sink sink) noexcept;

// Lines below level are dropped before they are formatted; info unless set (spdlog's default).
void set_level(Level level) noexcept;
bool enabled(Level level) noexcept;

// The default sink: "[2026-12-06 13:41:43.123] [http] [info] message" (local time, spdlog's
// pattern) on stderr, in one write so that lines of two threads never interleave.
void write_stderr(Level level, std::string_view component, std::string_view message) noexcept;

// Hands one formatted line to the sink. Never throws, whatever the sink does.
void write(Level level, std::string_view component, std::string_view message) noexcept;

// Formats and writes. A format that fails (out of memory, an argument's formatter that throws)
// writes the format string itself rather than throw into the code that logs.
template <class... Args>
void emit(Level level, std::string_view component, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (!enabled(level)) return;
  try {
    write(level, component, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {
    const fmt::string_view text = format;
    write(level, component, std::string_view(text.data(), text.size()));
  }
}

template <class... Args>
void debug(std::string_view component, fmt::format_string<Args...> format, Args&&... args) noexcept {
  emit(Level::debug, component, format, std::forward<Args>(args)...);
}
template <class... Args>
void info(std::string_view component, fmt::format_string<Args...> format, Args&&... args) noexcept {
  emit(Level::info, component, format, std::forward<Args>(args)...);
}
template <class... Args>
void warn(std::string_view component, fmt::format_string<Args...> format, Args&&... args) noexcept {
  emit(Level::warn, component, format, std::forward<Args>(args)...);
}
template <class... Args>
void error(std::string_view component, fmt::format_string<Args...> format, Args&&... args) noexcept {
  emit(Level::error, component, format, std::forward<Args>(args)...);
}

}  // namespace agentbox::log
