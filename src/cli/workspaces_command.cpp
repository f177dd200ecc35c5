#include "cli/workspaces_command.hpp"

#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "config/units.hpp"

namespace agentbox::cli {
namespace {

// Workspaces made before their records were kept are known by their hash only.
std::string context_text(const nlohmann::json& w) {
  auto c = w.find("context");
  return c != w.end() && c->is_string() ? c->get<std::string>() : "(unknown)";
}

void print_list(const nlohmann::json& answer) {
  const nlohmann::json& all = answer["workspaces"];
  if (all.empty()) {
    std::cout << "no workspaces for " << answer.value("name", "") << "\n";
    return;
  }
  // The context id goes last: Open WebUI's, of any length.
  const std::string row = "{:<16} {:<16} {:>10} {:<20} {:<20} {:<8} {}\n";
  std::cout << fmt::format(fmt::runtime(row), "PROFILE", "HASH", "SIZE", "CREATED", "LAST USED", "BOX", "CONTEXT");
  for (const nlohmann::json& w : all)
    std::cout << fmt::format(fmt::runtime(row), w.value("profile", ""), w.value("hash", ""),
                             format_size(w.value("size", uint64_t{0})), utc_time(w.value("created", 0.0)),
                             utc_time(w.value("last_used", 0.0)), w.value("box", ""), context_text(w));
}

int remove(const WorkspacesOptions& o) {
  AdminClient client(find_admin_target(o.target));
  std::string path = "/admin/accounts/" + url_segment(o.user) + "/workspaces/" + url_segment(o.context);
  if (!o.profile.empty()) path += "?profile=" + url_segment(o.profile);
  nlohmann::json r = client.del(path);
  std::cout << fmt::format("workspace of {} ({}) moved to the trash as {}; POST /files/trash/restore puts it back\n",
                           r.value("context", ""), r.value("profile", ""), r.value("trash_id", ""));
  return 0;
}

}  // namespace

void add_workspaces_options(CLI::App& workspaces, WorkspacesOptions& o) {
  workspaces.require_subcommand(1);
  auto* list = workspaces.add_subcommand("list", "An account's workspaces: profile, context, size, last use");
  add_admin_target_options(*list, o.target);
  list->add_option("user", o.user, "Account name or user id")->required();
  list->add_flag("--json", o.json, "Print the daemon's JSON answer");
  auto* del = workspaces.add_subcommand("delete", "Stop a context's box and move its workspace to the trash");
  add_admin_target_options(*del, o.target);
  del->add_option("user", o.user, "Account name or user id")->required();
  del->add_option("context", o.context, "The context id (chat:ID, automation:ID) or its hash")->required();
  del->add_option("--profile", o.profile, "The profile, when the context has workspaces in several")
      ->type_name("PROFILE");
}

int run_workspaces(CLI::App& workspaces, const WorkspacesOptions& o) {
  try {
    if (workspaces.got_subcommand("list")) {
      nlohmann::json r =
          AdminClient(find_admin_target(o.target)).get("/admin/accounts/" + url_segment(o.user) + "/workspaces");
      if (o.json)
        std::cout << r.dump(2) << "\n";
      else
        print_list(r);
      return 0;
    }
    if (workspaces.got_subcommand("delete")) return remove(o);
  } catch (const AdminError& e) {
    std::cerr << "agentbox workspaces: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace agentbox::cli
