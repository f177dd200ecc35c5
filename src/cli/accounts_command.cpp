#include "cli/accounts_command.hpp"

#include <unistd.h>

#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "config/units.hpp"

namespace agentbox::cli {
namespace {

std::string disk_text(const nlohmann::json& disk) {
  if (!disk.is_object()) return "no quota";
  const uint64_t used = disk.value("used", uint64_t{0}), limit = disk.value("limit", uint64_t{0});
  return fmt::format("{} of {} ({}%)", format_size(used), format_size(limit), limit ? used * 100 / limit : 0);
}

std::string inodes_text(const nlohmann::json& disk) {
  if (!disk.is_object()) return "-";
  return fmt::format("{} of {}", disk.value("inodes_used", uint64_t{0}), disk.value("inodes_limit", uint64_t{0}));
}

// Its contexts' workspaces (agentbox workspaces list USER names them); "-" when its volume is
// not in use, so the daemon did not look.
std::string contexts_text(const nlohmann::json& account) {
  auto n = account.find("workspaces");
  return n != account.end() && n->is_number() ? std::to_string(n->get<uint64_t>()) : "-";
}

void print_list(const nlohmann::json& answer) {
  const nlohmann::json& accounts = answer["accounts"];
  if (accounts.empty()) {
    std::cout << "no accounts yet\n";
    return;
  }
  // The user id goes last: it is the front end's, of any length.
  const std::string row = "{:<24} {:>8} {:<8} {:<22} {:<16} {:<20} {:>8} {}\n";
  std::cout << fmt::format(fmt::runtime(row), "NAME", "UID", "BOX", "DISK", "FILES", "LAST ACTIVE", "CONTEXTS", "USER");
  for (const nlohmann::json& a : accounts)
    std::cout << fmt::format(fmt::runtime(row), a.value("name", ""), a.value("uid", 0), a.value("box", ""),
                             disk_text(a["disk"]), inodes_text(a["disk"]), utc_time(a.value("last_active", 0.0)),
                             contexts_text(a), a.value("user", ""));
}

// --stale: what [accounts] forget_after_days would take. EMPTY says whether the volume holds
// nothing but a new account's: only those are forgotten, the rest stay whatever their age.
void print_stale(const nlohmann::json& answer) {
  const nlohmann::json& accounts = answer["accounts"];
  const uint64_t days = answer.value("stale_days", uint64_t{0});
  if (accounts.empty()) {
    std::cout << "no account idle for " << days << " days or more\n";
    return;
  }
  std::cout << accounts.size() << " account(s) idle for " << days << " days or more\n";
  const std::string row = "{:<24} {:>8} {:<20} {:<22} {:<6} {}\n";
  std::cout << fmt::format(fmt::runtime(row), "NAME", "UID", "LAST ACTIVE", "DISK", "EMPTY", "USER");
  for (const nlohmann::json& a : accounts) {
    const nlohmann::json empty = a.contains("empty") ? a["empty"] : nlohmann::json();
    std::cout << fmt::format(fmt::runtime(row), a.value("name", ""), a.value("uid", 0),
                             utc_time(a.value("last_active", 0.0)), disk_text(a["disk"]),
                             empty.is_boolean() ? (empty.get<bool>() ? "yes" : "no") : "-", a.value("user", ""));
  }
}

// --days as typed: a whole number of days, 1 to 36500; "" leaves the daemon's default.
std::string stale_query(const AccountsOptions& o) {
  if (!o.stale) {
    if (!o.days.empty()) throw AdminError("--days goes with --stale");
    return "";
  }
  if (o.days.empty()) return "?stale=true";
  const bool digits = o.days.size() <= 5 && o.days.find_first_not_of("0123456789") == std::string::npos;
  const long days = digits ? std::stol(o.days) : 0;
  if (days < 1 || days > 36500)
    throw AdminError("--days must be a whole number of days from 1 to 36500, not " + o.days);
  return "?stale_days=" + std::to_string(days);
}

// Asked on a terminal; elsewhere --yes is required, so a script never deletes by accident.
bool confirmed(const AccountsOptions& o) {
  if (o.yes) return true;
  if (!::isatty(STDIN_FILENO))
    throw AdminError("deleting " + o.user + " needs --yes when no terminal can ask (its files go to the trash)");
  std::cout << "Delete the account " << o.user << "? Its box stops and its files go to the trash. [y/N] " << std::flush;
  std::string reply;
  std::getline(std::cin, reply);
  return reply == "y" || reply == "Y" || reply == "yes";
}

int remove(const AccountsOptions& o) {
  AdminClient client(find_admin_target(o.target));
  if (!confirmed(o)) {
    std::cout << "nothing deleted\n";
    return 1;
  }
  nlohmann::json r = client.del("/admin/accounts/" + url_segment(o.user));
  std::cout << fmt::format("deleted {} (uid {}, user {}); its files are kept until {}\n", r.value("name", ""),
                           r.value("uid", 0), r.value("user", ""), utc_time(r.value("purge_after", 0.0)));
  return 0;
}

}  // namespace

void add_accounts_options(CLI::App& accounts, AccountsOptions& o) {
  accounts.require_subcommand(1);
  auto* list = accounts.add_subcommand("list", "Every account: uid, box, disk and file usage, last activity");
  add_admin_target_options(*list, o.target);
  list->add_flag("--json", o.json, "Print the daemon's JSON answer");
  list->add_flag("--stale", o.stale,
                 "Only accounts not seen for --days days: what [accounts] forget_after_days would forget (EMPTY)");
  list->add_option("--days", o.days, "With --stale: days (default forget_after_days, else 30)")->type_name("N");
  auto* del = accounts.add_subcommand("delete", "Stop an account's box and move its files to the trash");
  add_admin_target_options(*del, o.target);
  del->add_option("user", o.user, "Account name or user id")->required();
  del->add_flag("--yes,-y", o.yes, "Do not ask");
  auto* move = accounts.add_subcommand("move", "Move an account to another node of the cluster (docs/SCALING.md)");
  add_admin_target_options(*move, o.move.target);
  move->add_option("user", o.move.user, "The user id (as the front end sends it)")->required();
  move->add_option("--to", o.move.to, "The node to move it to")->required()->type_name("NODE");
  move->add_option("--cluster", o.move.cluster, "The cluster file")->required()->type_name("FILE");
  move->add_option("--from", o.move.from, "The node that holds it, when not its owner (pin, else ring)")
      ->type_name("NODE");
  move->add_option("--router-dir", o.move.router_dir,
                   "The router's directory (cluster nginx-conf --out): pins.map rewritten, nginx reloaded")
      ->type_name("DIR");
}

int run_accounts(CLI::App& accounts, const AccountsOptions& o) {
  try {
    if (accounts.got_subcommand("list")) {
      const std::string query = stale_query(o);
      nlohmann::json r = AdminClient(find_admin_target(o.target)).get("/admin/accounts" + query);
      if (o.json)
        std::cout << r.dump(2) << "\n";
      else if (o.stale)
        print_stale(r);
      else
        print_list(r);
      return 0;
    }
    if (accounts.got_subcommand("delete")) return remove(o);
    if (accounts.got_subcommand("move")) return move_account(o.move);
  } catch (const AdminError& e) {
    std::cerr << "agentbox accounts: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace agentbox::cli
