#pragma once
// The daemon's log sink (util/log.hpp): every line goes to spdlog's default logger, through a
// clone named after the line's component, so agentbox-serve prints what it always has:
// "[2026-12-06 13:41:43.123] [http] [info] message" on stdout. Only agentbox-serve links spdlog;
// the static `agentbox` keeps the default sink (stderr, the same shape).
//
// Runs on: install_spdlog_sink() once on the main thread at start, before any other thread;
// the sink on whichever thread logs.
#include <string_view>

#include "util/log.hpp"

namespace agentbox::daemon {

void install_spdlog_sink();

// The sink itself, for its test.
void spdlog_sink(log::Level level, std::string_view component, std::string_view message);

}  // namespace agentbox::daemon
