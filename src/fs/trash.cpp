#include "fs/trash.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "fs/dir_entries.hpp"
#include "fs/entry_ops.hpp"
#include "fs/fs_error.hpp"
#include "fs/tree_walk.hpp"
#include "util/error.hpp"
#include "util/random_hex.hpp"

namespace agentbox {
namespace {

using nlohmann::json;

constexpr const char* kEntry = "entry";
constexpr const char* kInfo = "info";
constexpr size_t kMillisDigits = 13;
constexpr int64_t kHalfMadeGraceMs = 60'000;  // a put in progress has an item without its entry
constexpr size_t kMaxInfoBytes = 16 << 10;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string new_id() {
  char millis[32];
  std::snprintf(millis, sizeof millis, "%013lld", static_cast<long long>(now_ms()));
  return std::string(millis) + "-" + random_hex(4);
}

int64_t id_millis(const std::string& id) { return std::stoll(id.substr(0, kMillisDigits)); }

bool is_full(int err) { return err == ENOSPC || err == EDQUOT; }

// Apparent size of what an entry holds: a file's size, a tree's files summed (the walk is
// bounded; a larger tree reports what it saw).
uint64_t size_of(const EntryRef& e, const struct stat& st, const std::string& shown) {
  if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  UniqueFd dir = open_in_dir(e.dir.get(), e.name, O_RDONLY | O_DIRECTORY);
  if (!dir) return 0;
  uint64_t total = 0;
  walk_tree(dir.get(), shown, {}, [&](const WalkEntry& w) {
    struct stat s {};
    if (w.type == DT_REG && ::fstatat(w.dirfd, w.entry.name.c_str(), &s, AT_SYMLINK_NOFOLLOW) == 0)
      total += static_cast<uint64_t>(s.st_size);
    return Visit::next;
  });
  return total;
}

// The item's `info`; false (errno set) when it could not be written whole.
bool write_info(int item_dir, const TrashItem& t) {
  json info = {{"path", t.path}, {"type", t.type}, {"size", t.size}, {"deleted_at", t.deleted_at}};
  if (t.workspace)
    info["workspace"] = {
        {"profile", t.workspace->profile}, {"hash", t.workspace->hash}, {"context", t.workspace->context}};
  const std::string text = info.dump();
  UniqueFd f(::openat(item_dir, kInfo, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  return f && ::write(f.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// Splits a daemon-made host path into its parent (opened O_PATH, no link followed) and name.
EntryRef host_entry(const std::string& host_path) {
  const size_t slash = host_path.rfind('/');
  if (slash == std::string::npos || slash + 1 == host_path.size()) throw Error("not a host path: " + host_path);
  UniqueFd parent(::open(host_path.substr(0, slash).c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!parent) throw sys_error("open(" + host_path.substr(0, slash) + ")");
  return {std::move(parent), host_path.substr(slash + 1)};
}

}  // namespace

bool is_trash_id(std::string_view id) {
  if (id.size() != kMillisDigits + 1 + 8 || id[kMillisDigits] != '-') return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (i == kMillisDigits) continue;
    const bool ok = i < kMillisDigits ? (c >= '0' && c <= '9') : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok) return false;
  }
  return true;
}

Trash::Trash(const std::string& trash_dir, const ConfinedDir& home) : home_(home) {
  dir_.reset(::open(trash_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_) throw sys_error("open(" + trash_dir + ")");
}

std::vector<std::string> Trash::ids() const {
  UniqueFd readable = open_in_dir(dir_.get(), ".", O_RDONLY | O_DIRECTORY);
  if (!readable) throw sys_error("open(trash)");
  std::vector<std::string> out;
  for (const DirEntry& d : read_dir_entries(readable.get(), "trash"))
    if (is_trash_id(d.name)) out.push_back(d.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<TrashItem> Trash::read_item(const std::string& id) const {
  UniqueFd item = open_in_dir(dir_.get(), id, O_PATH | O_DIRECTORY);
  if (!item) return std::nullopt;
  struct stat st {};
  if (::fstatat(item.get(), kEntry, &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  UniqueFd info = open_in_dir(item.get(), kInfo, O_RDONLY);
  if (!info) return std::nullopt;
  std::string text(kMaxInfoBytes, '\0');
  const ssize_t n = ::read(info.get(), text.data(), text.size());
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("path") || !j["path"].is_string()) return std::nullopt;
  TrashItem t;
  t.id = id;
  t.path = j["path"].get<std::string>();
  t.type = j.value("type", "file");
  t.size = j.value("size", uint64_t{0});
  t.deleted_at = j.value("deleted_at", int64_t{0});
  if (const auto ws = j.find("workspace"); ws != j.end() && ws->is_object())
    t.workspace = TrashWorkspace{ws->value("profile", ""), ws->value("hash", ""), ws->value("context", "")};
  return t;
}

void Trash::drop(const std::string& id) { remove_tree_at(dir_.get(), id, "trash item " + id); }

TrashPut Trash::put(const HomePath& p) {
  if (p.is_home()) throw FsError(FsErrorKind::forbidden, "Refusing to delete the home directory");
  auto as_user = home_.as_user();
  struct stat st {};
  EntryRef e =
      when_missing(FsErrorKind::not_found, "Path not found", p.shown, [&] { return home_.existing_entry(p, st); });
  TrashPut out;
  out.item.path = p.shown;
  out.item.type = S_ISDIR(st.st_mode) ? "directory" : "file";
  out.item.size = size_of(e, st, p.shown);
  for (;;) {
    out.item.id = new_id();
    out.item.deleted_at = id_millis(out.item.id) / 1000;
    int err = 0;
    if (::mkdirat(dir_.get(), out.item.id.c_str(), 0700) != 0) {
      err = errno;
    } else {
      UniqueFd item = open_in_dir(dir_.get(), out.item.id, O_PATH | O_DIRECTORY);
      if (!item) throw sys_error("open(trash item)");
      if (write_info(item.get(), out.item)) {
        fs_check(::renameat(e.dir.get(), e.name.c_str(), item.get(), kEntry), p.shown);
        return out;
      }
      err = errno ? errno : EIO;
      drop(out.item.id);
    }
    if (!is_full(err)) throw_fs_errno(err, p.shown);
    // No room for the item's bookkeeping: older items make room, and when there are none the
    // entry is deleted outright, which frees the space the caller wants back.
    if (!purge_oldest()) {
      remove_tree_at(e.dir.get(), e.name, p.shown);
      out.trashed = false;
      return out;
    }
  }
}

std::vector<TrashItem> Trash::list() const {
  auto as_user = home_.as_user();
  std::vector<TrashItem> items;
  const int64_t now = now_ms();
  for (const std::string& id : ids()) {
    if (auto item = read_item(id)) {
      items.push_back(std::move(*item));
    } else if (now - id_millis(id) > kHalfMadeGraceMs) {
      // A put cut short by a crash: its entry never left the home (or its info never landed).
      try {
        const_cast<Trash*>(this)->drop(id);
      } catch (const Error&) {
      }
    }
  }
  std::reverse(items.begin(), items.end());
  return items;
}

TrashRestore Trash::restore(const std::string& id, const std::optional<HomePath>& to) {
  auto as_user = home_.as_user();
  std::optional<TrashItem> item = is_trash_id(id) ? read_item(id) : std::nullopt;
  if (!item) throw FsError(FsErrorKind::not_found, "Not in the trash: " + id);
  if (item->workspace && !to)
    throw FsError(FsErrorKind::bad_request, "Item " + id + " is a workspace: it goes back to its context");
  const HomePath dest = to ? *to : home_.path(item->path);
  if (dest.is_home()) throw FsError(FsErrorKind::bad_request, "Cannot restore over the home directory");
  home_.make_dirs(dest.parent(home_.box_home()));
  TrashRestore out;
  out.path = dest.shown;
  {
    struct stat st {};
    EntryRef e = home_.entry(dest);
    if (::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) out.replaced = put(dest).item.id;
  }
  EntryRef e = home_.entry(dest);
  UniqueFd from = open_in_dir(dir_.get(), id, O_PATH | O_DIRECTORY);
  if (!from) throw_fs_errno(errno, dest.shown);
  fs_check(::renameat2(from.get(), kEntry, e.dir.get(), e.name.c_str(), RENAME_NOREPLACE), dest.shown);
  drop(id);
  return out;
}

std::optional<TrashItem> Trash::find(const std::string& id) const {
  auto as_user = home_.as_user();
  return is_trash_id(id) ? read_item(id) : std::nullopt;
}

TrashItem Trash::put_workspace(const std::string& host_dir, const TrashWorkspace& ws) {
  EntryRef e = host_entry(host_dir);
  struct stat st {};
  if (::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
    throw FsError(FsErrorKind::not_found, "No workspace for context " + (ws.context.empty() ? ws.hash : ws.context));
  TrashItem item;
  item.path = home_.box_home();
  item.type = "directory";
  item.workspace = ws;
  item.size = size_of(e, st, item.path);
  for (;;) {
    item.id = new_id();
    item.deleted_at = id_millis(item.id) / 1000;
    int err = 0;
    UniqueFd made;
    {
      auto as_user = home_.as_user();  // the item is the account's, as every other
      if (::mkdirat(dir_.get(), item.id.c_str(), 0700) != 0) {
        err = errno;
      } else {
        made = open_in_dir(dir_.get(), item.id, O_PATH | O_DIRECTORY);
        if (!made) throw sys_error("open(trash item)");
        if (!write_info(made.get(), item)) {
          err = errno ? errno : EIO;
          made.reset();
          drop(item.id);
        }
      }
    }
    if (made) {
      // As the daemon (this thread's own identity): the workspace's parent is the daemon's
      // (0711), which no box and no account may change.
      if (::renameat(e.dir.get(), e.name.c_str(), made.get(), kEntry) == 0) return item;
      err = errno;
      auto as_user = home_.as_user();
      drop(item.id);
      throw_fs_errno(err, item.path);
    }
    if (!is_full(err) || !purge_oldest()) throw_fs_errno(err, item.path);
  }
}

TrashRestore Trash::restore_workspace(const std::string& id, const std::string& host_dir) {
  std::optional<TrashItem> item = find(id);
  if (!item || !item->workspace) throw FsError(FsErrorKind::not_found, "No workspace in the trash: " + id);
  TrashRestore out;
  out.path = home_.box_home();
  // The parents are the daemon's, made as AccountDirectory makes them: no box reaches them.
  const std::string parent = host_dir.substr(0, host_dir.rfind('/'));
  for (const std::string& dir : {parent.substr(0, parent.rfind('/')), parent})
    if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
  EntryRef e = host_entry(host_dir);
  struct stat st {};
  if (::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
    out.replaced = put_workspace(host_dir, *item->workspace).id;
  UniqueFd from = open_in_dir(dir_.get(), id, O_PATH | O_DIRECTORY);
  if (!from) throw_fs_errno(errno, out.path);
  // Only a directory becomes a box's home, never a link put in its place.
  if (::fstatat(from.get(), kEntry, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
    throw FsError(FsErrorKind::bad_request, "Item " + id + " holds no workspace directory");
  fs_check(::renameat2(from.get(), kEntry, e.dir.get(), e.name.c_str(), RENAME_NOREPLACE), out.path);
  auto as_user = home_.as_user();
  drop(id);
  return out;
}

void Trash::remove(const std::string& id) {
  auto as_user = home_.as_user();
  if (!is_trash_id(id) || !read_item(id)) throw FsError(FsErrorKind::not_found, "Not in the trash: " + id);
  drop(id);
}

size_t Trash::clear() {
  auto as_user = home_.as_user();
  size_t n = 0;
  for (const std::string& id : ids()) {
    drop(id);
    ++n;
  }
  return n;
}

size_t Trash::purge_before(int64_t cutoff) {
  auto as_user = home_.as_user();
  size_t n = 0;
  for (const std::string& id : ids()) {
    if (id_millis(id) / 1000 >= cutoff) break;  // oldest first: the rest are newer
    drop(id);
    ++n;
  }
  return n;
}

bool Trash::purge_oldest() {
  auto as_user = home_.as_user();
  std::vector<std::string> all = ids();
  if (all.empty()) return false;
  drop(all.front());
  return true;
}

}  // namespace agentbox
