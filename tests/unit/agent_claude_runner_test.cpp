// The CLI's command line for a turn: stream-json with partial messages always; resume, model,
// turns and tools only when asked; the prompt never on the command line (it goes to stdin).
#include "agent/claude_runner.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace agentbox::agent {
namespace {

bool has(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it != argv.end() && it + 1 != argv.end() && *(it + 1) == value;
}

TEST(ClaudeArgv, AFreshTurnStreamsEverythingAndRunsToolsUnasked) {
  ClaudeTurn t;
  t.prompt = "secret prompt text";
  auto argv = claude_argv(t);
  ASSERT_GE(argv.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + 6),
            (std::vector<std::string>{"claude", "-p", "--output-format", "stream-json", "--verbose",
                                      "--include-partial-messages"}));
  EXPECT_TRUE(has(argv, "--permission-mode", "bypassPermissions"));
  for (const char* absent : {"--resume", "--model", "--max-turns", "--allowedTools", "--append-system-prompt"})
    EXPECT_EQ(std::find(argv.begin(), argv.end(), absent), argv.end()) << absent;
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "secret prompt text"), argv.end());
}

TEST(ClaudeArgv, ResumeModelTurnsToolsAndSystemPromptWhenAsked) {
  ClaudeTurn t;
  t.resume = "4237d65a-695c-4e11-9855-f6e1c3376809";
  t.model = "sonnet";
  t.max_turns = 7;
  t.allowed_tools = {"Read", "Bash(git:*)"};
  t.append_system_prompt = "You are in a box.";
  auto argv = claude_argv(t);
  EXPECT_TRUE(has(argv, "--resume", "4237d65a-695c-4e11-9855-f6e1c3376809"));
  EXPECT_TRUE(has(argv, "--model", "sonnet"));
  EXPECT_TRUE(has(argv, "--max-turns", "7"));
  EXPECT_TRUE(has(argv, "--allowedTools", "Read,Bash(git:*)"));
  EXPECT_TRUE(has(argv, "--append-system-prompt", "You are in a box."));
  // A list of tools is a limit: nothing may bypass it.
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--permission-mode"), argv.end());
}

// The approval modes (claude-code-edits, claude-code-plan): the mode goes with a list of tools too,
// so that what the mode would ask for stays refused.
TEST(ClaudeArgv, AnApprovalModeIsPassedAlsoWithAListOfTools) {
  ClaudeTurn t;
  t.permission_mode = "plan";
  EXPECT_TRUE(has(claude_argv(t), "--permission-mode", "plan"));
  t.allowed_tools = {"Read"};
  auto argv = claude_argv(t);
  EXPECT_TRUE(has(argv, "--permission-mode", "plan"));
  EXPECT_TRUE(has(argv, "--allowedTools", "Read"));
}

// Ask mode (claude-code-ask): its permission prompts come to agentbox on stdout; no other mode's.
TEST(ClaudeArgv, AskModeRoutesPermissionPromptsToStdio) {
  ClaudeTurn t;
  t.permission_mode = "default";
  auto argv = claude_argv(t);
  EXPECT_TRUE(has(argv, "--permission-mode", "default"));
  EXPECT_TRUE(has(argv, "--permission-prompt-tool", "stdio"));
  t.permission_mode = "acceptEdits";
  argv = claude_argv(t);
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--permission-prompt-tool"), argv.end());
}

}  // namespace
}  // namespace agentbox::agent
