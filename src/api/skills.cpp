#include "api/skills.hpp"

#include <memory>
#include <optional>

#include "accounts/directory.hpp"
#include "api/services.hpp"
#include "box/agent_paths.hpp"
#include "fs/skills.hpp"
#include "http/error.hpp"
#include "http/offload.hpp"
#include "http/query_params.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

using nlohmann::json;

// The user's folders, in the order Open Terminal reads them; the operator's come last.
constexpr const char* kUserSkillFolders[] = {"~/.agents/skills", "~/.claude/skills", "~/.codex/skills",
                                             "~/.cptr/skills"};

struct SkillContext {
  accounts::AccountDirectory& callers;
  std::string operator_dir;  // host path, "" for none
};

// The caller's roots. `operator_home` holds the operator's folder when there is one (opened per
// request with the account's identity: it is read as the box would read it).
std::vector<SkillRoot> roots_of(const SkillContext& ctx, const accounts::Caller& caller,
                                std::optional<ConfinedDir>& operator_home) {
  std::vector<SkillRoot> roots;
  for (const char* folder : kUserSkillFolders) roots.push_back({caller.home.get(), caller.home->path(folder)});
  if (!ctx.operator_dir.empty()) {
    try {
      operator_home.emplace(
          ConfinedDir::open_home(ctx.operator_dir, kManagedSkillsInBox, caller.account.uid, caller.account.gid));
      roots.push_back({&*operator_home, operator_home->path("")});
    } catch (const Error&) {
      // Gone since the start: the user's own skills still answer.
    }
  }
  return roots;
}

[[noreturn]] void skill_not_found(std::string_view name) {
  throw HttpError(http::status::not_found, "Skill not found: " + std::string(name));
}

Response list(const SkillContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.callers.resolve(req, false, accounts::HomeUse::read);  // only reads
  std::optional<ConfinedDir> operator_home;
  json out = json::array();  // a bare array, as Open WebUI reads it
  for (const SkillSummary& s : list_skills(roots_of(ctx, caller, operator_home)))
    out.push_back({{"id", s.id}, {"name", s.name}, {"description", s.description}, {"location", s.location}});
  return Response::json(out);
}

Response read(const SkillContext& ctx, const Request& req, const std::string& name) {
  accounts::Caller caller = ctx.callers.resolve(req, false, accounts::HomeUse::read);  // only reads
  if (!is_skill_name(name)) skill_not_found(name);                                     // a path is no skill
  std::optional<ConfinedDir> operator_home;
  std::optional<Skill> s = read_skill(roots_of(ctx, caller, operator_home), name);
  if (!s) skill_not_found(name);
  return Response::json({{"id", s->id},
                         {"name", s->name},
                         {"description", s->description},
                         {"content", s->content},
                         {"location", s->location},
                         {"resources", s->resources},
                         {"resources_truncated", s->resources_truncated}});
}

}  // namespace

void add_skill_routes(Router& router, const Services& s) {
  auto ctx = std::make_shared<const SkillContext>(SkillContext{*s.callers, s.skills_dir});
  router.add_async(http::verb::get, "/skills",
                   offload(s.file_pool, Handler([ctx](const Request& req) { return list(*ctx, req); })));
  router.add_async(http::verb::get, "/skills/read", offload(s.file_pool, Handler([ctx](const Request& req) {
                                                              return read(*ctx, req, required_query(req, "name"));
                                                            })));
  router.add_async(
      http::verb::get, "/skills/{name}",
      offload(s.file_pool, Handler([ctx](const Request& req) { return read(*ctx, req, req.param("name")); })));
}

}  // namespace agentbox::api
