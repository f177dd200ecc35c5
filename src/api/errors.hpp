#pragma once
// The domain rooms' exceptions as the API answers them: the ErrorTranslator every API route
// table carries (http/error.hpp). FsError → its kind's status (400/403/404/409/415/413/507)
// and message; BoxUnavailable → 503 with its message and Retry-After; BoxLimitReached → 429
// with its message (it names the limit).
#include <exception>
#include <optional>
#include <string_view>

#include "http/error.hpp"
#include "http/response.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

std::optional<Response> domain_error_response(const std::exception_ptr& error);

// http::response_for_exception with the domain's errors translated: for handlers that answer
// an exception themselves.
Response response_for_exception(std::exception_ptr error, std::string_view context);

}  // namespace agentbox::api
