#pragma once
// The daemon's event counters that no table it already keeps can answer at scrape time: box
// starts and their outcomes, egress and gateway decisions, tokens, moves and restores. Each is
// counted where the event happens, with one relaxed atomic add; the page (daemon/metrics_page)
// reads them. One instance per process: the rooms that count (box, net, moves) reach it without
// a pointer threaded through every constructor, as they reach util/log.hpp.
//
// Runs on: any thread.
#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "metrics/histogram.hpp"

namespace agentbox::metrics {

// Why a box start did not end in a running box: agentbox_box_start_failures_total{reason}.
enum class StartFailure : std::uint8_t { launch, init, timeout, protocol, stopped };
inline constexpr std::array<std::string_view, 5> kStartFailureNames = {"launch", "init", "timeout", "protocol",
                                                                       "stopped"};

// What a gateway answer's tokens were: agentbox_gateway_tokens_total{kind}.
inline constexpr std::array<std::string_view, 4> kTokenKinds = {"input", "output", "cache_creation", "cache_read"};

// Why a new user's account was not made: agentbox_account_admission_refusals_total{reason}.
enum class AdmissionRefusal : std::uint8_t { rate, max_accounts, uid_range };
inline constexpr std::array<std::string_view, 3> kAdmissionRefusalNames = {"rate", "max_accounts", "uid_range"};

struct Events {
  Histogram box_start_seconds{kStartSeconds};  // launch to init's "ready"
  std::atomic<std::int64_t> boxes_starting{0};
  std::atomic<std::int64_t> boxes_running{0};
  std::atomic<std::uint64_t> boxes_started{0};
  std::array<std::atomic<std::uint64_t>, kStartFailureNames.size()> box_start_failures{};
  std::atomic<std::int64_t> box_commands_running{0};  // every command a box runs: /execute, shells, agents

  std::atomic<std::uint64_t> egress_allowed{0};
  std::atomic<std::uint64_t> egress_denied{0};
  std::atomic<std::uint64_t> egress_bytes_up{0};    // box → destination, tunnels and forwards
  std::atomic<std::uint64_t> egress_bytes_down{0};  // destination → box

  std::atomic<std::uint64_t> gateway_allowed{0};
  std::atomic<std::uint64_t> gateway_denied{0};
  std::array<std::atomic<std::uint64_t>, 5> gateway_upstream_status{};  // 1xx .. 5xx
  std::array<std::atomic<std::uint64_t>, kTokenKinds.size()> gateway_tokens{};

  std::atomic<std::uint64_t> moves_activated{0};
  std::atomic<std::uint64_t> restores{0};
  std::array<std::atomic<std::uint64_t>, kAdmissionRefusalNames.size()> account_admission_refusals{};

  std::atomic<std::int64_t> volumes_attached{0};  // account volumes mounted now (volumes/account_volumes)
  std::atomic<std::uint64_t> volume_attaches{0};  // mounted for a use
  std::atomic<std::uint64_t> volume_detaches{0};  // unmounted when idle (or over [accounts] attached)
};

Events& events();

inline void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}
inline void add(std::atomic<std::int64_t>& gauge, std::int64_t n) { gauge.fetch_add(n, std::memory_order_relaxed); }

void count_start_failure(StartFailure why);

}  // namespace agentbox::metrics
