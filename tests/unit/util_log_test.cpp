// util/log: the one logging API. A sink set by the test sees level, component and message; the
// default sink's line has spdlog's shape; a sink or a format that throws never reaches the caller.
#include "util/log.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/log_capture.hpp"
#include "util/unhandled.hpp"

namespace {

struct Throws {};

}  // namespace

// An argument whose formatting fails, as an out-of-memory would.
template <>
struct fmt::formatter<Throws> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(const Throws&, fmt::format_context&) const -> fmt::format_context::iterator {
    throw std::runtime_error("no formatting today");
  }
};

namespace agentbox {
namespace {

// The default sink's line: "[2026-12-06 13:41:43.123] [component] [level] message".
const std::regex kLine(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[([^\]]+)\] \[([a-z]+)\] (.*))");

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  if (start < text.size()) out.push_back(text.substr(start) + "<no newline>");
  return out;
}

void throwing_sink(log::Level, std::string_view, std::string_view) { throw std::runtime_error("the sink is broken"); }

TEST(Log, ASinkSetByTheTestReceivesLevelComponentAndTheFormattedMessage) {
  testing::LogCapture capture;
  log::warn("volumes", "spare volume {}: {} (deleted)", "/v/.spare/1.img", std::string("bad superblock"));
  log::error("http", "{}: took {:.1f}ms", "GET /x", 12.345);
  log::info("daemon", "no arguments, {{braces}} kept");
  const auto lines = capture.lines_now();
  ASSERT_EQ(lines.size(), 3u) << capture.text();
  EXPECT_EQ(lines[0].level, log::Level::warn);
  EXPECT_EQ(lines[0].component, "volumes");
  EXPECT_EQ(lines[0].message, "spare volume /v/.spare/1.img: bad superblock (deleted)");
  EXPECT_EQ(lines[1].level, log::Level::error);
  EXPECT_EQ(lines[1].component, "http");
  EXPECT_EQ(lines[1].message, "GET /x: took 12.3ms");
  EXPECT_EQ(lines[2].message, "no arguments, {braces} kept");
}

TEST(Log, SetSinkReturnsTheSinkItReplaces) {
  const log::Sink before = log::set_sink(&throwing_sink);
  EXPECT_EQ(log::set_sink(before), &throwing_sink);
}

TEST(Log, DebugIsDroppedUntilTheLevelLetsItThrough) {
  testing::LogCapture capture;
  log::debug("box", "not shown");
  EXPECT_FALSE(log::enabled(log::Level::debug));
  log::set_level(log::Level::debug);
  log::debug("box", "shown {}", 1);
  log::set_level(log::Level::error);
  log::warn("box", "below error: dropped");
  log::set_level(log::Level::info);
  const auto lines = capture.lines_now();
  ASSERT_EQ(lines.size(), 1u) << capture.text();
  EXPECT_EQ(lines[0].level, log::Level::debug);
  EXPECT_EQ(lines[0].message, "shown 1");
}

TEST(Log, TheDefaultSinkWritesOneLineOnStderrInSpdlogsShape) {
  ::testing::internal::CaptureStderr();
  log::info("http", "127.0.0.1 \"GET /health\" 200 {}B", 15);
  log::warn("backup", "backup: pass failed: {}", "disk full");
  const std::string err = ::testing::internal::GetCapturedStderr();
  const auto lines = lines_of(err);
  ASSERT_EQ(lines.size(), 2u) << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, kLine)) << lines[0];
  EXPECT_EQ(m[1], "http");
  EXPECT_EQ(m[2], "info");
  EXPECT_EQ(m[3], "127.0.0.1 \"GET /health\" 200 15B");
  ASSERT_TRUE(std::regex_match(lines[1], m, kLine)) << lines[1];
  EXPECT_EQ(m[1], "backup");
  EXPECT_EQ(m[2], "warning");  // spdlog's name for the level
  EXPECT_EQ(m[3], "backup: pass failed: disk full");
}

TEST(Log, LinesOfManyThreadsStayWhole) {
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i)
        log::info("t" + std::to_string(t), "line {} of thread {} {}", i, t, std::string(64, 'x'));
    });
  for (auto& th : threads) th.join();
  const auto lines = lines_of(::testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 800u);
  for (const std::string& l : lines) ASSERT_TRUE(std::regex_match(l, kLine)) << l;
}

TEST(Log, AThrowingSinkNeitherEscapesNorLosesTheLine) {
  const log::Sink before = log::set_sink(&throwing_sink);
  ::testing::internal::CaptureStderr();
  log::error("exec", "process store: update: {}", "database is locked");
  const std::string err = ::testing::internal::GetCapturedStderr();
  log::set_sink(before);
  EXPECT_NE(err.find("[exec] [error] process store: update: database is locked\n"), std::string::npos) << err;
}

TEST(Log, AThrowingSinkDoesNotEscapeReportUnhandled) {
  static_assert(noexcept(report_unhandled("x", nullptr)));
  const log::Sink before = log::set_sink(&throwing_sink);
  ::testing::internal::CaptureStderr();
  report_unhandled("box-loop", std::make_exception_ptr(std::runtime_error("a handler's bug")));
  report_unhandled("box-loop", std::make_exception_ptr(42));
  const std::string err = ::testing::internal::GetCapturedStderr();
  log::set_sink(before);  // reached: nothing escaped (noexcept would have terminated)
  EXPECT_NE(err.find("[box-loop] [error] unhandled exception: a handler's bug\n"), std::string::npos) << err;
  EXPECT_NE(err.find("[box-loop] [error] unhandled exception: an exception of unknown type\n"), std::string::npos)
      << err;
}

TEST(Log, ReportUnhandledIsAnErrorLineNamedForWhereItWasCaught) {
  testing::LogCapture capture;
  report_unhandled("terminals callback", std::make_exception_ptr(std::logic_error("double close")));
  const auto lines = capture.lines_now();
  ASSERT_EQ(lines.size(), 1u) << capture.text();
  EXPECT_EQ(lines[0].level, log::Level::error);
  EXPECT_EQ(lines[0].component, "terminals callback");
  EXPECT_EQ(lines[0].message, "unhandled exception: double close");
}

TEST(Log, AFormatThatThrowsWritesTheFormatInstead) {
  testing::LogCapture capture;
  log::warn("agent", "listing {} after a turn", Throws{});
  const auto lines = capture.lines_now();
  ASSERT_EQ(lines.size(), 1u) << capture.text();
  EXPECT_EQ(lines[0].message, "listing {} after a turn");
}

}  // namespace
}  // namespace agentbox
