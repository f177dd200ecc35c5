#pragma once
// A cluster node's view of its cluster (admin key only, RouteOptions::admin):
//   GET  /admin/cluster          {node, nodes: [{name, server, drain}], pins}: the file as read
//   POST /admin/cluster/reload   reads the cluster file again (what SIGHUP does), answers the same;
//                                a file with an error changes nothing: 422 with the error
// `agentbox cluster drain` calls reload on every node after it marks one draining, so no node
// makes an account the new ring gives another before the router is told.
#include "accounts/placement_guard.hpp"
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
// A cluster node's only (services.placement set).
void add_cluster_routes(Router& router, const Services& services);

}  // namespace agentbox::api
