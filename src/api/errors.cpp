#include "api/errors.hpp"

#include "box/box_error.hpp"
#include "fs/fs_error.hpp"

namespace agentbox::api {

namespace {

// The one mapping of fs/'s error kinds to statuses (fs_error.hpp names the same table).
http::status status_of(FsErrorKind kind) {
  switch (kind) {
    case FsErrorKind::bad_request: return http::status::bad_request;
    case FsErrorKind::forbidden: return http::status::forbidden;
    case FsErrorKind::not_found: return http::status::not_found;
    case FsErrorKind::conflict: return http::status::conflict;
    case FsErrorKind::unsupported_media: return http::status::unsupported_media_type;
    case FsErrorKind::too_large: return http::status::payload_too_large;
    case FsErrorKind::insufficient_storage: return http::status::insufficient_storage;
  }
  return http::status::internal_server_error;
}

}  // namespace

std::optional<Response> domain_error_response(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const FsError& e) {  // its message names paths only as the box sees them
    return error_response(status_of(e.kind()), e.what());
  } catch (const BoxUnavailable& e) {  // the caller's own box: says what and when to retry
    Response r = error_response(http::status::service_unavailable, e.what());
    if (e.retry_after() > 0) r.headers.set(http::field::retry_after, std::to_string(e.retry_after()));
    return r;
  } catch (const BoxLimitReached& e) {  // the caller's box holds all it may: the message names the limit
    return error_response(http::status::too_many_requests, e.what());
  } catch (...) {
  }
  return std::nullopt;
}

Response response_for_exception(std::exception_ptr error, std::string_view context) {
  return http::response_for_exception(std::move(error), context, &domain_error_response);
}

}  // namespace agentbox::api
