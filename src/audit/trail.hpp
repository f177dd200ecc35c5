#pragma once
// The audit trail: the hooks hand an event's builder to record(), which queues it (bounded) and
// returns; ONE writer thread (woken every 100 ms, or by a half-full queue) builds each event (OCSF, audit/ocsf.hpp),
// stamps it, writes it as one line to the file (audit/audit_file.hpp) and, with stdout, to fd 1. Nothing on the request
// path waits for a disk: a full queue drops the event and counts it, and a write that fails
// (ENOSPC, EIO) stops the writing (agentbox_audit_writing 0) until a retry succeeds, every
// event meanwhile dropped and counted. One instance per process, as metrics::events(): the rooms
// that audit (http's observer in daemon, net, box, store, api) reach it without a pointer.
//
// Runs on: record() and the counters on any thread; start() and stop() on the daemon's main
// thread; builders on the writer thread.
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/audit_file.hpp"
#include "audit/ocsf.hpp"

namespace agentbox::audit {

enum class Level : std::uint8_t { none, metadata, request };  // [audit] level: NONE, METADATA, REQUEST

// agentbox_audit_dropped_total{reason}
enum class DropReason : std::uint8_t { queue_full, write_error };
inline constexpr std::string_view kDropReasons[] = {"queue_full", "write_error"};

struct TrailOptions {
  Level level = Level::none;
  FileOptions file;
  bool to_stdout = false;
  std::string product_version;
  size_t queue_limit = 16384;  // events waiting for the writer; more are dropped
  // Values never written, whatever field they reach (the API and admin keys, the model
  // credential): replaced by "[REDACTED]" in the whole line, a net under the field redaction.
  std::vector<std::string> scrub;
  // The account name of an API call's user id, asked on the writer thread (cached there):
  // off the request path, where the account may not be known yet. None: no account field.
  std::function<std::string(const std::string& user)> account_of;
};

struct TrailStats {
  std::array<std::atomic<std::uint64_t>, kClassCount> events{};  // written, by class
  std::array<std::atomic<std::uint64_t>, std::size(kDropReasons)> dropped{};
  std::atomic<bool> writing{false};  // on, and the last write succeeded
};

using Builder = std::function<nlohmann::json()>;

// Starts the writer (level none: nothing starts; record() then costs one atomic load).
void start(TrailOptions options);
// Writes what is queued, then joins the writer. Later record() calls are dropped silently.
void stop();

Level level();
inline bool on() { return level() != Level::none; }
TrailStats& stats();

// Queues build (run on the writer thread) for an event of class c. Never blocks for long.
void record(EventClass c, Builder build);

// The hooks: one line where the event happens.
void api_call(ApiCall call);
void auth_refused(AuthRefusal refusal);
void net_decision(NetDecision decision);
void process(ProcessEvent event);
void account(AccountActivity activity, std::string_view account, std::string_view user);

}  // namespace agentbox::audit
