#pragma once
// Errors become HTTP statuses here: handlers throw HttpError with the status and a detail meant
// for the client; error_response() is the one builder of {"detail": ...} bodies. The library
// knows no domain's exceptions: a route table carries the ErrorMap its handlers' exceptions go
// through (Router::map_errors; the API's is api/errors.hpp), and response_for_exception() is
// the library's own: HttpError, else a 500 that reveals nothing internal.
#include <boost/beast/http/status.hpp>

#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

#include "http/response.hpp"
#include "util/error.hpp"

namespace agentbox::http {

class HttpError : public Error {
 public:
  // code: a machine-readable name for the error, for route tables whose clients read one
  // (ErrorFacts::code); the {"detail": ...} body does not carry it.
  HttpError(http::status status, std::string detail, std::string code = {})
      : Error(std::move(detail)), status_(status), code_(std::move(code)) {}

  http::status status() const noexcept { return status_; }
  std::string_view detail() const noexcept { return what(); }
  const std::string& code() const noexcept { return code_; }

 private:
  http::status status_;
  std::string code_;
};

// The response for an exception a handler let escape; context ("GET /files/read") names the
// request in the log line of a 500.
using ErrorMap = Response (*)(std::exception_ptr error, std::string_view context);

// Throws HttpError 422: a well-formed request with a field or parameter of the wrong shape.
[[noreturn]] void unprocessable(std::string detail);

// {"detail": detail} with that status, as JSON; Response::error holds detail and code.
Response error_response(http::status status, std::string_view detail, std::string_view code = {});

// How a route table answers errors under a path prefix when its clients expect another shape
// than {"detail": ...} (Router::shape_errors): rewrites an error answer's status and body from
// its ErrorFacts, keeping its headers (Allow, Retry-After, WWW-Authenticate).
using ErrorShape = void (*)(Response& error);

// The library's ErrorMap: HttpError → its status and detail; anything else → 500
// {"detail":"Internal Server Error"}, with the real message logged under `context`.
Response response_for_exception(std::exception_ptr error, std::string_view context);

}  // namespace agentbox::http
