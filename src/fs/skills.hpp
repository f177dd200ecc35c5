#pragma once
// Skills (Open Terminal 0.13, API.md Part A): a skill is a folder holding SKILL.md (YAML front
// matter with `name` and `description`, then the instructions) and any supporting files. They
// are found in skill roots, in order (the user's ~/.agents/skills, ~/.claude/skills,
// ~/.codex/skills, ~/.cptr/skills, then the operator's [agent] skills_dir), one per name: the
// first root holding a name wins. Every file is reached through a ConfinedDir (the user's home,
// or the operator's skills directory held as one), with the account's fs identity held by the
// caller, so a link out of the root is never followed.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/confined_dir.hpp"

namespace agentbox {

struct SkillRoot {
  const ConfinedDir* dir;  // where the root is; outlives the calls below
  HomePath path;           // the root folder inside it; a missing one holds no skills
};

struct SkillSummary {
  std::string id;           // = name: unique in a listing
  std::string name;         // the front matter's `name`, else the folder's name
  std::string description;  // the front matter's `description`, else ""
  std::string location;     // SKILL.md as the box sees it
};

struct Skill : SkillSummary {
  std::string content;                 // SKILL.md without its front matter
  std::vector<std::string> resources;  // the folder's other files, relative to it, sorted
  bool resources_truncated = false;    // more files than kMaxSkillResources
};

inline constexpr size_t kMaxSkillsPerRoot = 500;       // folders looked at in one root
inline constexpr size_t kMaxSkillFileBytes = 1 << 20;  // a larger SKILL.md is not a skill
inline constexpr size_t kMaxSkillResources = 200;      // files listed per skill
inline constexpr int kMaxSkillResourceDepth = 4;       // folder levels below the skill's

// Whether `name` may name a skill at all: not empty, no '/', no NUL or control character, not
// "." or "..", at most 255 bytes. Anything else is a path, never looked up.
bool is_skill_name(std::string_view name);

// Every skill of the roots, de-duplicated by name (the first root wins), sorted by name.
// Unreadable folders and files are skipped: a broken skill must not hide the others.
std::vector<SkillSummary> list_skills(const std::vector<SkillRoot>& roots);

// The skill called `name` (its name, or its folder's), as list_skills would pick it; nullopt
// when none is, or the name is no skill name.
std::optional<Skill> read_skill(const std::vector<SkillRoot>& roots, std::string_view name);

}  // namespace agentbox
