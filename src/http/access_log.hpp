#pragma once
// The HTTP server's access log line (component "http" of util/log.hpp). The line holds method,
// path and query (with secret-looking query values redacted), status, bytes and duration; never
// a header, so the Authorization header and cookies cannot reach a log.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace agentbox::http {

// The target with values of query parameters whose name suggests a secret (token, key,
// signature, password, ...) replaced by "REDACTED". Unparseable targets are replaced whole.
std::string loggable_target(std::string_view target);

struct AccessRecord {
  std::string_view method;  // "-" when the request line was never read
  std::string_view target;  // raw target; redacted here
  unsigned status = 0;
  std::uint64_t body_bytes = 0;  // response body bytes sent
  std::chrono::steady_clock::duration duration{};
  std::string_view remote;
};

void log_access(const AccessRecord& record);

}  // namespace agentbox::http
