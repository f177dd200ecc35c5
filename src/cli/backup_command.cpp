#include "cli/backup_command.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "backup/mirror_layout.hpp"
#include "backup/mirror_tree.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::cli {
namespace {

std::string bytes_text(uint64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < (1u << 20)) return fmt::format("{:.1f} KiB", n / 1024.0);
  if (n < (1u << 30)) return fmt::format("{:.1f} MiB", n / 1048576.0);
  return fmt::format("{:.1f} GiB", n / 1073741824.0);
}

void print_status(const nlohmann::json& s) {
  if (!s.value("enabled", false)) {
    std::cout << "mirror of homes: off (no [backup] dir in the daemon's configuration)\n";
    return;
  }
  std::cout << fmt::format("mirror of homes: {} (every {} s, deleted files kept {} days)\n", s.value("dir", ""),
                           s.value("interval", 0), s.value("keep_deleted_days", 0));
  if (s.value("running", false) && s["running_since"].is_number())
    std::cout << "now: a pass running since " << utc_time(s["running_since"].get<double>()) << "\n";
  const nlohmann::json& last = s["last_pass"];
  if (!last.is_object()) {
    std::cout << "last pass: none yet\n";
    return;
  }
  const double started = last.value("started", 0.0), ended = last.value("ended", 0.0);
  std::cout << fmt::format(
      "last pass: {} ({:.1f} s): {} accounts, {} files copied ({}), {} unchanged, {} kept in "
      ".deleted, {} errors\n",
      utc_time(started), ended - started, last["accounts"].size(), last.value("files_copied", 0),
      bytes_text(last.value("bytes_copied", uint64_t{0})), last.value("unchanged", 0), last.value("kept_deleted", 0),
      last.value("errors", 0));
  for (const nlohmann::json& a : last["accounts"]) {
    std::cout << fmt::format("  {}: {} copied ({}), {} unchanged, {} kept, {} changing, {} errors\n",
                             a.value("name", ""), a.value("files_copied", 0),
                             bytes_text(a.value("bytes_copied", uint64_t{0})), a.value("unchanged", 0),
                             a.value("kept_deleted", 0), a.value("changing", 0), a.value("errors", 0));
    for (const nlohmann::json& m : a.value("error_messages", nlohmann::json::array()))
      std::cout << "    " << m.get<std::string>() << "\n";
  }
}

// One line per account of the mirror, then the total; non-zero when any failed.
int restore_all(const BackupOptions& o) {
  nlohmann::json r = AdminClient(find_admin_target(o.target)).post("/admin/backup/restore", {{"all", true}});
  auto user = [](const nlohmann::json& a) {
    return a["user"].is_string() ? a["user"].get<std::string>() : std::string("(unknown user)");
  };
  for (const nlohmann::json& a : r["restored"])
    std::cout << fmt::format("restored  {} as {} (uid {}): {} files ({}){}\n", user(a), a.value("name", ""),
                             a.value("uid", 0), a.value("files", 0), bytes_text(a.value("bytes", uint64_t{0})),
                             a.value("resumed", false) ? ", an interrupted restore finished" : "");
  for (const nlohmann::json& a : r["skipped"])
    std::cout << fmt::format("skipped   {} ({}): {}\n", user(a), a.value("name", ""), a.value("reason", ""));
  for (const nlohmann::json& a : r["errors"])
    std::cout << fmt::format("failed    {} ({}): {}\n", user(a), a.value("name", ""), a.value("detail", ""));
  const nlohmann::json& t = r["total"];
  const size_t restored = t.value("restored", size_t{0}), errors = t.value("errors", size_t{0});
  std::cout << fmt::format("{}: {} restored, {} skipped, {} failed\n",
                           restored == 0 && errors == 0 ? "nothing to restore" : "total", restored,
                           t.value("skipped", size_t{0}), errors);
  return errors == 0 ? 0 : 1;
}

