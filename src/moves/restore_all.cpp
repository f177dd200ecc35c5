#include "moves/restore_all.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "accounts/workspaces.hpp"
#include "backup/mirror_layout.hpp"
#include "backup/mirror_tree.hpp"
#include "moves/transfer.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::moves {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr const char* kStaging = ".restore-in";  // in the account's volume: the rename into place stays in it

UniqueFd open_dir(int dirfd, const std::string& name) {
  UniqueFd fd(::openat(dirfd, name.c_str(), kDirFlags));
  if (!fd) throw sys_error("open(" + name + ")");
  return fd;
}

// Why this node must not hold user ("" when it may): another node owns it (a pin or the ring),
// or a move of it is under way or over (the move gate's refusal).
std::string refusal(const RestoreAllContext& c, const std::string& user) {
  if (c.placement) {
    auto p = c.placement->placement();
    const ClusterNode& owner = p->owner(user);
    if (owner.name != c.placement->node()) {
      const bool pinned = p->config().pins.contains(user);
      return fmt::format("belongs to node {} ({})", owner.name, pinned ? "pinned there" : "its ring owner");
    }
  }
  if (c.moves) {
    try {
      c.moves(user);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return "";
}

struct Restored {
  Account account;
  backup::MirrorStats stats;
};

// The mirror's MIRROR/NAME/workspaces into STAGING/workspaces, owned as a move leaves them
// (api/moves.cpp): each workspace the account's, their parents and records the daemon's.
// False when the mirror holds none.
bool stage_workspaces(int saved, int staging, const std::string& staging_path, Restored& r) {
  const std::string ws(backup::kWorkspacesDir);
  UniqueFd saved_ws(::openat(saved, ws.c_str(), kDirFlags));
  if (!saved_ws && errno == ENOENT) return false;
  if (!saved_ws) throw sys_error("open(" + ws + ")");
  backup::MirrorStats stats =
      backup::mirror_tree(saved_ws.get(), staging, backup::utc_date(std::chrono::system_clock::now()),
                          {.skip_temporaries = true, .copy = backup::kWorkspacesDir});
  if (stats.errors > 0)
    throw Error(
        fmt::format("{} entries of the workspaces could not be copied (the first: {}); the user stays "
                    "refused until a run succeeds",
                    stats.errors, stats.error_messages.empty() ? "" : stats.error_messages.front()));
  r.stats.add(stats);
  // The copy kept the owners of the node that was lost: its daemon's may not be this one's.
  // (Modes are kept: these have no set-id bits for chown to clear.)
  const std::string root = staging_path + "/" + ws;
  std::vector<std::string> daemons{root};
  for (const auto& profile : std::filesystem::directory_iterator(root)) {
    daemons.push_back(profile.path());
    if (profile.is_directory() && !profile.is_symlink())
      for (const auto& entry : std::filesystem::directory_iterator(profile.path())) daemons.push_back(entry.path());
  }
  for (const std::string& path : daemons)
    check(::lchown(path.c_str(), ::geteuid(), ::getegid()), "chown(" + path + ")");
  for (const accounts::Workspace& w : accounts::list_workspaces(staging_path, false))
    reown_tree(accounts::workspace_dir(staging_path, w.profile, w.hash), r.account.uid, r.account.gid);
  return true;
}

// Steps 2-3 of restore_all.hpp for one account whose marker is written.
Restored restore_one(RestoreAllContext& c, int mirror_root, const backup::MirroredAccount& m) {
  const backup::MirrorRecord& record = *m.record;
  Restored r{c.accounts.get_or_create_named(record.user, record.name), {}};
  const VolumeLease lease = c.callers.lease_volume(r.account);  // the volume stays attached meanwhile
  const VolumePaths& v = lease.paths();
  UniqueFd root = open_dir(AT_FDCWD, v.root);
  backup::remove_tree(root.get(), kStaging);  // an interrupted attempt's
  if (::mkdirat(root.get(), kStaging, 0700) != 0) throw sys_error(fmt::format("mkdir({}/{})", v.root, kStaging));
  UniqueFd staging = open_dir(root.get(), kStaging);
  UniqueFd saved = open_dir(mirror_root, m.dir);
  UniqueFd saved_home = open_dir(saved.get(), std::string(backup::kHomeDir));
  // A killed pass's temporary copy in the mirror is no file of the home.
  r.stats = backup::mirror_tree(saved_home.get(), staging.get(), backup::utc_date(std::chrono::system_clock::now()),
                                {.skip_temporaries = true});
  if (r.stats.errors > 0)
    throw Error(
        fmt::format("{} entries could not be copied (the first: {}); nothing is in place, the user stays "
                    "refused until a run succeeds",
                    r.stats.errors, r.stats.error_messages.empty() ? "" : r.stats.error_messages.front()));
  const std::string staged = v.root + "/" + kStaging + "/" + std::string(backup::kHomeDir);
  reown_tree(staged, r.account.uid, r.account.gid);
  check(::chmod(staged.c_str(), 0700), "chmod(" + staged + ")");  // the home's mode is the daemon's
  const bool workspaces = stage_workspaces(saved.get(), staging.get(), v.root + "/" + kStaging, r);
  move_test_pause("restore-staged");
  // The home the volume was made with is empty: it goes, and the restored one takes its place.
  backup::remove_tree(root.get(), "home");
  check(::renameat(staging.get(), std::string(backup::kHomeDir).c_str(), root.get(), "home"),
        "rename(" + staged + ", " + v.home + ")");
  if (workspaces) {
    const std::string ws(backup::kWorkspacesDir);
    backup::remove_tree(root.get(), ws);  // none yet in a new volume; an interrupted attempt's
    check(::renameat(staging.get(), ws.c_str(), root.get(), ws.c_str()), "rename(" + ws + ")");
  }
  backup::remove_tree(root.get(), kStaging);
  // A descriptor of the empty home kept open (the trash upkeep opens every attached volume's)
  // would go on showing it.
  c.callers.close_home(r.account.name);
  return r;
}

nlohmann::json user_of(const backup::MirroredAccount& m) {
  return m.record ? nlohmann::json(m.record->user) : nlohmann::json(nullptr);
}

}  // namespace

RestoreStep plan_restore(const backup::MirroredAccount& m, const RestoreFacts& f) {
  if (!m.record)
    return {RestoreStep::fail,
            "no readable account.json, so whose home this is is not known (mirrored by an older "
            "agentbox, or damaged): make the account and `backup restore` it by hand"};
  if (m.record->name != m.dir)
    return {RestoreStep::fail, "its account.json names another account (" + m.record->name + ")"};
  if (f.resuming) return {RestoreStep::restore, ""};
  if (!m.has_home) {
    if (!m.deleted_on.empty())
      return {RestoreStep::skip, "deleted on " + m.deleted_on + " (its home is kept in .deleted until purged)"};
    return {RestoreStep::skip, "no home in the mirror"};
  }
  if (f.held) return {RestoreStep::skip, "held by this node already"};  // served here whatever the ring says
  if (!f.refused.empty()) return {RestoreStep::skip, f.refused};
  return {RestoreStep::restore, ""};
}

nlohmann::json restore_all(RestoreAllContext& c) {
  auto no_pass = c.mirror.hold_passes();
  const std::string& dir = c.mirror.options().dir;
  UniqueFd root(::open(dir.c_str(), kDirFlags));
  if (!root) throw sys_error("open(" + dir + ")");
  const auto pending = c.gate.pending();
  nlohmann::json restored = nlohmann::json::array(), skipped = nlohmann::json::array(),
                 errors = nlohmann::json::array();
  for (const backup::MirroredAccount& m : backup::mirrored_accounts(root.get())) {
    RestoreFacts facts;
    if (m.record) {
      facts.resuming = pending.contains(m.dir);
      facts.held = c.accounts.find(m.record->user).has_value();
      facts.refused = refusal(c, m.record->user);
    }
    const RestoreStep step = plan_restore(m, facts);
    if (step.action == RestoreStep::skip) {
      skipped.push_back({{"user", user_of(m)}, {"name", m.dir}, {"reason", step.reason}});
      continue;
    }
    if (step.action == RestoreStep::fail) {
      errors.push_back({{"user", user_of(m)}, {"name", m.dir}, {"detail", step.reason}});
      continue;
    }
    const std::string& user = m.record->user;
    try {
      c.gate.begin(m.dir, user);
      // Checked again now that the user is refused: a request may have made the account since.
      if (!facts.resuming && c.accounts.find(user)) {
        c.gate.end(m.dir);
        skipped.push_back({{"user", user}, {"name", m.dir}, {"reason", "held by this node already"}});
        continue;
      }
      Restored r = restore_one(c, root.get(), m);
      c.gate.end(m.dir);
      log::info("backup", "backup: restored {} as {} (uid {}): {} files, {} bytes", user, r.account.name, r.account.uid,
                r.stats.files_copied, r.stats.bytes_copied);
      restored.push_back({{"user", user},
                          {"name", r.account.name},
                          {"uid", r.account.uid},
                          {"files", r.stats.files_copied},
                          {"bytes", r.stats.bytes_copied},
                          {"resumed", facts.resuming}});
    } catch (const std::exception& e) {
      log::warn("backup", "backup: restore of {} ({}) failed: {}", m.dir, user, e.what());
      errors.push_back({{"user", user}, {"name", m.dir}, {"detail", e.what()}});
    }
  }
  return {{"restored", restored},
          {"skipped", skipped},
          {"errors", errors},
          {"total", {{"restored", restored.size()}, {"skipped", skipped.size()}, {"errors", errors.size()}}}};
}

}  // namespace agentbox::moves
