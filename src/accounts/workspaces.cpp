#include "accounts/workspaces.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include <nlohmann/json.hpp>

#include "fs/fs_error.hpp"
#include "fs/tree_walk.hpp"
#include "store/box_key.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::accounts {

namespace {

using nlohmann::json;

constexpr size_t kHashChars = 16;
constexpr size_t kMaxRecordBytes = 4096;
constexpr const char* kRecordSuffix = ".json";

bool is_hash(std::string_view s) {
  return s.size() == kHashChars &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void write_record(const std::string& dir, std::string_view context, int64_t created) {
  const std::string record = dir + kRecordSuffix;
  const std::string text = json{{"context", context}, {"created", created}}.dump();
  UniqueFd f(::open(record.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (f && ::write(f.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) ::unlink(record.c_str());
}

// The record's context id and creation time, its mtime the last use; nothing when unreadable.
bool read_record(const std::string& dir, Workspace& w) {
  UniqueFd f(::open((dir + kRecordSuffix).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!f || ::fstat(f.get(), &st) != 0) return false;
  std::string text(kMaxRecordBytes, '\0');
  const ssize_t n = ::read(f.get(), text.data(), text.size());
  if (n <= 0) return false;
  text.resize(static_cast<size_t>(n));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  w.context = j.value("context", "");
  w.created = j.value("created", int64_t{0});
  w.last_used = st.st_mtime;
  return true;
}

uint64_t tree_size(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return 0;
  uint64_t total = 0;
  walk_tree(fd.get(), dir, {}, [&](const WalkEntry& w) {
    struct stat s {};
    if (w.type == DT_REG && ::fstatat(w.dirfd, w.entry.name.c_str(), &s, AT_SYMLINK_NOFOLLOW) == 0)
      total += static_cast<uint64_t>(s.st_size);
    return Visit::next;
  });
  return total;
}

}  // namespace

std::string workspace_dir(const std::string& volume_root, std::string_view profile, std::string_view hash) {
  return volume_root + "/workspaces/" + std::string(profile) + "/" + std::string(hash);
}

void note_workspace_use(const std::string& dir, std::string_view context) {
  const std::string record = dir + kRecordSuffix;
  if (::utimensat(AT_FDCWD, record.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) return;
  write_record(dir, context, static_cast<int64_t>(::time(nullptr)));
}

std::vector<Workspace> list_workspaces(const std::string& volume_root, bool with_sizes) {
  std::vector<Workspace> out;
  const std::string root = volume_root + "/workspaces";
  for (const std::string& profile : names_in(root)) {
    for (const std::string& name : names_in(root + "/" + profile)) {
      const std::string dir = workspace_dir(volume_root, profile, name);
      struct stat st {};
      if (!is_hash(name) || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      Workspace w{.profile = profile, .hash = name};
      if (!read_record(dir, w)) w.created = w.last_used = st.st_mtime;
      if (with_sizes) w.size = tree_size(dir);
      out.push_back(std::move(w));
    }
  }
  return out;
}

std::vector<Workspace> find_workspaces(const std::vector<Workspace>& all, std::string_view context,
                                       std::string_view profile) {
  std::vector<Workspace> out;
  const std::string hash = context_hash(context);
  for (const Workspace& w : all)
    if ((profile.empty() || w.profile == profile) && (w.hash == hash || w.hash == context)) out.push_back(w);
  return out;
}

TrashItem trash_workspace(AccountDirectory& callers, const Account& account, const Workspace& w) {
  const VolumePaths volume = callers.volume_of(account);
  Trash trash(volume.trash, *callers.home(account));
  const std::string dir = workspace_dir(volume.root, w.profile, w.hash);
  TrashItem item = trash.put_workspace(dir, {w.profile, w.hash, w.context});
  ::unlink((dir + kRecordSuffix).c_str());  // its next use starts a new record
  return item;
}

TrashRestore restore_workspace(AccountDirectory& callers, const Account& account, const std::string& id) {
  const VolumePaths volume = callers.volume_of(account);
  Trash trash(volume.trash, *callers.home(account));
  std::optional<TrashItem> item = trash.find(id);
  // The item's own record says where it goes: a hash and a profile's name, nothing else.
  const auto plain = [](std::string_view name) {
    return !name.empty() && name.find('/') == std::string_view::npos && name[0] != '.';
  };
  if (!item || !item->workspace || !is_hash(item->workspace->hash) || !plain(item->workspace->profile))
    throw FsError(FsErrorKind::not_found, "No workspace in the trash: " + id);
  const TrashWorkspace& ws = *item->workspace;
  const std::string dir = workspace_dir(volume.root, ws.profile, ws.hash);
  TrashRestore out = trash.restore_workspace(id, dir);
  write_record(dir, ws.context, static_cast<int64_t>(::time(nullptr)));
  return out;
}

}  // namespace agentbox::accounts
