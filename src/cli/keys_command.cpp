#include "cli/keys_command.hpp"

#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace agentbox::cli {
namespace {

void print_list(const nlohmann::json& answer) {
  const nlohmann::json& keys = answer["keys"];
  if (keys.empty()) {
    std::cout << "no keys\n";
    return;
  }
  const std::string row = "{:<16} {:<24} {:<24} {}\n";
  std::cout << fmt::format(fmt::runtime(row), "ID", "CREATED", "NAME", "USER");
  for (const nlohmann::json& k : keys)
    std::cout << fmt::format(fmt::runtime(row), k.value("id", ""), utc_time(k.value("created", 0.0)),
                             k.value("name", ""), k.value("user", ""));
}

int create(const KeysOptions& o) {
  nlohmann::json body = {{"user", o.user}};
  if (o.name) body["name"] = *o.name;
  nlohmann::json r = AdminClient(find_admin_target(o.target)).post("/admin/keys", body);
  if (o.json) {
    std::cout << r.dump(2) << "\n";
    return 0;
  }
  // The key alone on stdout, so `KEY=$(agentbox keys create alice)` works; the rest on stderr.
  std::cerr << fmt::format("key {} for user {} (shown once: the daemon keeps only its hash)\n", r.value("id", ""),
                           r.value("user", ""));
  std::cout << r.value("key", "") << "\n";
  return 0;
}

}  // namespace

void add_keys_options(CLI::App& keys, KeysOptions& o) {
  keys.require_subcommand(1);
  auto* create = keys.add_subcommand("create", "A new API key that acts as USER (printed once)");
  add_admin_target_options(*create, o.target);
  create->add_option("user", o.user, "The user id (as the front end sends it)")->required();
  create->add_option("--name", o.name, "A label for the key")->type_name("NAME");
  create->add_flag("--json", o.json, "Print the daemon's JSON answer");
  auto* list = keys.add_subcommand("list", "Every key: id, user, name, when made (never the key)");
  add_admin_target_options(*list, o.target);
  list->add_flag("--json", o.json, "Print the daemon's JSON answer");
  auto* revoke = keys.add_subcommand("revoke", "Revoke a key: refused from this moment");
  add_admin_target_options(*revoke, o.target);
  revoke->add_option("id", o.id, "The key's id (keys list)")->required();
}

int run_keys(CLI::App& keys, const KeysOptions& o) {
  try {
    if (keys.got_subcommand("create")) return create(o);
    if (keys.got_subcommand("list")) {
      nlohmann::json r = AdminClient(find_admin_target(o.target)).get("/admin/keys");
      if (o.json)
        std::cout << r.dump(2) << "\n";
      else
        print_list(r);
      return 0;
    }
    if (keys.got_subcommand("revoke")) {
      nlohmann::json r = AdminClient(find_admin_target(o.target)).del("/admin/keys/" + url_segment(o.id));
      std::cout << fmt::format("revoked {} (user {})\n", r.value("id", ""), r.value("user", ""));
      return 0;
    }
  } catch (const AdminError& e) {
    std::cerr << "agentbox keys: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace agentbox::cli