int restore(const BackupOptions& o) {
  if (o.all) {
    if (!o.user.empty() || !o.path.empty() || o.date)
      throw AdminError("--all restores whole accounts: give no USER, PATH or --date with it");
    return restore_all(o);
  }
  if (o.user.empty()) throw AdminError("restore needs USER (an account name or user id), or --all");
  AdminClient client(find_admin_target(o.target));
  nlohmann::json body = {{"user", o.user}};
  if (!o.path.empty()) body["path"] = o.path;
  if (o.date) body["date"] = *o.date;
  nlohmann::json r = client.post("/admin/backup/restore", body);
  std::cout << fmt::format("restored {} into {}: {} files ({}), {} directories\n",
                           o.date ? "what was deleted on " + *o.date : std::string("the mirror's copy"),
                           r.value("path", ""), r.value("files", 0), bytes_text(r.value("bytes", uint64_t{0})),
                           r.value("dirs", 0));
  const nlohmann::json& errors = r["errors"];
  for (const nlohmann::json& e : errors) std::cerr << "not restored: " << e.get<std::string>() << "\n";
  return errors.empty() ? 0 : 1;
}

// One pass of the mirror engine from SRC into DST/home (DST/.deleted for what it replaces).
int mirror_once(const BackupOptions& o) {
  UniqueFd src(::open(o.source.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!src) throw sys_error("open(" + o.source + ")");
  if (::mkdir(o.dest.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + o.dest + ")");
  UniqueFd dst(::open(o.dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dst) throw sys_error("open(" + o.dest + ")");
  backup::MirrorStats s = backup::mirror_tree(src.get(), dst.get(), backup::utc_date(std::chrono::system_clock::now()));
  std::cout << fmt::format("{} copied ({}), {} unchanged, {} kept, {} changing, {} errors\n", s.files_copied,
                           bytes_text(s.bytes_copied), s.unchanged, s.kept_deleted, s.changing, s.errors);
  for (const std::string& m : s.error_messages) std::cerr << m << "\n";
  return s.errors == 0 ? 0 : 1;
}

}  // namespace

void add_backup_options(CLI::App& backup, BackupOptions& o) {
  backup.require_subcommand(1);
  auto* status = backup.add_subcommand("status", "Show the mirror's last pass, per account");
  add_admin_target_options(*status, o.target);
  status->add_flag("--json", o.json, "Print the daemon's JSON answer");
  auto* run = backup.add_subcommand("run", "Start a pass now");
  add_admin_target_options(*run, o.target);
  auto* restore = backup.add_subcommand(
      "restore", "Put a home, or one path in it, back from the mirror; --all: every account this node does not hold");
  add_admin_target_options(*restore, o.target);
  restore->add_option("user", o.user, "Account name or user id");
  restore->add_flag("--all", o.all,
                    "Make every account of the mirror again that this node does not hold, with its home (a lost "
                    "disk: docs/SCALING.md)");
  restore->add_option("path", o.path, "Path in the home (relative, ~/..., or /home/NAME/...); default: all of it");
  restore->add_option("--date", o.date, "Restore what was deleted or overwritten that day (.deleted/DATE)")
      ->type_name("YYYY-MM-DD");
  auto* once = backup.add_subcommand("mirror-once", "One mirror pass of SRC into DST, without a daemon (bench)");
  once->group("");  // hidden
  once->add_option("src", o.source, "Source directory")->required();
  once->add_option("dst", o.dest, "Mirror directory (gets home/ and .deleted/)")->required();
}

int run_backup(CLI::App& backup, const BackupOptions& o) {
  if (backup.got_subcommand("mirror-once")) return mirror_once(o);
  try {
    if (backup.got_subcommand("status")) {
      nlohmann::json s = AdminClient(find_admin_target(o.target)).get("/admin/backup");
      if (o.json)
        std::cout << s.dump(2) << "\n";
      else
        print_status(s);
      return 0;
    }
    if (backup.got_subcommand("run")) {
      AdminClient(find_admin_target(o.target)).post("/admin/backup/run", nlohmann::json::object());
      std::cout << "a mirror pass is queued (see agentbox backup status)\n";
      return 0;
    }
    if (backup.got_subcommand("restore")) return restore(o);
  } catch (const AdminError& e) {
    std::cerr << "agentbox backup: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace agentbox::cli
