// fs/skills: skills found in their roots in order, one per name, read through a ConfinedDir.
// Files are made in a scratch directory and read with the test's own uid.
#include "fs/skills.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

namespace fsys = std::filesystem;

class FsSkills : public ::testing::Test {
 protected:
  void SetUp() override {
    fsys::create_directories(home_path() + "/.claude/skills");
    fsys::create_directories(ops_path());
    home_.emplace(ConfinedDir::open_home(home_path(), "/home/alice", ::getuid(), ::getgid()));
    ops_.emplace(ConfinedDir::open_home(ops_path(), "/agentbox/skills", ::getuid(), ::getgid()));
  }

  std::string home_path() const { return scratch_.path() + "/home"; }
  std::string ops_path() const { return scratch_.path() + "/ops"; }

  static void write(const std::string& path, const std::string& text) {
    fsys::create_directories(fsys::path(path).parent_path());
    std::ofstream(path) << text;
  }
  static std::string skill_md(const std::string& name, const std::string& description, const std::string& body) {
    return "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body;
  }

  std::vector<SkillRoot> roots() const {
    std::vector<SkillRoot> r;
    for (const char* f : {"~/.agents/skills", "~/.claude/skills", "~/.codex/skills", "~/.cptr/skills"})
      r.push_back({&*home_, home_->path(f)});
    r.push_back({&*ops_, ops_->path("")});
    return r;
  }

  testing::ScratchDir scratch_{"fs-skills"};
  std::optional<ConfinedDir> home_, ops_;
};

TEST_F(FsSkills, ListsEachRootOncePerNameTheUsersFirst) {
  write(home_path() + "/.agents/skills/a/SKILL.md", skill_md("shared", "from agents", "A"));
  write(home_path() + "/.claude/skills/b/SKILL.md", skill_md("shared", "from claude", "B"));
  write(home_path() + "/.claude/skills/c/SKILL.md", skill_md("claude-only", "c", "C"));
  write(home_path() + "/.codex/skills/d/SKILL.md", skill_md("codex-only", "d", "D"));
  write(home_path() + "/.cptr/skills/e/SKILL.md", skill_md("cptr-only", "e", "E"));
  write(ops_path() + "/f/SKILL.md", skill_md("claude-only", "operator's", "F"));
  write(ops_path() + "/g/SKILL.md", skill_md("ops-only", "g", "G"));
  write(home_path() + "/.claude/skills/no-skill-md/README.md", "not a skill");

  std::vector<SkillSummary> list = list_skills(roots());
  ASSERT_EQ(list.size(), 5u);
  std::map<std::string, SkillSummary> by;
  for (auto& s : list) by[s.name] = s;
  EXPECT_EQ(by["shared"].description, "from agents");
  EXPECT_EQ(by["shared"].location, "/home/alice/.agents/skills/a/SKILL.md");
  EXPECT_EQ(by["claude-only"].description, "c");
  EXPECT_EQ(by["ops-only"].location, "/agentbox/skills/g/SKILL.md");
  EXPECT_EQ(by["codex-only"].id, "codex-only");
  EXPECT_TRUE(by.count("cptr-only"));
}

TEST_F(FsSkills, ReadsContentWithoutFrontMatterAndListsResources) {
  write(home_path() + "/.claude/skills/pdf/SKILL.md", skill_md("pdf", "Fill forms.", "# PDF\nRun scripts/fill.py\n"));
  write(home_path() + "/.claude/skills/pdf/scripts/fill.py", "print(1)\n");
  write(home_path() + "/.claude/skills/pdf/reference.md", "ref\n");
  write(home_path() + "/.claude/skills/pdf/.hidden", "x");
  std::optional<Skill> s = read_skill(roots(), "pdf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->content, "# PDF\nRun scripts/fill.py\n");
  EXPECT_EQ(s->description, "Fill forms.");
  EXPECT_EQ(s->location, "/home/alice/.claude/skills/pdf/SKILL.md");
  EXPECT_EQ(s->resources, (std::vector<std::string>{"reference.md", "scripts/fill.py"}));
  EXPECT_FALSE(s->resources_truncated);
}

TEST_F(FsSkills, AFolderWithoutFrontMatterIsNamedByTheFolder) {
  write(home_path() + "/.claude/skills/plain/SKILL.md", "Just text.\n");
  std::optional<Skill> s = read_skill(roots(), "plain");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "plain");
  EXPECT_EQ(s->description, "");
  EXPECT_EQ(s->content, "Just text.\n");
}

TEST_F(FsSkills, AFrontMatterNameIsFoundByFolderToo) {
  write(home_path() + "/.claude/skills/folder/SKILL.md", skill_md("named", "n", "N"));
  ASSERT_TRUE(read_skill(roots(), "named"));
  ASSERT_TRUE(read_skill(roots(), "folder"));
  EXPECT_EQ(read_skill(roots(), "folder")->name, "named");
}

TEST_F(FsSkills, TheOperatorsSkillOfAShadowedNameIsNotRead) {
  write(home_path() + "/.claude/skills/x/SKILL.md", skill_md("x", "mine", "mine"));
  write(ops_path() + "/x/SKILL.md", skill_md("x", "operator", "theirs"));
  EXPECT_EQ(read_skill(roots(), "x")->content, "mine");
}

TEST_F(FsSkills, PathsAreNoNames) {
  write(home_path() + "/secret.md", skill_md("secret", "s", "private"));
  write(home_path() + "/.claude/skills/ok/SKILL.md", skill_md("ok", "o", "O"));
  for (const char* bad : {"..", ".", "", "../..", "../../secret.md", "ok/../ok", "/etc/passwd", "a\nb"}) {
    EXPECT_FALSE(is_skill_name(bad)) << bad;
    EXPECT_FALSE(read_skill(roots(), bad)) << bad;
  }
  EXPECT_TRUE(is_skill_name("ok"));
}

TEST_F(FsSkills, ALinkOutOfTheRootIsNotFollowed) {
  write(scratch_.path() + "/outside/SKILL.md", skill_md("outside", "o", "leaked"));
  fsys::create_directory_symlink(scratch_.path() + "/outside", home_path() + "/.claude/skills/outside");
  EXPECT_TRUE(list_skills(roots()).empty());
  EXPECT_FALSE(read_skill(roots(), "outside"));
}

TEST_F(FsSkills, NoRootsNoSkills) {
  fsys::remove_all(home_path() + "/.claude");
  EXPECT_TRUE(list_skills(roots()).empty());
}

}  // namespace
}  // namespace agentbox
