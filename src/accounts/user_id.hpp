#pragma once
// The external user id a request names: X-User-Id or X-OpenWebUI-User-Id (Open WebUI's generic
// tool servers send the latter), the same account for the same value; with query_allowed also
// the `user_id` query parameter (how Open WebUI's proxy names the user of a WebSocket). A header
// repeated, or two sources that disagree, is HttpError 400: a proxy that appends a header
// instead of replacing it must not let the client pick the account. None, empty, or over
// 256 bytes: 400.
//
// Runs on: any thread (a pure function of the request).
#include <string>

#include "http/request.hpp"

namespace agentbox::accounts {

std::string user_id_of(const http::Request& req, bool query_allowed = false);

}  // namespace agentbox::accounts
