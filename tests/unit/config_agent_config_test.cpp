// The [agent] keys: where the Claude Code CLI and the operator's skills are found, and what a
// box gets from them (binds, PATH, environment).
#include "config/agent_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "box/agent_paths.hpp"
#include "box/box_env.hpp"
#include "config/server_config.hpp"
#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;

class AgentConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0644) {
    std::string path = scratch_.path() + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  ServerConfig load(const std::string& toml) {
    return load_server_config(write("config.toml", toml), [](const char*) -> const char* { return nullptr; });
  }
  testing::ScratchDir scratch_{"agentbox-agent-config"};
};

TEST_F(AgentConfigTest, DefaultsToTheProjectsInstallAndNoSkills) {
  ServerConfig config = load_server_config(std::nullopt, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(config.agent.claude, std::nullopt);
  EXPECT_EQ(config.agent.skills_dir, std::nullopt);
  std::vector<std::string> paths = default_claude_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.back(), std::string(AGENTBOX_SOURCE_DIR) + "/deps/claude-code/node_modules/.bin/claude");
  for (const std::string& p : paths) EXPECT_EQ(p.front(), '/') << p;
}

TEST_F(AgentConfigTest, RelativePathsInAFileAreTheFilesDirectorys) {
  ServerConfig config = load("[agent]\nclaude = \"bin/claude\"\nskills_dir = \"/srv/skills\"\n");
  EXPECT_EQ(config.agent.claude, scratch_.path() + "/bin/claude");
  EXPECT_EQ(config.agent.skills_dir, "/srv/skills");
}

TEST_F(AgentConfigTest, BadValuesAndUnknownKeysAreErrorsNamingTheKey) {
  std::string path = write("bad.toml",
                           "[agent]\nclaude = 3\nskills_dir = \"\"\nmodle = \"x\"\nmax_turns = -1\n"
                           "public_url = \"agentbox.example.com\"\nallowed_tools = \"Bash\"\n");
  std::vector<std::string> problems = validate_config_file(path);
  ASSERT_EQ(problems.size(), 6u);
  EXPECT_THAT(problems[0], HasSubstr("agent.claude"));
  EXPECT_THAT(problems[1], HasSubstr("agent.skills_dir"));
  EXPECT_THAT(problems[2], HasSubstr("unknown key \"agent.modle\""));
  EXPECT_THAT(problems[3], HasSubstr("agent.max_turns"));
  EXPECT_THAT(problems[4], HasSubstr("agent.public_url"));
  EXPECT_THAT(problems[5], HasSubstr("agent.allowed_tools"));
}

TEST_F(AgentConfigTest, TheTurnKeysAreRead) {
  ServerConfig config = load(
      "[agent]\nmodel = \"sonnet\"\nmax_turns = 30\nmax_retries = 0\n"
      "allowed_tools = [\"Read\", \"Bash\"]\npublic_url = \"https://a.example.com/\"\nlink_days = 2\n");
  EXPECT_EQ(config.agent.model, "sonnet");
  EXPECT_EQ(config.agent.max_turns, 30);
  EXPECT_EQ(config.agent.max_retries, 0);
  EXPECT_EQ(config.agent.allowed_tools, (std::vector<std::string>{"Read", "Bash"}));
  EXPECT_EQ(config.agent.public_url, "https://a.example.com");
  EXPECT_EQ(config.agent.link_days, 2);
  EXPECT_EQ(config.agent.task_model, "claude-haiku-4-5");  // the default
}

