#pragma once
// Counters of the HTTP layer for /metrics: every connection or request turned away at a limit
// is counted where the limit is applied. Plain atomics, relaxed: they are statistics only.
#include <atomic>
#include <cstdint>
#include <string_view>

namespace agentbox::http {

struct HttpCounters {
  std::atomic<std::uint64_t> connections_accepted{0};
  std::atomic<std::uint64_t> connections_rejected{0};  // 429/503: a connection limit, nothing idle to close
  std::atomic<std::uint64_t> connections_evicted{0};   // idle ones closed to make room for a new one
  std::atomic<std::uint64_t> requests{0};              // request headers read completely
  std::atomic<std::uint64_t> bad_requests{0};          // 400: malformed HTTP or target
  std::atomic<std::uint64_t> header_too_large{0};      // 431
  std::atomic<std::uint64_t> body_too_large{0};        // 413
  std::atomic<std::uint64_t> header_timeouts{0};       // 408 or dropped before headers completed
  std::atomic<std::uint64_t> body_timeouts{0};         // 408: body stalled
  std::atomic<std::uint64_t> idle_timeouts{0};         // keep-alive connection closed while idle
  std::atomic<std::uint64_t> write_timeouts{0};        // client stopped reading
  std::atomic<std::uint64_t> unauthorized{0};          // 401
  std::atomic<std::uint64_t> not_found{0};             // 404 from the router
  std::atomic<std::uint64_t> method_not_allowed{0};    // 405 from the router
  std::atomic<std::uint64_t> internal_errors{0};       // 500 from an unexpected exception
  std::atomic<std::uint64_t> stream_overflows{0};      // streamed response queue over its bound
  std::atomic<std::uint64_t> client_aborts{0};         // client left while an async handler ran
};

// Name → member table, so /metrics can print every counter without listing them again.
struct HttpCounterName {
  std::string_view name;
  std::atomic<std::uint64_t> HttpCounters::*member;
};

inline constexpr HttpCounterName kHttpCounterNames[] = {
    {"connections_accepted", &HttpCounters::connections_accepted},
    {"connections_rejected", &HttpCounters::connections_rejected},
    {"connections_evicted", &HttpCounters::connections_evicted},
    {"requests", &HttpCounters::requests},
    {"bad_requests", &HttpCounters::bad_requests},
    {"header_too_large", &HttpCounters::header_too_large},
    {"body_too_large", &HttpCounters::body_too_large},
    {"header_timeouts", &HttpCounters::header_timeouts},
    {"body_timeouts", &HttpCounters::body_timeouts},
    {"idle_timeouts", &HttpCounters::idle_timeouts},
    {"write_timeouts", &HttpCounters::write_timeouts},
    {"unauthorized", &HttpCounters::unauthorized},
    {"not_found", &HttpCounters::not_found},
    {"method_not_allowed", &HttpCounters::method_not_allowed},
    {"internal_errors", &HttpCounters::internal_errors},
    {"stream_overflows", &HttpCounters::stream_overflows},
    {"client_aborts", &HttpCounters::client_aborts},
};

inline void count(std::atomic<std::uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

}  // namespace agentbox::http
