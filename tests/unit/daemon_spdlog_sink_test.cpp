// daemon/spdlog_sink: agentbox-serve's lines go through spdlog's default logger as before, the
// component as the logger's name, in the same shape as util/log's default sink.
#include "daemon/spdlog_sink.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <regex>
#include <sstream>
#include <string>

namespace agentbox::daemon {
namespace {

// What the default logger's sinks write, for the components first used after this is called
// (each component's logger is a clone of the default logger made on its first line).
std::ostringstream& spdlog_output() {
  static std::ostringstream* out = [] {
    auto* o = new std::ostringstream;  // alive as long as the clones that write to it
    spdlog::default_logger()->sinks().push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(*o));
    return o;
  }();
  return *out;
}

std::string line_shape(const std::string& component, const std::string& level, const std::string& message) {
  return R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[)" + component + R"(\] \[)" + level + R"(\] )" + message + "\n";
}

TEST(SpdlogSink, ALineIsWrittenByTheDefaultLoggersSinksNamedForItsComponent) {
  std::ostringstream& out = spdlog_output();
  out.str("");
  const log::Sink before = log::set_sink(nullptr);
  install_spdlog_sink();
  log::warn("sink-test", "spare volume {}: {}", "a.img", "no space");
  log::info("sink-test", "signal {}: stopping", 15);
  log::error("other-test", "unhandled exception: boom");
  log::set_sink(before);
  EXPECT_TRUE(
      std::regex_match(out.str(), std::regex(line_shape("sink-test", "warning", "spare volume a.img: no space") +
                                             line_shape("sink-test", "info", "signal 15: stopping") +
                                             line_shape("other-test", "error", "unhandled exception: boom"))))
      << out.str();
}

TEST(SpdlogSink, UtilLogsLevelDecidesNotTheClones) {
  std::ostringstream& out = spdlog_output();
  out.str("");
  spdlog_sink(log::Level::debug, "level-test", "written: the sink writes what it is given");
  const log::Sink before = log::set_sink(&spdlog_sink);
  log::debug("level-test", "dropped before the sink");
  log::set_sink(before);
  EXPECT_TRUE(std::regex_match(
      out.str(), std::regex(line_shape("level-test", "debug", "written: the sink writes what it is given"))))
      << out.str();
}

}  // namespace
}  // namespace agentbox::daemon
