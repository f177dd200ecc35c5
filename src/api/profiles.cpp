#include "api/profiles.hpp"

#include <fmt/format.h>

#include "accounts/user_id.hpp"
#include "api/services.hpp"
#include "http/error.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

constexpr std::string_view kPrefixSegment = "p";

// The user the request names, "" when none (or names one badly: the route says so itself).
std::string named_user(const Request& req) {
  try {
    return accounts::user_id_of(req, /*query_allowed=*/true);
  } catch (...) {
    return {};
  }
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

}  // namespace

std::optional<Response> refuse_profile(const ProfileConfig& profiles, const Request& req, const RouteOptions& options,
                                       bool authenticated) {
  const std::string user = named_user(req);
  const Profile* profile = profiles.find(req.scope);
  if (!profile) {
    // Who has not authenticated learns only the profiles open to everyone.
    const std::vector<std::string> names = profiles.names_for(authenticated ? user : std::string());
    return error_response(http::status::not_found,
                          fmt::format("Unknown profile '{}': {}", req.scope,
                                      names.empty() ? std::string("no profile is open to you")
                                                    : "the profiles you may use are " + quoted_list(names)));
  }
  if (options.is_public || profile->admits(user)) return std::nullopt;
  if (!user.empty()) return error_response(http::status::forbidden, *profile_closed_to(profiles, req));
  // A takeover that authenticates later (the terminal's WebSocket) may name its user then;
  // anyone else must name one here.
  if (!authenticated && options.auth_in_handler) return std::nullopt;
  return error_response(http::status::forbidden,
                        fmt::format("Profile '{}' is open to some users only: name yours (X-User-Id)", req.scope));
}

std::optional<std::string> profile_closed_to(const ProfileConfig& profiles, const Request& req) {
  if (req.scope.empty()) return std::nullopt;
  const std::string user = named_user(req);
  const Profile* profile = profiles.find(req.scope);
  if (profile && profile->admits(user)) return std::nullopt;
  return fmt::format("Profile '{}' is not open to user '{}'", req.scope, user);
}

void add_profile_scope(Router& router, const Services& s) {
  if (!s.profiles) return;
  router.scope_prefix(std::string(kPrefixSegment),
                      [table = s.profiles](const Request& req, const RouteOptions& options, bool authenticated) {
                        return refuse_profile(*table->get(), req, options, authenticated);
                      });
}

nlohmann::json profile_box_json(const ProfileTable* table, const Limits& base, std::chrono::seconds idle_timeout,
                                const Request& req) {
  Limits limits = base;
  std::chrono::seconds idle = idle_timeout;
  Profile::Isolation isolation = Profile::Isolation::user;
  std::shared_ptr<const ProfileConfig> profiles = table ? table->get() : nullptr;
  const Profile* profile = profiles && !req.scope.empty() ? profiles->find(req.scope) : nullptr;
  if (profile) {
    limits = profile->limits(limits);
    idle = profile->idle_timeout_or(idle);
    isolation = profile->isolation;
  }
  auto limit = [](uint64_t v) { return v ? nlohmann::json(v) : nlohmann::json(nullptr); };  // 0: none
  return {{"profile", profile ? nlohmann::json(req.scope) : nlohmann::json(nullptr)},
          {"isolation", isolation == Profile::Isolation::context ? "context" : "user"},
          {"memory", limit(limits.memory_bytes)},
          {"cpu", limit(limits.cpu_millicores)},
          {"pids", limit(limits.pids)},
          {"tmp", limit(limits.tmp_bytes)},
          {"idle_timeout", idle.count()}};
}

}  // namespace agentbox::api
