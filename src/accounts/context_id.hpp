#pragma once
// The context a request names: X-Terminal-Context-Id, as Open WebUI's orchestrator connections
// send it (default | chat:<id> | automation:<id>, at most 256 characters, no control
// characters). Under a profile with isolation "context" each one but "default" gets a box and a
// workspace of its own (accounts/directory.hpp). Absent or empty: "default". Anything else, or
// the header twice: HttpError 400 naming the header.
//
// Runs on: any thread (a pure function of the request).
#include <string>

#include "http/request.hpp"

namespace agentbox::accounts {

inline constexpr std::string_view kDefaultContext = "default";

std::string context_id_of(const http::Request& req);

// What is wrong with `value` as a context id ("" when nothing is): the check context_id_of
// makes, for a context named elsewhere (DELETE /p/{profile}/workspaces/{context}).
std::string_view context_id_problem(std::string_view value);

}  // namespace agentbox::accounts
