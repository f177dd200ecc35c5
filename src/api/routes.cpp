// The API on one screen: each feature's table, with the routes it holds. A new route goes in
// its feature's file (api/<feature>.cpp) and in the list here.
#include "api/routes.hpp"

#include "api/accounts.hpp"
#include "api/agent.hpp"
#include "api/agent_sessions.hpp"
#include "api/backup.hpp"
#include "api/cluster.hpp"
#include "api/errors.hpp"
#include "api/execute.hpp"
#include "api/files.hpp"
#include "api/health.hpp"
#include "api/keys.hpp"
#include "api/meta.hpp"
#include "api/metrics.hpp"
#include "api/moves.hpp"
#include "api/network.hpp"
#include "api/notebooks.hpp"
#include "api/openai_errors.hpp"
#include "api/profiles.hpp"
#include "api/proxy.hpp"
#include "api/skills.hpp"
#include "api/terminals.hpp"
#include "api/trash.hpp"
#include "api/usage.hpp"
#include "api/user_terminal.hpp"
#include "api/workspaces.hpp"

namespace agentbox::api {

void register_routes(http::Router& router, const Services& s) {
  router.map_errors(error_map);  // the domain's exceptions as statuses, for every route (api/errors.hpp)
  // OpenAI's clients read {"error": {...}}: every error under /v1, 401 and 404 included.
  router.shape_errors("/v1", shape_openai_error);
  // GET /health, /api/config, /openapi.json (public); GET /system
  add_meta_routes(router, s);
  // GET, POST /execute; GET /execute/{id}/status, /execute/{id}/stream;
  // POST /execute/{id}/input; DELETE /execute/{id}
  add_execute_routes(router, s);
  // GET, POST /files/cwd; GET /files/list, /files/read, /files/display, /files/grep,
  // /files/glob, /files/view, /files/serve/{path}; POST /files/write, /files/replace,
  // /files/mkdir, /files/move, /files/upload, /files/archive; DELETE /files/delete
  add_file_routes(router, s);
  // GET, DELETE /files/trash; POST /files/trash/restore
  add_trash_routes(router, s);
  // GET, POST /api/terminals; GET (REST or WebSocket), DELETE /api/terminals/{id}
  add_terminal_routes(router, s);
  // GET /ports; every method but CONNECT on /proxy/{port}[/{path}]
  add_proxy_routes(router, s);
  // GET /network/log
  add_network_routes(router, s);
  // GET /usage
  add_usage_routes(router, s);
  // GET /v1/models; POST /v1/chat/completions, /agent/runs
  add_agent_routes(router, s);
  // GET /agent/sessions, /agent/sessions/{id}
  add_agent_session_routes(router, s);
  // GET /admin/backup; POST /admin/backup/run, /admin/backup/restore
  add_backup_routes(router, s);
  // GET /admin/accounts; DELETE /admin/accounts/{user}
  add_account_routes(router, s);
  // POST, GET /admin/keys; DELETE /admin/keys/{id}
  add_key_routes(router, s);
  // DELETE /workspaces/{context} (under /p/{profile}); GET /admin/accounts/{user}/workspaces;
  // DELETE /admin/accounts/{user}/workspaces/{context}
  add_workspace_routes(router, s);
  if (s.placement) {
    // GET /admin/cluster; POST /admin/cluster/reload
    add_cluster_routes(router, s);
    // POST /admin/moves; PUT /admin/moves/{id}; POST /admin/moves/{id}/activate
    add_move_routes(router, s);
  }
  // GET /skills, /skills/read, /skills/{name}
  add_skill_routes(router, s);
  // GET /user-terminal/read; POST /user-terminal/input (the assistant in the user's terminal)
  add_user_terminal_routes(router, s);
  // POST /notebooks, /notebooks/{id}/execute; GET, DELETE /notebooks/{id}
  add_notebook_routes(router, s);
  // GET /health/live, /health/ready (public)
  add_health_routes(router, s);
  // GET /metrics
  add_metrics_routes(router, s);
  // /p/{profile}/... for every route above: the prefix taken off, the profile checked
  add_profile_scope(router, s);
}

}  // namespace agentbox::api
