// The `agentbox run` profile and the SRC[:DST] bind specs its flags share.
#include "config/run_profile.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "config/bind_spec.hpp"
#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;

// A scratch directory standing in for the caller's home, removed afterwards.
class RunProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(home_ + "/.opam");
    std::filesystem::create_directories(home_ + "/src/project");
    std::filesystem::create_directories(home_ + "/data/ref");
  }

  std::string write_profile(const std::string& text) {
    std::string path = home_ + "/run.toml";
    std::ofstream(path) << text;
    return path;
  }

  std::string load_error(const std::string& text) {
    std::string path = write_profile(text);
    try {
      load_run_profile(path, home_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  testing::ScratchDir scratch_{"agentbox-run-profile"};
  const std::string home_ = scratch_.path();
};

TEST_F(RunProfileTest, FullProfileIsRead) {
  std::string path = write_profile(R"(
ro_bind = ["~/.opam", "~/data/ref:/ref"]
bind = ["~/src/project"]
pass_env = ["ANTHROPIC_API_KEY", "TERM"]
home = "~/.agentbox-home"

[env]
EDITOR = "vim"
LANG = "C.UTF-8"

[limits]
memory = "2G"
pids = 512
cpu = "1.5"
ptys = 32
tcp_memory = "8M"
)");
  RunProfile p = load_run_profile(path, home_);
  ASSERT_EQ(p.binds.size(), 3u);
  // ro_bind entries come first, then bind, whatever order the file uses.
  EXPECT_EQ(p.binds[0].source, home_ + "/.opam");
  EXPECT_EQ(p.binds[0].target, home_ + "/.opam");
  EXPECT_FALSE(p.binds[0].writable);
  EXPECT_EQ(p.binds[1].source, home_ + "/data/ref");
  EXPECT_EQ(p.binds[1].target, "/ref");
  EXPECT_FALSE(p.binds[1].writable);
  EXPECT_EQ(p.binds[2].source, home_ + "/src/project");
  EXPECT_TRUE(p.binds[2].writable);
  EXPECT_EQ(p.pass_env, (std::vector<std::string>{"ANTHROPIC_API_KEY", "TERM"}));
  EXPECT_EQ(p.env, (std::map<std::string, std::string>{{"EDITOR", "vim"}, {"LANG", "C.UTF-8"}}));
  EXPECT_EQ(p.memory_bytes, 2ull << 30);
  EXPECT_EQ(p.pids, 512u);
  EXPECT_EQ(p.cpu_millicores, 1500u);
  EXPECT_EQ(p.ptys, 32u);
  EXPECT_EQ(p.tcp_memory_bytes, 8ull << 20);
  EXPECT_EQ(p.home, home_ + "/.agentbox-home");
}

TEST_F(RunProfileTest, MissingFileIsAnEmptyProfile) {
  RunProfile p = load_run_profile(home_ + "/nope.toml", home_);
  EXPECT_TRUE(p.binds.empty());
  EXPECT_TRUE(p.env.empty());
  EXPECT_FALSE(p.memory_bytes);
  EXPECT_FALSE(p.home);
  EXPECT_EQ(default_run_profile_path("/home/alice"), "/home/alice/.config/agentbox/run.toml");
}

TEST_F(RunProfileTest, UnreadableFileIsAnError) {
  // A directory where the file should be: open succeeds, read fails with EISDIR.
  std::filesystem::create_directories(home_ + "/dir.toml");
  EXPECT_THROW(load_run_profile(home_ + "/dir.toml", home_), Error);
}

TEST_F(RunProfileTest, CpuMayBeANumber) {
  EXPECT_EQ(load_run_profile(write_profile("[limits]\ncpu = 1.5\n"), home_).cpu_millicores, 1500u);
  EXPECT_EQ(load_run_profile(write_profile("[limits]\ncpu = 2\n"), home_).cpu_millicores, 2000u);
}

TEST_F(RunProfileTest, UnknownKeysNameTheKeyAndFile) {
  EXPECT_EQ(load_error("limitz = 1\n"), home_ + "/run.toml: unknown key \"limitz\" (line 1)");
  EXPECT_EQ(load_error("[limits]\nmemroy = \"1G\"\n"), home_ + "/run.toml: unknown key \"limits.memroy\" (line 2)");
  EXPECT_EQ(load_error("[limitz]\nmemory = \"1G\"\n"), home_ + "/run.toml: unknown key \"limitz\" (line 1)");
  // Gone with Landlock's TCP rule: the box's network namespace alone bounds its connects.
  EXPECT_EQ(load_error("allow_ports = [3000]\n"), home_ + "/run.toml: unknown key \"allow_ports\" (line 1)");
}

TEST_F(RunProfileTest, WrongTypesNameKeyAndExpectedType) {
  EXPECT_EQ(load_error("[limits]\npids = \"many\"\n"),
            home_ + "/run.toml: limits.pids: expected an integer, not a string (line 2)");
  EXPECT_EQ(load_error("bind = \"~/src/project\"\n"),
            home_ + "/run.toml: bind: expected an array of strings, not a string (line 1)");
  EXPECT_EQ(load_error("limits = 3\n"), home_ + "/run.toml: limits: expected a table, not an integer (line 1)");
  EXPECT_THAT(load_error("[limits]\nmemory = \"2X\"\n"),
              HasSubstr("limits.memory: invalid size \"2X\": unknown unit \"X\""));
  EXPECT_THAT(load_error("[limits]\nptys = 0\n"), HasSubstr("limits.ptys: must be between 1 and"));
  EXPECT_THAT(load_error("[limits]\ntcp_memory = \"4K\"\n"),
              HasSubstr("limits.tcp_memory: must be \"0\" (no separate bound) or at least \"1M\""));
  EXPECT_THAT(load_error("[env]\n\"BAD-NAME\" = \"x\"\n"), HasSubstr("is not a variable name"));
  EXPECT_THAT(load_error("[env]\nX = 1\n"), HasSubstr("env: expected a string, not an integer"));
  EXPECT_THAT(load_error("pass_env = [\"A=B\"]\n"), HasSubstr("pass_env: \"A=B\" is not a variable name"));
}

TEST_F(RunProfileTest, EveryProblemIsReportedOnItsOwnLine) {
  std::string err = load_error("a = 1\nb = 2\n[limits]\npids = -1\n");
  EXPECT_EQ(err, home_ + "/run.toml: unknown key \"a\" (line 1)\n" + home_ + "/run.toml: unknown key \"b\" (line 2)\n" +
                     home_ + "/run.toml: limits.pids: must be between 1 and 2147483647, not -1 (line 4)");
}

// The egress policy reads as in the server config; a one-person profile has no users.
TEST_F(RunProfileTest, EgressPolicyAndHostsAreReadAsInTheServerConfig) {
  RunProfile p = load_run_profile(write_profile(R"(
[policy.default]
allow = ["pypi.org", "*.pythonhosted.org:443"]
deny = ["evil.pypi.org"]
allow_addresses = ["127.0.0.1/32"]
[hosts]
"Dev.Test" = "127.0.0.1"
)"),
                                  home_);
  ASSERT_EQ(p.egress.default_policy.allow.size(), 2u);
  EXPECT_EQ(p.egress.default_policy.allow[1].to_string(), "*.pythonhosted.org:443");
  EXPECT_EQ(p.egress.default_policy.deny.size(), 1u);
  EXPECT_EQ(p.egress.default_policy.allow_addresses.size(), 1u);
  ASSERT_EQ(p.egress.hosts.count("dev.test"), 1u);
  EXPECT_EQ(p.egress.hosts.at("dev.test").to_string(), "127.0.0.1");

  EXPECT_TRUE(load_run_profile(write_profile("home = \"~/h\"\n"), home_).egress.default_policy.allow.empty());
  EXPECT_EQ(load_error("[policy.users.alice]\nallow = [\"x.org\"]\n"),
            home_ + "/run.toml: unknown key \"policy.users\" (line 1)");
  EXPECT_THAT(load_error("[policy.default]\nallow = [\"a b\"]\n"), HasSubstr("policy.default.allow: \"a b\""));
  EXPECT_THAT(load_error("[hosts]\n\"dev.test\" = \"nowhere\"\n"),
              HasSubstr("hosts.dev.test: \"nowhere\" is not an IP address"));
}

TEST_F(RunProfileTest, InvalidTomlSaysWhere) {
  EXPECT_THAT(load_error("bind = [\n"), HasSubstr("/run.toml: invalid TOML: "));
  EXPECT_THAT(load_error("x = = 1\n"), HasSubstr("(line 1, column"));
}

TEST_F(RunProfileTest, MissingBindSourceInProfileIsAnError) {
  EXPECT_EQ(load_error("ro_bind = [\"/nope\"]\n"),
            home_ + "/run.toml: ro_bind: /nope: No such file or directory (line 1)");
}

TEST_F(RunProfileTest, BindSpecDefaultsTargetToSource) {
  BindMount b = parse_bind_spec("~/src/project", true, home_);
  EXPECT_EQ(b.source, home_ + "/src/project");
  EXPECT_EQ(b.target, home_ + "/src/project");
  EXPECT_TRUE(b.writable);
  BindMount r = parse_bind_spec(home_ + "/data/ref:/ref", false, home_);
  EXPECT_EQ(r.source, home_ + "/data/ref");
  EXPECT_EQ(r.target, "/ref");
  EXPECT_FALSE(r.writable);
}

TEST_F(RunProfileTest, BindSpecNormalizesPaths) {
  BindMount b = parse_bind_spec(home_ + "/src/./project/:/a/../b/", true, home_);
  EXPECT_EQ(b.source, home_ + "/src/project");
  EXPECT_EQ(b.target, "/b");
  // ".." cannot climb above the box's root.
  EXPECT_EQ(parse_bind_spec(home_ + "/.opam:/../../opt/x", false, home_).target, "/opt/x");
}

TEST_F(RunProfileTest, BindSpecErrorsNameTheFlag) {
  auto error_of = [&](const std::string& spec, bool writable) -> std::string {
    try {
      parse_bind_spec(spec, writable, home_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of("/nope", true), "--bind: /nope: No such file or directory");
  EXPECT_EQ(error_of("/nope", false), "--ro-bind: /nope: No such file or directory");
  EXPECT_THAT(error_of("relative/path", true), HasSubstr("--bind: relative/path: source must be an absolute path"));
  EXPECT_THAT(error_of("~/.opam:relative", true), HasSubstr("destination must be an absolute path"));
  EXPECT_THAT(error_of("~/.opam:", true), HasSubstr("destination must be an absolute path"));
  EXPECT_THAT(error_of("~/.opam:/", true), HasSubstr("cannot bind over the box's /"));
  EXPECT_THAT(error_of("~root/x", true), HasSubstr("only ~ and ~/ are expanded"));
  EXPECT_THAT(error_of("", true), HasSubstr("empty bind spec"));
}

TEST_F(RunProfileTest, HomeExpansion) {
  EXPECT_EQ(expand_home("~", "/home/a"), "/home/a");
  EXPECT_EQ(expand_home("~/x/y", "/home/a"), "/home/a/x/y");
  EXPECT_EQ(expand_home("/abs/~", "/home/a"), "/abs/~");
  EXPECT_EQ(expand_home("rel", "/home/a"), "rel");
  EXPECT_THROW(expand_home("~/x", ""), Error);
}

}  // namespace
}  // namespace agentbox
