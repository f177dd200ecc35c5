#include "http/error.hpp"

#include "util/log.hpp"

namespace agentbox::http {

void unprocessable(std::string detail) { throw HttpError(http::status::unprocessable_entity, std::move(detail)); }

Response error_response(http::status status, std::string_view detail, std::string_view code) {
  Response r = Response::json({{"detail", detail}}, status);
  r.error = ErrorFacts{std::string(detail), std::string(code)};
  return r;
}

Response response_for_exception(std::exception_ptr error, std::string_view context) {
  try {
    std::rethrow_exception(error);
  } catch (const HttpError& e) {
    return error_response(e.status(), e.detail(), e.code());
  } catch (const std::exception& e) {
    log::error("http", "{}: unhandled exception: {}", context, e.what());
  } catch (...) {
    log::error("http", "{}: unhandled non-standard exception", context);
  }
  return error_response(http::status::internal_server_error, "Internal Server Error");
}

}  // namespace agentbox::http
