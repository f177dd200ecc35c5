#include "daemon/spdlog_sink.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace agentbox::daemon {

namespace {

spdlog::level::level_enum spdlog_level(log::Level level) {
  switch (level) {
    case log::Level::debug: return spdlog::level::debug;
    case log::Level::info: return spdlog::level::info;
    case log::Level::warn: return spdlog::level::warn;
    case log::Level::error: return spdlog::level::err;
  }
  return spdlog::level::err;
}

// One clone of the default logger per component, made on its first line: the clone shares the
// default logger's sinks and pattern, and shows the component as the logger's name.
spdlog::logger& logger_for(std::string_view component) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers;
  std::lock_guard lock(mu);
  auto it = loggers.find(component);
  if (it == loggers.end()) {
    auto made = spdlog::default_logger()->clone(std::string(component));
    made->set_level(spdlog::level::trace);  // util/log's level decides what is written
    it = loggers.emplace(std::string(component), std::move(made)).first;
  }
  return *it->second;
}

}  // namespace

void spdlog_sink(log::Level level, std::string_view component, std::string_view message) {
  logger_for(component).log(spdlog_level(level), spdlog::string_view_t(message.data(), message.size()));
}

void install_spdlog_sink() { log::set_sink(&spdlog_sink); }

}  // namespace agentbox::daemon
