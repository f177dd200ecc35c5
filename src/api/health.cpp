#include "api/health.hpp"

#include "api/services.hpp"

namespace agentbox::api {

void add_health_routes(Router& router, const Services& s) {
  RouteOptions open;
  open.is_public = true;  // a kubelet or systemd probes without the key; nothing private is said
  router.add(
      http::verb::get, "/health/live",
      [](const Request&) {
        return Response::json({{"status", "ok"}});
      },
      open);
  router.add(
      http::verb::get, "/health/ready",
      [readiness = s.readiness](const Request&) {
        const std::string failing = readiness ? readiness() : std::string();
        if (failing.empty()) return Response::json({{"status", "ready"}});
        return Response::json({{"status", "not ready"}, {"detail", failing}}, http::status::service_unavailable);
      },
      open);
}

}  // namespace agentbox::api
