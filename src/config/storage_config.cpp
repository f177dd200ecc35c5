#include "config/storage_config.hpp"

#include "config/toml_schema.hpp"
#include "config/units.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

constexpr std::string_view kUsersPrefix = "accounts.users.";
constexpr int64_t kMaxTrashDays = 3650;

uint64_t disk_size(const toml::node& value) {
  uint64_t bytes = toml_size(value);
  if (bytes != 0 && bytes < kMinDiskBytes)
    throw Error("must be 0 (no quota) or at least " + format_size(kMinDiskBytes) + ", not " + format_size(bytes));
  return bytes;
}

uint64_t inode_count(const toml::node& value) { return static_cast<uint64_t>(toml_integer(value, 1000, INT64_MAX)); }

// One key of a quota table; false if the name is not one.
bool apply_quota_key(StorageConfig::Quota& quota, std::string_view name, const toml::node& value) {
  if (name == "disk")
    quota.disk_bytes = disk_size(value);
  else if (name == "inodes")
    quota.inodes = inode_count(value);
  else
    return false;
  return true;
}

// A user's table, read whole.
StorageConfig::QuotaOverride user_quota(const toml::node& value) {
  const toml::table* table = value.as_table();
  if (!table) throw Error("expected a table of disk and inodes");
  StorageConfig::QuotaOverride o;
  for (const auto& [k, v] : *table) {
    try {
      if (k.str() == "disk") {
        o.disk_bytes = disk_size(v);
        if (*o.disk_bytes == 0) throw Error("a user's quota cannot be 0 (quotas are turned off in [accounts])");
      } else if (k.str() == "inodes") {
        o.inodes = inode_count(v);
      } else {
        throw Error("unknown key \"" + std::string(k.str()) + "\" (expected disk or inodes)");
      }
    } catch (const Error& e) {
      throw e.wrap(k.str());
    }
  }
  return o;
}

}  // namespace

StorageConfig::Quota StorageConfig::quota_for(std::string_view user) const {
  Quota q = quota;
  if (auto it = users.find(std::string(user)); it != users.end() && q.disk_bytes != 0) {
    q.disk_bytes = it->second.disk_bytes.value_or(q.disk_bytes);
    q.inodes = it->second.inodes.value_or(q.inodes);
  }
  return q;
}

bool apply_storage_key(StorageConfig& config, std::string_view key, const toml::node& value) {
  if (key == "accounts.trash_days") {
    config.trash_days = static_cast<uint32_t>(toml_integer(value, 1, kMaxTrashDays));
    return true;
  }
  if (key.starts_with("accounts.") && apply_quota_key(config.quota, key.substr(9), value)) return true;
  if (key.starts_with(kUsersPrefix)) {
    config.users[std::string(key.substr(kUsersPrefix.size()))] = user_quota(value);
    return true;
  }
  return false;
}

}  // namespace agentbox
