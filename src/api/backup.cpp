#include "api/backup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "accounts/move_gate.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "audit/trail.hpp"
#include "backup/mirror_layout.hpp"
#include "fs/confined_dir.hpp"
#include "fs/home_path.hpp"
#include "fs/home_restore.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "metrics/events.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

backup::MirrorService& require_mirror(backup::MirrorService* mirror) {
  if (!mirror)
    throw HttpError(http::status::conflict, "The mirror of homes is off: no [backup] dir in the configuration");
  return *mirror;
}

// The directory `name` in dirfd, not followed if a symlink; nullopt when it is not there.
UniqueFd open_saved_dir(int dirfd, const std::string& name) {
  return UniqueFd(::openat(dirfd, name.c_str(), kDirFlags));
}

// {"all": true}: every account of the mirror this node does not hold (moves/restore_all.hpp).
Response restore_every_account(moves::RestoreAllContext& context, const nlohmann::json& body) {
  if (!body["all"].is_boolean() || !body["all"].get<bool>())
    unprocessable("Field 'all' must be true (or left out, with 'user')");
  for (const char* field : {"user", "path", "date"})
    if (body.contains(field))
      unprocessable(std::string("Field 'all' restores whole accounts: it takes no '") + field + "'");
  nlohmann::json answer = moves::restore_all(context);
  if (answer.contains("restored") && answer["restored"].is_array()) {
    metrics::add(metrics::events().restores, answer["restored"].size());
    for (const nlohmann::json& r : answer["restored"])
      audit::account(audit::AccountActivity::restore, r.value("name", ""), r.value("user", ""));
  }
  return Response::json(std::move(answer));
}

Response restore(AccountStore& accounts, accounts::AccountDirectory& callers, backup::MirrorService& mirror,
                 moves::RestoreAllContext* every, const Request& req) {
  nlohmann::json body = parse_json_object(req);
  if (body.contains("all") && every) return restore_every_account(*every, body);
  const std::string user = required_string(body, "user");
  const std::string path = optional_string(body, "path").value_or("");
  const std::optional<std::string> date = optional_string(body, "date");
  if (date && !backup::is_date_name(*date)) unprocessable("Field 'date' must be a day of .deleted, YYYY-MM-DD");
  std::optional<Account> found = accounts.find_by_name_or_id(user);
  if (!found) throw HttpError(http::status::not_found, "Unknown user: " + user);
  const Account account = *found;
  const std::string box_home = "/home/" + account.name;
  const HomePath target = parse_home_path(path, box_home);

  // The saved tree: MIRROR/NAME/home or MIRROR/NAME/.deleted/DATE, as (parent fd, name).
  const std::string what = date ? "deleted on " + *date : "in the mirror";
  auto not_saved = [&] { return HttpError(http::status::not_found, "Not " + what + ": " + target.shown); };
  UniqueFd parent(::open(mirror.options().dir.c_str(), kDirFlags));
  if (!parent) throw sys_error("open(" + mirror.options().dir + ")");
  std::vector<std::string> steps = {account.name};
  if (date) {
    steps.push_back(std::string(backup::kDeletedDir));
    steps.push_back(*date);
  } else {
    steps.push_back(std::string(backup::kHomeDir));
  }
  for (std::string_view c : split_path(target.rel)) steps.emplace_back(c);
  // Every step but the last is a directory of the saved tree, walked without following links.
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    UniqueFd next = open_saved_dir(parent.get(), steps[i]);
    if (!next) throw not_saved();
    parent = std::move(next);
  }
  struct stat st;
  if (::fstatat(parent.get(), steps.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw not_saved();

  // Through the account's volume (mounted if it was not): what is restored counts to its quota.
  const VolumeLease volume = callers.lease_volume(account);
  std::shared_ptr<const ConfinedDir> home = callers.home(account);
  RestoreResult r = restore_into_home(*home, parent.get(), steps.back(), target);
  metrics::add(metrics::events().restores);
  audit::account(audit::AccountActivity::restore, account.name, account.external_id);
  return Response::json({{"user", account.name},
                         {"path", target.shown},
                         {"date", date ? nlohmann::json(*date) : nlohmann::json(nullptr)},
                         {"files", r.files},
                         {"bytes", r.bytes},
                         {"dirs", r.dirs},
                         {"errors", r.errors}});
}

}  // namespace

void add_backup_routes(Router& router, const Services& s) {
  AccountStore& accounts = *s.accounts;
  accounts::AccountDirectory& callers = *s.callers;
  backup::MirrorService* mirror = s.mirror;
  std::shared_ptr<FairPool> pool = s.file_pool;
  // restore --all's view of this node: the mirror, who is held, refused or moved here.
  std::shared_ptr<moves::RestoreAllContext> restore_all;
  if (mirror) {
    restore_all = std::make_shared<moves::RestoreAllContext>(
        moves::RestoreAllContext{accounts, callers, *mirror, *s.restore_gate, s.placement, nullptr});
    if (s.move_gate) restore_all->moves = [&callers](std::string_view user) { callers.admission().check_move(user); };
  }
  const RouteOptions admin{.admin = true};
  router.add(
      http::verb::get, "/admin/backup",
      [mirror](const Request&) {
        return Response::json(mirror ? mirror->status() : nlohmann::json{{"enabled", false}});
      },
      admin);
  router.add(
      http::verb::post, "/admin/backup/run",
      [mirror](const Request&) {
        backup::MirrorService& m = require_mirror(mirror);
        m.run_now();
        return Response::json({{"queued", true}, {"status", m.status()}}, http::status::accepted);
      },
      admin);
  router.add_async(http::verb::post, "/admin/backup/restore",
                   offload(std::move(pool), Handler([&accounts, &callers, mirror, restore_all](const Request& req) {
                             return restore(accounts, callers, require_mirror(mirror), restore_all.get(), req);
                           })),
                   admin);
}

}  // namespace agentbox::api
