#pragma once
// Errors become HTTP statuses here: handlers throw HttpError with the status and a detail meant
// for the client; error_response() is the one builder of {"detail": ...} bodies;
// response_for_exception() turns anything else into a 500 that reveals nothing internal. The
// library knows no domain's exceptions: an ErrorTranslator (the API's is api/errors.hpp) answers
// for those, and a Router carries the one its handlers' exceptions go through.
#include <boost/beast/http/status.hpp>

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "http/response.hpp"

namespace agentbox::http {

class HttpError : public std::runtime_error {
 public:
  HttpError(http::status status, std::string detail)
      : std::runtime_error(std::move(detail)), status_(status) {}

  http::status status() const noexcept { return status_; }
  std::string_view detail() const noexcept { return what(); }

 private:
  http::status status_;
};

// The response for an exception of a room below HTTP (a full volume, a box that cannot start),
// or nullopt for one it does not know.
using ErrorTranslator = std::optional<Response> (*)(const std::exception_ptr& error);

// Throws HttpError 422: a well-formed request with a field or parameter of the wrong shape.
[[noreturn]] void unprocessable(std::string detail);

// {"detail": detail} with that status, as JSON.
Response error_response(http::status status, std::string_view detail);

// The response for an exception a handler let escape: HttpError → its status and detail; what
// `translate` answers for → that; anything else → 500 {"detail":"Internal Server Error"}, with
// the real message logged under `context` (for example "GET /files/read").
Response response_for_exception(std::exception_ptr error, std::string_view context,
                                ErrorTranslator translate = nullptr);

}  // namespace agentbox::http
