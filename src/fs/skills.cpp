#include "fs/skills.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "fs/dir_entries.hpp"
#include "fs/front_matter.hpp"
#include "fs/fs_error.hpp"
#include "fs/tree_walk.hpp"

namespace agentbox {
namespace {

constexpr std::string_view kSkillFile = "SKILL.md";

// SKILL.md of folder `name` in root, nullopt when it is missing, unreadable or too large.
std::optional<std::string> read_skill_file(const SkillRoot& root, const HomePath& file) {
  try {
    UniqueFd fd = root.dir->open(file, O_RDONLY);
    std::string text;
    char buf[16384];
    for (;;) {
      const ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::nullopt;  // a directory called SKILL.md, or an I/O error
      if (n == 0) return text;
      if (text.size() + static_cast<size_t>(n) > kMaxSkillFileBytes) return std::nullopt;
      text.append(buf, static_cast<size_t>(n));
    }
  } catch (const Error&) {
    return std::nullopt;
  }
}

struct Found {
  SkillSummary summary;
  std::string body;
  HomePath folder;
  const SkillRoot* root;
};

// Calls on(found) for each skill of root, in folder name order; on returns false to stop.
template <class On>
void each_skill(const SkillRoot& root, On on) {
  auto as_user = root.dir->as_user();
  std::vector<DirEntry> entries;
  try {
    UniqueFd fd = root.dir->open(root.path, O_PATH | O_DIRECTORY);
    entries = read_dir_entries(fd.get(), root.path.shown);
  } catch (const Error&) {
    return;  // no such root (most users have none of them), or not readable
  }
  size_t looked = 0;
  for (const DirEntry& e : entries) {
    if (looked++ == kMaxSkillsPerRoot) break;
    if (e.name.starts_with('.') || !is_skill_name(e.name)) continue;
    HomePath folder = root.path.child(e.name);
    HomePath file = folder.child(kSkillFile);
    std::optional<std::string> text = read_skill_file(root, file);
    if (!text) continue;
    FrontMatter fm = split_front_matter(*text);
    Found f{{}, std::move(fm.body), folder, &root};
    auto name = fm.fields.find("name");
    f.summary.name = name != fm.fields.end() && is_skill_name(name->second) ? name->second : e.name;
    f.summary.id = f.summary.name;
    if (auto d = fm.fields.find("description"); d != fm.fields.end()) f.summary.description = d->second;
    f.summary.location = file.shown;
    if (!on(std::move(f), e.name)) return;
  }
}

// The files of the skill's folder but its SKILL.md, relative to it, sorted; bounded.
void list_resources(const Found& f, Skill& out) {
  auto as_user = f.root->dir->as_user();
  try {
    UniqueFd fd = f.root->dir->open(f.folder, O_PATH | O_DIRECTORY);
    WalkLimits limits;
    limits.max_depth = kMaxSkillResourceDepth;
    limits.max_entries = 20 * kMaxSkillResources;
    const bool whole = walk_tree(fd.get(), f.folder.shown, limits, [&](const WalkEntry& w) {
      if (w.type == DT_DIR) return w.entry.name.starts_with('.') ? Visit::prune : Visit::next;
      if (w.entry.name.starts_with('.') || w.rel == kSkillFile) return Visit::next;
      if (out.resources.size() == kMaxSkillResources) {
        out.resources_truncated = true;
        return Visit::stop;
      }
      out.resources.emplace_back(w.rel);
      return Visit::next;
    });
    if (!whole) out.resources_truncated = true;
  } catch (const Error&) {
    // The folder went away meanwhile: a skill without resources.
  }
  std::sort(out.resources.begin(), out.resources.end());
}

}  // namespace

bool is_skill_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

std::vector<SkillSummary> list_skills(const std::vector<SkillRoot>& roots) {
  std::vector<SkillSummary> out;
  std::set<std::string> seen;
  for (const SkillRoot& root : roots)
    each_skill(root, [&](Found f, const std::string&) {
      if (seen.insert(f.summary.name).second) out.push_back(std::move(f.summary));
      return true;
    });
  std::sort(out.begin(), out.end(), [](const SkillSummary& a, const SkillSummary& b) { return a.name < b.name; });
  return out;
}

std::optional<Skill> read_skill(const std::vector<SkillRoot>& roots, std::string_view name) {
  if (!is_skill_name(name)) return std::nullopt;
  // As list_skills picks: the first skill of that name in root order wins; a folder of that
  // name counts only when its skill is not shadowed by an earlier one of the same name.
  std::set<std::string> seen;
  std::optional<Found> by_name, by_folder;
  for (const SkillRoot& root : roots) {
    each_skill(root, [&](Found f, const std::string& folder) {
      if (!seen.insert(f.summary.name).second) return true;  // shadowed
      if (f.summary.name == name) {
        by_name = std::move(f);
        return false;
      }
      if (!by_folder && folder == name) by_folder = std::move(f);
      return true;
    });
    if (by_name) break;
  }
  std::optional<Found>& f = by_name ? by_name : by_folder;
  if (!f) return std::nullopt;
  Skill out;
  static_cast<SkillSummary&>(out) = f->summary;
  out.content = std::move(f->body);
  list_resources(*f, out);
  return out;
}

}  // namespace agentbox
