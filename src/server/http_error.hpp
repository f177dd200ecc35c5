#pragma once
// Errors become HTTP statuses here and nowhere else: handlers throw HttpError with the status and
// a detail meant for the client; error_response() is the one builder of {"detail": ...} bodies;
// response_for_exception() turns anything else into a 500 that reveals nothing internal.
#include <boost/beast/http/status.hpp>

#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

#include "server/response.hpp"

namespace agentbox::server {

class HttpError : public std::runtime_error {
 public:
  HttpError(http::status status, std::string detail)
      : std::runtime_error(std::move(detail)), status_(status) {}

  http::status status() const noexcept { return status_; }
  std::string_view detail() const noexcept { return what(); }

 private:
  http::status status_;
};

// Throws HttpError 422: a well-formed request with a field or parameter of the wrong shape.
[[noreturn]] void unprocessable(std::string detail);

// {"detail": detail} with that status, as JSON.
Response error_response(http::status status, std::string_view detail);

// The response for an exception a handler let escape: HttpError → its status and detail;
// FsError → its kind's status (400/403/404/409/415/413) and message; BoxUnavailable → 503
// with its message and Retry-After; BoxLimitReached → 429 with its message; anything else →
// 500 {"detail":"Internal Server Error"}, with the real message logged under
// `context` (for example "GET /files/read").
Response response_for_exception(std::exception_ptr error, std::string_view context);

}  // namespace agentbox::server