TEST_F(AgentConfigTest, TheTaskModelIsReadAndMayNotBeEmpty) {
  EXPECT_EQ(load("[agent]\ntask_model = \"claude-sonnet-4-5\"\n").agent.task_model, "claude-sonnet-4-5");
  std::vector<std::string> problems = validate_config_file(write("empty.toml", "[agent]\ntask_model = \"\"\n"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("agent.task_model"));
}

TEST_F(AgentConfigTest, TheTurnsThatMayWaitPerChatAreBounded) {
  EXPECT_EQ(load("").agent.queued_turns_per_chat, 4);  // the default
  EXPECT_EQ(load("[agent]\nqueued_turns_per_chat = 0\n").agent.queued_turns_per_chat, 0);
  std::vector<std::string> problems = validate_config_file(write("many.toml", "[agent]\nqueued_turns_per_chat = 65\n"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("agent.queued_turns_per_chat"));
}

TEST_F(AgentConfigTest, WarmClisHaveAnIdleTimeAndAnAccountCap) {
  const ServerConfig defaults = load("");
  EXPECT_EQ(defaults.agent.warm_idle, 300);
  EXPECT_EQ(defaults.agent.warm_per_account, 2);
  const ServerConfig off = load("[agent]\nwarm_idle = 0\nwarm_per_account = 0\n");
  EXPECT_EQ(off.agent.warm_idle, 0);
  EXPECT_EQ(off.agent.warm_per_account, 0);
  std::vector<std::string> problems =
      validate_config_file(write("warm.toml", "[agent]\nwarm_idle = -1\nwarm_per_account = 65\n"));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_THAT(problems[0] + problems[1], HasSubstr("agent.warm_idle"));
  EXPECT_THAT(problems[0] + problems[1], HasSubstr("agent.warm_per_account"));
}

TEST_F(AgentConfigTest, AnAskModeQuestionWaitsTenMinutesByDefault) {
  EXPECT_EQ(load("").agent.approval_timeout, 600);
  EXPECT_EQ(load("[agent]\napproval_timeout = 5\n").agent.approval_timeout, 5);
  std::vector<std::string> problems = validate_config_file(write("ask.toml", "[agent]\napproval_timeout = 0\n"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("agent.approval_timeout"));
}

TEST_F(AgentConfigTest, FindsTheExecutableBehindItsSymlink) {
  std::string real = write("pkg/claude.exe", "#!/bin/sh\necho 1.0\n", 0755);
  std::string link = scratch_.path() + "/bin-claude";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  AgentConfig agent{.claude = link};
  std::string why;
  EXPECT_EQ(find_claude(agent, &why), real);  // the file a box binds, not the link
}

TEST_F(AgentConfigTest, AMissingOrNonExecutableClaudeIsNoAgentWithAReason) {
  std::string why;
  AgentConfig missing{.claude = scratch_.path() + "/nowhere/claude"};
  EXPECT_EQ(find_claude(missing, &why), std::nullopt);
  EXPECT_THAT(why, HasSubstr(scratch_.path() + "/nowhere/claude"));
  AgentConfig plain{.claude = write("not-exec", "x", 0644)};
  EXPECT_EQ(find_claude(plain, &why), std::nullopt);
  AgentConfig dir{.claude = scratch_.path()};
  EXPECT_EQ(find_claude(dir, &why), std::nullopt);
}

TEST_F(AgentConfigTest, ASkillsDirMustBeADirectory) {
  EXPECT_EQ(find_skills_dir(AgentConfig{}), std::nullopt);
  write("skills/report/SKILL.md", "---\nname: report\n---\n");
  EXPECT_EQ(find_skills_dir(AgentConfig{.skills_dir = scratch_.path() + "/skills/"}), scratch_.path() + "/skills");
  EXPECT_THROW(find_skills_dir(AgentConfig{.skills_dir = scratch_.path() + "/typo"}), Error);
  EXPECT_THROW(find_skills_dir(AgentConfig{.skills_dir = scratch_.path() + "/skills/report/SKILL.md"}), Error);
}

TEST(AgentBoxEnvTest, ABoxWithClaudeHasItFirstOnPathAndNoNonessentialTraffic) {
  BoxSpec spec;
  spec.home_target = "/home/u";
  auto without = base_env(spec, false);
  EXPECT_EQ(without.at("PATH"), kBoxPath);
  EXPECT_EQ(without.count("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), 0u);

  spec.binds.push_back({"/host/claude", kClaudeInBox, false});
  auto with = base_env(spec, false);
  EXPECT_EQ(with.at("PATH"), std::string("/agentbox/bin:") + kBoxPath);
  EXPECT_EQ(with.at("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), "1");
}

}  // namespace
}  // namespace agentbox
