#pragma once
// The daemon's side of the audit trail (audit/trail.hpp): the HTTP observer's hook, which turns
// an answered request into an API Activity (authenticated) or an Authentication (its credential
// refused) event, and the trail's options from [audit].
//
// Runs on: audit_request on the API's io thread (copies what the event needs and queues it; the
// event is built and redacted on the trail's writer thread); trail_options on the main thread.
#include <functional>
#include <string>
#include <string_view>

#include "audit/trail.hpp"
#include "config/server_config.hpp"
#include "http/options.hpp"

namespace agentbox::daemon {

// route: the router's pattern of the request's route ("unmatched" when none).
void audit_request(const http::CompletedRequest& r, std::string_view route);

audit::TrailOptions trail_options(const ServerConfig& config, std::string_view version, std::vector<std::string> scrub,
                                  std::function<std::string(const std::string&)> account_of);

}  // namespace agentbox::daemon
