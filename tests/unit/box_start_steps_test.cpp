// box/start_steps: an optional step that fails is said once per reason, as a warning of the log
// (or to the sink doctor sets instead); a required one throws, naming its step.
#include "box/start_steps.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/log_capture.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

TEST(StartSteps, AnOptionalStepsFailureIsOneWarningOfTheLogPerReason) {
  testing::LogCapture log;
  step_failed(StartStep::idle_check, "init did not answer");
  step_failed(StartStep::idle_check, "init did not answer");  // said once already
  step_failed(StartStep::idle_check, "another reason");
  const auto lines = log.lines_now();
  ASSERT_EQ(lines.size(), 2u) << log.text();
  EXPECT_EQ(lines[0].level, log::Level::warn);
  EXPECT_EQ(lines[0].component, "box");
  EXPECT_EQ(lines[0].message,
            "idle check unavailable (init did not answer); instead a box whose init does not answer is stopped as "
            "gone");
  EXPECT_EQ(lines[1].message.find("idle check unavailable (another reason)"), 0u) << lines[1].message;
}

TEST(StartSteps, ASinkSetByDoctorTakesTheReportsInsteadOfTheLog) {
  testing::LogCapture log;
  std::vector<std::string> seen;
  set_step_report_sink([&](const StartStepInfo& step, std::string_view reason) {
    seen.push_back(std::string(step.name) + ": " + std::string(reason));
  });
  step_failed(StartStep::idle_check, "for the sink");
  set_step_report_sink(nullptr);
  EXPECT_EQ(seen, std::vector<std::string>{"idle check: for the sink"});
  EXPECT_TRUE(log.lines_now().empty()) << log.text();
}

TEST(StartSteps, ARequiredStepsFailureThrowsNamingTheStep) {
  testing::LogCapture log;
  try {
    step_failed(StartStep::seccomp, "EINVAL");
    FAIL() << "a required step's failure must throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "seccomp: EINVAL");
  }
  EXPECT_TRUE(log.lines_now().empty()) << log.text();
}

}  // namespace
}  // namespace agentbox
