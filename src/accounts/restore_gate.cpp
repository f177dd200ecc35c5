#include "accounts/restore_gate.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::accounts {

namespace {

constexpr std::string_view kSuffix = ".json";

}  // namespace

RestoreGate::RestoreGate(std::string dir) : dir_(std::move(dir)) {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir_ + ")");
  UniqueFd markers(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!markers) throw sys_error("open(" + dir_ + ")");
  for (const std::string& file : dir_names_at(markers.get())) {
    if (file.starts_with('.') || !file.ends_with(kSuffix)) continue;  // replace_file's temporaries too
    auto text = read_file_if_exists(dir_ + "/" + file);
    nlohmann::json j = nlohmann::json::parse(text.value_or(""), nullptr, false);
    if (!j.is_object() || !j.contains("user") || !j["user"].is_string()) continue;
    const std::string name = file.substr(0, file.size() - kSuffix.size()), user = j["user"].get<std::string>();
    by_name_[name] = user;
    ++users_[user];
  }
}

bool RestoreGate::restoring(std::string_view external_id) const {
  std::lock_guard lock(mu_);
  return users_.contains(external_id);
}

void RestoreGate::begin(const std::string& name, const std::string& external_id) {
  {
    std::lock_guard lock(mu_);
    if (by_name_.contains(name)) return;
  }
  replace_file(dir_ + "/" + name + std::string(kSuffix), nlohmann::json{{"user", external_id}}.dump() + "\n", 0600);
  std::lock_guard lock(mu_);
  if (by_name_.emplace(name, external_id).second) ++users_[external_id];
}

void RestoreGate::end(const std::string& name) {
  const std::string path = dir_ + "/" + name + std::string(kSuffix);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw sys_error("unlink(" + path + ")");
  std::lock_guard lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return;
  if (--users_[it->second] == 0) users_.erase(it->second);
  by_name_.erase(it);
}

std::map<std::string, std::string> RestoreGate::pending() const {
  std::lock_guard lock(mu_);
  return by_name_;
}

}  // namespace agentbox::accounts
