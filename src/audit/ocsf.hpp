#pragma once
// The audit trail's events in OCSF 1.3 (schema.ocsf.io): one builder per class, each a pure
// function of what the hook saw, so the event's shape is tested without a daemon. A builder
// sets the class's fields and the base ones every event carries (class_uid, category_uid,
// activity_id, type_uid = class_uid * 100 + activity_id, severity_id, time in ms, status);
// stamp() adds metadata (the schema version and the product) as the writer writes the line.
// No builder takes a credential: the hooks hand over who (user id, key kind), never the key.
//
// Runs on: any thread (pure functions).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::audit {

inline constexpr std::string_view kOcsfVersion = "1.3.0";

// The classes written, in the order of agentbox_audit_events_total{class}.
enum class EventClass : std::uint8_t {
  api_activity,
  authentication,
  network_activity,
  http_activity,
  process,
  account
};
inline constexpr std::string_view kClassNames[] = {"api_activity",  "authentication",   "network_activity",
                                                   "http_activity", "process_activity", "account_change"};
inline constexpr size_t kClassCount = std::size(kClassNames);

// An authenticated request, answered (API Activity, 6003).
struct ApiCall {
  std::int64_t time_ms = 0;
  std::string method;    // "GET"
  std::string route;     // the router's pattern, "/files/list": never the path
  unsigned status = 0;   // the answer's HTTP status
  std::string user;      // the external user id the request acted as; "" for none (admin routes)
  std::string key_kind;  // "shared", "user", "admin" or "link": which credential, never its value
  std::string account;   // the account's name, "" when the user has none (yet)
  std::string src_ip;
  double duration_ms = 0;
  std::optional<nlohmann::json> request;  // level REQUEST: {"headers", "body"} already redacted
};

// A request refused for its credential (Authentication, 3002, Logon failed).
struct AuthRefusal {
  std::int64_t time_ms = 0;
  std::string method;
  std::string route;
  unsigned status = 0;         // 401 or 403
  bool key_presented = false;  // an Authorization header came (its value is never kept)
  std::string claimed_user;    // X-User-Id as sent, if any
  std::string src_ip;
};

// One egress decision of a box's proxy (Network Activity, 4001) or one model gateway call
// (HTTP Activity, 4002). Allowed ones are written at their close, with the bytes.
struct NetDecision {
  std::int64_t time_ms = 0;
  bool gateway = false;  // true: a gateway call (HTTP Activity)
  std::string kind;      // "tunnel", "forward" or "gateway"
  std::string account;
  std::string user;
  std::string host;
  std::uint16_t port = 0;
  std::string address;  // the address connected to, "" when none
  bool allowed = false;
  std::string reason;  // the rule that refused, or what the allowed call was
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
};

// A command a box started or saw end (Process Activity, 1007).
struct ProcessEvent {
  std::int64_t time_ms = 0;
  bool launch = true;  // false: terminate
  std::string box;     // the box's name: its account, or ACCOUNT~PROFILE
  int pid = 0;
  std::string cmd_line;          // argv joined by spaces, cut at 1 KiB (launch only)
  std::optional<int> exit_code;  // terminate: the exit status, or 128 + the signal
  bool lost = false;             // terminate: its box went away before the exit was seen
  // launch: why the command never started (its box did not start or went away, init refused
  // it); "" when it started. A failed launch has no pid.
  std::string failure;
};

// An account created, deleted, moved in, restored, or its empty volume forgotten by the daemon
// ([accounts] forget_after_days: the account and its uid stay) (Account Change, 3001).
enum class AccountActivity : std::uint8_t { create, remove, move_in, restore, forget };
struct AccountEvent {
  std::int64_t time_ms = 0;
  AccountActivity activity = AccountActivity::create;
  std::string account;  // the account's name
  std::string user;     // its external user id, when known
};

nlohmann::json api_activity(const ApiCall& e);
nlohmann::json authentication(const AuthRefusal& e);
nlohmann::json network_activity(const NetDecision& e);  // 4001 or 4002 by e.gateway
nlohmann::json process_activity(const ProcessEvent& e);
nlohmann::json account_change(const AccountEvent& e);

// metadata: {"version": kOcsfVersion, "product": {"name", "vendor_name", "version"}}.
void stamp(nlohmann::json& event, std::string_view product_version);

// argv joined by spaces, cut at 1 KiB: a Process Activity's cmd_line.
std::string command_line(const std::vector<std::string>& argv);
// A raw wait status as a shell shows it: the exit status, or 128 + the signal.
int exit_code_of(int wait_status);

// The unix time now, in milliseconds: an event's `time`.
std::int64_t now_ms();

}  // namespace agentbox::audit
