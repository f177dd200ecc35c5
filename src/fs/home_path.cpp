#include "fs/home_path.hpp"

#include <algorithm>
#include <vector>

#include "fs/fs_error.hpp"

namespace agentbox {
namespace {

std::string join(const std::vector<std::string_view>& parts) {
  std::string out;
  for (auto p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return out;
}

[[noreturn]] void refuse(std::string_view user_path) {
  throw FsError(FsErrorKind::forbidden, "Access denied: " + std::string(user_path) + " is outside the home directory");
}

std::string shown_of(std::string_view box_home, std::string_view rel) {
  std::string shown(box_home);
  if (!rel.empty()) {
    shown += '/';
    shown += rel;
  }
  return shown;
}

// Appends `path`'s components to `parts`, applying ".." lexically ("/.." stays "/").
void append(std::vector<std::string_view>& parts, std::string_view path) {
  for (auto p : split_path(path)) {
    if (p != "..")
      parts.push_back(p);
    else if (!parts.empty())
      parts.pop_back();
  }
}

}  // namespace

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty() && part != ".") parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

std::string_view HomePath::name() const {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? std::string_view(rel) : std::string_view(rel).substr(slash + 1);
}

HomePath HomePath::parent(std::string_view box_home) const {
  size_t slash = rel.rfind('/');
  std::string up = slash == std::string::npos ? std::string() : rel.substr(0, slash);
  return HomePath{up, shown_of(box_home, up)};
}

HomePath HomePath::child(std::string_view child_name) const {
  HomePath out{rel, shown};
  if (!out.rel.empty()) out.rel += '/';
  out.rel += child_name;
  out.shown += '/';
  out.shown += child_name;
  return out;
}

HomePath parse_home_path(std::string_view user_path, std::string_view box_home, std::string_view cwd) {
  if (user_path.find('\0') != std::string_view::npos)
    throw FsError(FsErrorKind::bad_request, "Path contains a NUL byte");
  const std::string_view original = user_path;
  const auto home_parts = split_path(box_home);
  // Work on the absolute path as the box sees it, then keep it only if it is under the home.
  std::vector<std::string_view> parts;
  HomePath base;  // owns the cwd's text while `parts` points into it
  if (user_path == "~" || user_path.starts_with("~/")) {
    parts = home_parts;
    user_path.remove_prefix(1);
  } else if (!user_path.starts_with('/')) {
    if (!cwd.empty()) base = parse_home_path(cwd, box_home);
    parts = home_parts;
    append(parts, base.rel);
  }
  append(parts, user_path);
  if (parts.size() < home_parts.size() || !std::equal(home_parts.begin(), home_parts.end(), parts.begin()))
    refuse(original);
  std::string rel = join({parts.begin() + static_cast<long>(home_parts.size()), parts.end()});
  std::string shown = shown_of(box_home, rel);
  return HomePath{std::move(rel), std::move(shown)};
}

}  // namespace agentbox
