#pragma once
// The one map from what the API's handlers throw to what the client gets. Row by row
// (errors.cpp has the same table; tests/unit/api_errors_test.cpp checks each row):
//
//   HttpError                    its status and detail
//   FsError                      its kind's status (400 403 404 409 413 415 507), its message
//   BoxUnavailable               503, its message, Retry-After when it says when
//   BoxLimitReached              429, its message (it names the limit)
//   exec::TerminalLimitError     429, its message
//   agent::ChatRequestError      400, its message
//   SpawnError                   400 "<starting> could not start: <message>"
//   Error with errno E2BIG       413 "<starting> and environment are too large to start"
//     (only when starting)
//   anything else                500 "Internal Server Error", the message logged under context
//
// The daemon's route table maps every escaping exception with it (Router::map_errors(error_map));
// a handler that answers an error itself (a start that failed, a takeover) calls it directly.
// Messages of these errors are written for the client: FsError names paths only as the box
// sees them; a plain Error (host paths, syscalls) never reaches the client.
#include <exception>
#include <string_view>

#include "http/error.hpp"
#include "http/response.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

// context: the request, for the log line of a 500 ("POST /execute"). starting: what was being
// started when the error came ("Command", "Terminal"), for a start's answer; empty otherwise.
Response error_response_for(std::exception_ptr error, std::string_view context, std::string_view starting = {});

// error_response_for as a route table's ErrorMap.
inline constexpr ErrorMap error_map = [](std::exception_ptr error, std::string_view context) {
  return error_response_for(std::move(error), context);
};

}  // namespace agentbox::api
