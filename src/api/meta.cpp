#include "api/meta.hpp"

#include <unistd.h>

#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "accounts/caller_routes.hpp"
#include "api/errors.hpp"
#include "api/openapi.hpp"
#include "api/services.hpp"
#include "config/units.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

// What a model most often reaches for; reported when present in the box's /usr tree.
constexpr const char* kTools[] = {"bash",    "python3", "pip3", "node",  "npm",   "gcc",  "g++",  "make",
                                  "cmake",   "git",     "go",   "rustc", "cargo", "java", "ruby", "perl",
                                  "sqlite3", "curl",    "jq",   "rg",    "tmux",  "vim"};

std::vector<std::string> tools_in_box_tree() {
  std::vector<std::string> found;
  for (const char* tool : kTools)
    for (const char* dir : {"/usr/local/bin/", "/usr/bin/"})
      if (::access((std::string(dir) + tool).c_str(), X_OK) == 0) {
        found.emplace_back(tool);
        break;
      }
  return found;
}

// PRETTY_NAME of /usr/lib/os-release: the box shares the host's /usr, so the same system.
std::string os_name() {
  std::ifstream in("/usr/lib/os-release");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  return "Linux";
}

}  // namespace

std::string system_prompt(const BoxSpec& spec, const std::string& cwd, const std::string& os_name,
                          const std::vector<std::string>& tools, const std::string& network) {
  const bool generic = spec.name.empty();
  // fmt, not string operator+: GCC 12 at -O3 reports a false -Wrestrict inside the latter.
  std::vector<std::string> limits;
  if (spec.limits.memory_bytes) limits.push_back(fmt::format("memory {}", format_size(spec.limits.memory_bytes)));
  if (spec.limits.cpu_millicores) limits.push_back(fmt::format("CPU {:g} cores", spec.limits.cpu_millicores / 1000.0));
  if (spec.limits.pids) limits.push_back(fmt::format("{} processes", spec.limits.pids));

  return fmt::format(
      "You have your own Linux environment ({}, x86_64), private to this user: nobody else can "
      "see its files or processes.\n"
      "- User: {} (not root; no sudo). Home: {} (persistent). Current directory: {}.\n"
      "- Shell: {}. Writable: the home, /tmp (private, cleared when the environment stops). The "
      "system (/usr, /etc) is read-only: install packages into the home (pip install --user, npm "
      "install in a project).\n"
      "- Available: {}.\n"
      "- Network: {}\n"
      "- Limits: {}.\n"
      "Run commands with run_command (wait for short ones; poll long ones with "
      "get_process_status), read and edit files with read_file, write_file and "
      "replace_file_content, and show files to the user with display_file.",
      os_name, generic ? std::string("an account of your own") : spec.name,
      generic ? std::string("your directory under /home") : spec.home_target,
      generic ? std::string("your home, unless you change it") : cwd, spec.shell,
      tools.empty() ? std::string("standard Unix tools") : fmt::format("{}", fmt::join(tools, ", ")), network,
      limits.empty() ? std::string("none") : fmt::format("{}", fmt::join(limits, ", ")));
}

void add_meta_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  exec::AccountBoxes& boxes = *s.boxes;
  const std::string& version = s.version;
  const auto network_of = s.network_of;
  RouteOptions open;
  open.is_public = true;
  router.add(
      http::verb::get, "/health",
      [](const Request&) {
        return Response::json({{"status", "ok"}});
      },
      open);
  router.add(
      http::verb::get, "/api/config",
      [notebooks = s.notebooks != nullptr](const Request&) {
        return Response::json({{"features", {{"terminal", true}, {"notebooks", notebooks}, {"system", true}}}});
      },
      open);
  auto doc = std::make_shared<const std::string>(dump_json(openapi_document(version)));
  router.add(
      http::verb::get, "/openapi.json",
      [doc](const Request&) { return Response::text(*doc, http::status::ok, "application/json"); }, open);

  auto tools = std::make_shared<const std::vector<std::string>>(tools_in_box_tree());
  auto os = std::make_shared<const std::string>(os_name());
  // The caller's prompt: the caller resolved off the io thread when that is slow
  // (accounts/caller_routes.hpp).
  AsyncHandler callers_prompt = accounts::with_caller(callers, [&boxes, tools, os, network_of](
                                                                   const Request&, const accounts::Caller& caller) {
    return Response::json({{"prompt", system_prompt(boxes.spec_for(caller.account, caller.place()), caller.cwd, *os,
                                                    *tools, network_of(caller.account.external_id, caller.profile))}});
  });
  router.add_async(
      http::verb::get, "/system",
      [&boxes, tools, os, network_of, callers_prompt](const Request& req, std::shared_ptr<ResponseWriter> writer) {
        // Open WebUI asks once, with the key only, to build the model's system prompt: a request
        // that names no user gets the prompt of a generic box (what every user's box is like).
        if (!req.header("X-User-Id") && !req.header("X-OpenWebUI-User-Id")) {
          Account generic;
          generic.uid = generic.gid = 1;  // never shown: the generic prompt names no account
          BoxPlace place;
          place.profile = req.scope;  // under /p/{profile}: a generic box of that profile
          writer->send(Response::json(
              {{"prompt", system_prompt(boxes.spec_for(generic, place), {}, *os, *tools, network_of("", req.scope))}}));
          return;
        }
        callers_prompt(req, std::move(writer));
      });
}

}  // namespace agentbox::api
