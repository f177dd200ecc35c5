#include "backup/mirror_record.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <nlohmann/json.hpp>

#include "backup/mirror_layout.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::backup {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr size_t kMaxRecordBytes = 64 << 10;

bool exists_at(int dirfd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The last day of DIR/.deleted with a put-away home in it ("" if none).
std::string put_away_day(int account_dir_fd) {
  UniqueFd deleted(::openat(account_dir_fd, std::string(kDeletedDir).c_str(), kDirFlags));
  if (!deleted) return "";
  std::vector<std::string> days = dir_names_at(deleted.get());
  for (auto day = days.rbegin(); day != days.rend(); ++day) {
    if (!is_date_name(*day)) continue;
    UniqueFd d(::openat(deleted.get(), day->c_str(), kDirFlags));
    if (!d) continue;
    for (const std::string& n : dir_names_at(d.get()))
      if (n.starts_with(kPutAwayHome)) return *day;
  }
  return "";
}

}  // namespace

std::string record_text(const MirrorRecord& r) {
  return nlohmann::json{{"user", r.user}, {"name", r.name}, {"uid", r.uid}, {"created", r.created}}.dump() + "\n";
}

std::optional<MirrorRecord> parse_record(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  auto str = [&](const char* key) { return j.contains(key) && j[key].is_string(); };
  auto uint = [&](const char* key) { return j.contains(key) && j[key].is_number_unsigned(); };
  if (!str("user") || !str("name") || !uint("uid") || !uint("created")) return std::nullopt;
  MirrorRecord r{j["user"].get<std::string>(), j["name"].get<std::string>(), j["uid"].get<uid_t>(),
                 j["created"].get<int64_t>()};
  if (r.user.empty() || r.name.empty()) return std::nullopt;
  return r;
}

std::optional<MirrorRecord> read_record(int account_dir_fd) {
  UniqueFd fd(::openat(account_dir_fd, std::string(kRecordFile).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxRecordBytes) return std::nullopt;
  }
  return parse_record(text);
}

void write_record(int account_dir_fd, const MirrorRecord& record) {
  if (read_record(account_dir_fd) == record) return;  // once per account, not once per pass
  const std::string name(kRecordFile), tmp = std::string(kTempPrefix) + name;
  {
    UniqueFd fd(::openat(account_dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw sys_error("open(" + tmp + ")");
    write_all(fd.get(), record_text(record));
    check(::fsync(fd.get()), "fsync(" + tmp + ")");
  }
  check(::renameat(account_dir_fd, tmp.c_str(), account_dir_fd, name.c_str()), "rename(" + tmp + ", " + name + ")");
}

std::vector<MirroredAccount> mirrored_accounts(int mirror_root_fd) {
  std::vector<MirroredAccount> out;
  for (const std::string& name : dir_names_at(mirror_root_fd)) {
    if (name.starts_with('.')) continue;
    UniqueFd dir(::openat(mirror_root_fd, name.c_str(), kDirFlags));
    if (!dir) continue;  // not a directory of ours
    MirroredAccount a;
    a.dir = name;
    a.record = read_record(dir.get());
    a.has_home = exists_at(dir.get(), std::string(kHomeDir));
    if (!a.has_home) a.deleted_on = put_away_day(dir.get());
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace agentbox::backup
