#include "api/cluster.hpp"

#include "api/errors.hpp"
#include "api/services.hpp"
#include "http/error.hpp"
#include "util/error.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

Response describe(const accounts::PlacementGuard& guard) {
  auto placement = guard.placement();
  nlohmann::json nodes = nlohmann::json::array();
  for (const ClusterNode& n : placement->config().nodes)
    nodes.push_back({{"name", n.name}, {"server", n.server}, {"drain", n.drain}});
  return Response::json(
      {{"node", guard.node()}, {"nodes", std::move(nodes)}, {"pins", placement->config().pins.size()}});
}

}  // namespace

void add_cluster_routes(Router& router, const Services& s) {
  accounts::PlacementGuard& guard = *s.placement;
  const RouteOptions admin{.admin = true};
  router.add(
      http::verb::get, "/admin/cluster", [&guard](const Request&) { return describe(guard); }, admin);
  router.add(
      http::verb::post, "/admin/cluster/reload",
      [&guard](const Request&) {
        try {
          guard.reload();
        } catch (const Error& e) {  // a bad cluster file, or one without this node (a UsageError)
          throw HttpError(http::status::unprocessable_entity, e.what());
        }
        return describe(guard);
      },
      admin);
}

}  // namespace agentbox::api
