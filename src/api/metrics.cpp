#include "api/metrics.hpp"

#include "api/services.hpp"
#include "metrics/exposition.hpp"

namespace agentbox::api {

Response metrics_response(const std::string& page) {
  return Response::text(page, http::status::ok, std::string(metrics::kExpositionContentType));
}

void add_metrics_routes(Router& router, const Services& s) {
  if (!s.metrics_page) return;
  RouteOptions admin;
  admin.admin = true;
  router.add(
      http::verb::get, "/metrics", [page = s.metrics_page](const Request&) { return metrics_response(page()); }, admin);
}

}  // namespace agentbox::api
