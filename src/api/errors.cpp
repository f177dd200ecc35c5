#include "api/errors.hpp"

#include <cerrno>
#include <string>

#include "accounts/admission.hpp"
#include "agent/chat_request.hpp"
#include "box/box_error.hpp"
#include "box/spawn_result.hpp"
#include "exec/terminals.hpp"
#include "fs/fs_error.hpp"
#include "store/sqlite.hpp"
#include "util/log.hpp"

namespace agentbox::api {

namespace {

// fs/'s error kinds (fs_error.hpp names the same table).
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

// A full state disk waits for an operator: clients need not come back at once.
constexpr int kStateFullRetrySeconds = 30;

std::string could_not_start(std::string_view starting, std::string_view why) {
  std::string out = starting.empty() ? "Could not start" : std::string(starting) + " could not start";
  return out.append(": ").append(why);
}

}  // namespace

Response error_response_for(std::exception_ptr error, std::string_view context, std::string_view starting) {
  try {
    std::rethrow_exception(error);
  } catch (const accounts::RetryLater& e) {  // a limit that says when to come back
    Response r = error_response(e.status(), e.detail(), e.code());
    r.headers.set(http::field::retry_after, std::to_string(e.retry_after()));
    return r;
  } catch (const HttpError& e) {
    return error_response(e.status(), e.detail(), e.code());
  } catch (const FsError& e) {  // its message names paths only as the box sees them
    return error_response(status_of(e.kind()), e.what());
  } catch (const BoxUnavailable& e) {  // the caller's own box: says what and when to retry
    Response r = error_response(http::status::service_unavailable, e.what());
    if (e.retry_after() > 0) r.headers.set(http::field::retry_after, std::to_string(e.retry_after()));
    return r;
  } catch (const BoxLimitReached& e) {  // the caller's box holds all it may: the message names the limit
    return error_response(http::status::too_many_requests, e.what());
  } catch (const exec::TerminalLimitError& e) {
    return error_response(http::status::too_many_requests, e.what());
  } catch (const agent::ChatRequestError& e) {
    return error_response(http::status::bad_request, e.what());
  } catch (const DbError& e) {
    // The state disk is full: the operator's to free; what was written before stays, and this
    // request changed nothing (its transaction was not committed). Anything else stays a 500.
    if (e.disk_full()) {
      log::error("api", "{}: the state disk is full: {}", context, e.what());
      Response r = error_response(http::status::service_unavailable,
                                  "The server's state disk is full: nothing was changed; retry once the operator "
                                  "has freed space");
      r.headers.set(http::field::retry_after, std::to_string(kStateFullRetrySeconds));
      return r;
    }
  } catch (const SpawnError& e) {  // exec or cwd in the box: the command's problem, not ours
    return error_response(http::status::bad_request, could_not_start(starting, e.what()));
  } catch (const Error& e) {
    if (!starting.empty() && e.code() == E2BIG)
      return error_response(http::status::payload_too_large,
                            std::string(starting) + " and environment are too large to start");
  } catch (...) {
  }
  return http::response_for_exception(std::move(error), context);  // a 500, logged
}

}  // namespace agentbox::api
