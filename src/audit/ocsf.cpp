#include "audit/ocsf.hpp"

#include <sys/wait.h>

#include <chrono>

namespace agentbox::audit {

using nlohmann::json;

namespace {

// OCSF's category and class numbers, and the activity names of each class used here.
constexpr int kApiActivity = 6003, kAuthentication = 3002, kNetworkActivity = 4001, kHttpActivity = 4002,
              kProcessActivity = 1007, kAccountChange = 3001;

// The base fields every class has: numbers and their captions, status, severity, time.
json base(int class_uid, std::string_view class_name, int activity_id, std::string_view activity_name, bool success,
          std::int64_t time_ms) {
  const int category = class_uid / 1000;
  static constexpr std::string_view kCategories[] = {
      "",          "System Activity",     "Findings", "Identity & Access Management", "Network Activity",
      "Discovery", "Application Activity"};
  json e;
  e["class_uid"] = class_uid;
  e["class_name"] = class_name;
  e["category_uid"] = category;
  e["category_name"] = kCategories[category];
  e["activity_id"] = activity_id;
  e["activity_name"] = activity_name;
  e["type_uid"] = class_uid * 100 + activity_id;
  e["type_name"] = std::string(class_name) + ": " + std::string(activity_name);
  e["severity_id"] = success ? 1 : 3;  // Informational; Medium for a refusal or a failure
  e["severity"] = success ? "Informational" : "Medium";
  e["status_id"] = success ? 1 : 2;
  e["status"] = success ? "Success" : "Failure";
  e["time"] = time_ms;
  return e;
}

// API Activity's activity from the method: Create, Read, Update, Delete or Other.
std::pair<int, std::string_view> api_activity_of(std::string_view method) {
  if (method == "POST") return {1, "Create"};
  if (method == "GET" || method == "HEAD") return {2, "Read"};
  if (method == "PUT" || method == "PATCH") return {3, "Update"};
  if (method == "DELETE") return {4, "Delete"};
  return {99, "Other"};
}

json user_object(std::string_view uid, std::string_view account) {
  json u = json::object();
  if (!uid.empty()) u["uid"] = uid;
  if (!account.empty()) {
    u["name"] = account;
    u["account"] = {{"name", account}, {"type_id", 99}, {"type", "agentbox account"}};
  }
  return u;
}

json service() { return {{"name", "agentbox"}}; }

}  // namespace

std::string command_line(const std::vector<std::string>& argv) {
  constexpr size_t kLimit = 1024;
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
    if (out.size() >= kLimit) break;
  }
  if (out.size() > kLimit) {
    size_t n = kLimit;
    while (n > 0 && (static_cast<unsigned char>(out[n]) & 0xC0) == 0x80) --n;
    out.resize(n);
  }
  return out;
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return wait_status;
}

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

json api_activity(const ApiCall& c) {
  auto [id, name] = api_activity_of(c.method);
  json e = base(kApiActivity, "API Activity", id, name, c.status < 400, c.time_ms);
  e["status_code"] = std::to_string(c.status);
  json user = user_object(c.user, c.account);
  user["type_id"] = c.key_kind == "admin" ? 2 : 1;
  user["type"] = c.key_kind == "admin" ? "Admin" : "User";
  e["actor"] = {{"user", std::move(user)}, {"app_name", "agentbox"}};
  e["api"] = {{"operation", c.route}, {"service", service()}, {"response", {{"code", c.status}}}};
  json http = {{"http_method", c.method}, {"url", {{"path", c.route}}}};
  if (c.request) {
    if (c.request->contains("headers")) http["http_headers"] = (*c.request)["headers"];
    if (c.request->contains("body")) http["body"] = (*c.request)["body"];
  }
  e["http_request"] = std::move(http);
  e["http_response"] = {{"code", c.status}};
  e["src_endpoint"] = {{"ip", c.src_ip}};
  e["duration"] = static_cast<std::int64_t>(c.duration_ms);
  e["unmapped"] = {{"key_kind", c.key_kind}, {"account", c.account}};
  return e;
}

json authentication(const AuthRefusal& r) {
  json e = base(kAuthentication, "Authentication", 1, "Logon", false, r.time_ms);
  e["status_code"] = std::to_string(r.status);
  e["status_detail"] = r.key_presented ? "the key presented is not valid here" : "no key presented";
  e["user"] = json::object();
  if (r.claimed_user.empty())
    e["user"]["name"] = "unknown";
  else
    e["user"]["uid"] = r.claimed_user;
  e["auth_protocol_id"] = 99;
  e["auth_protocol"] = "Bearer";
  e["is_remote"] = true;
  e["service"] = service();
  e["src_endpoint"] = {{"ip", r.src_ip}};
  e["http_request"] = {{"http_method", r.method}, {"url", {{"path", r.route}}}};
  return e;
}

json network_activity(const NetDecision& d) {
  json e;
  if (d.gateway) {
    e = base(kHttpActivity, "HTTP Activity", 6, "Post", d.allowed, d.time_ms);
    e["http_request"] = {{"http_method", "POST"}, {"url", {{"hostname", d.host}, {"port", d.port}}}};
  } else {
    e = d.allowed ? base(kNetworkActivity, "Network Activity", 2, "Close", true, d.time_ms)
                  : base(kNetworkActivity, "Network Activity", 5, "Refuse", false, d.time_ms);
    e["connection_info"] = {{"protocol_name", "tcp"}, {"direction_id", 2}, {"direction", "Outbound"}};
  }
  e["disposition_id"] = d.allowed ? 1 : 2;
  e["disposition"] = d.allowed ? "Allowed" : "Blocked";
  e["status_detail"] = d.reason;
  if (!d.allowed) e["firewall_rule"] = {{"name", d.reason}, {"type", "agentbox egress policy"}};
  e["actor"] = {{"user", user_object(d.user, d.account)}};
  e["src_endpoint"] = {{"name", d.account}};
  json dst = {{"hostname", d.host}, {"port", d.port}};
  if (!d.address.empty()) dst["ip"] = d.address;
  e["dst_endpoint"] = std::move(dst);
  e["traffic"] = {{"bytes_out", d.bytes_up}, {"bytes_in", d.bytes_down}, {"bytes", d.bytes_up + d.bytes_down}};
  e["unmapped"] = {{"kind", d.kind}};
  return e;
}

json process_activity(const ProcessEvent& p) {
  const bool launched = p.launch && p.failure.empty();
  const bool ok = launched || (!p.launch && !p.lost && p.exit_code && *p.exit_code == 0);
  json e = p.launch ? base(kProcessActivity, "Process Activity", 1, "Launch", launched, p.time_ms)
                    : base(kProcessActivity, "Process Activity", 2, "Terminate", ok, p.time_ms);
  if (!p.launch) {  // a command that fails is no alert; a box that could not run one is (Medium)
    e["severity_id"] = 1;
    e["severity"] = "Informational";
  }
  json proc = json::object();
  if (p.pid > 0) proc["pid"] = p.pid;
  if (!p.cmd_line.empty()) proc["cmd_line"] = p.cmd_line;
  e["process"] = std::move(proc);
  if (p.exit_code) e["exit_code"] = *p.exit_code;
  if (p.lost) e["status_detail"] = "its box went away before the exit was seen";
  if (!launched && p.launch) e["status_detail"] = p.failure;
  const std::string_view account = std::string_view(p.box).substr(0, p.box.find('~'));
  e["actor"] = {{"user", user_object({}, account)}};
  e["device"] = {{"name", p.box}, {"type_id", 99}, {"type", "agentbox box"}};
  return e;
}

json account_change(const AccountEvent& a) {
  static constexpr std::pair<int, std::string_view> kActivities[] = {
      {1, "Create"}, {6, "Delete"}, {99, "Move In"}, {99, "Restore"}, {99, "Forget"}};
  auto [id, name] = kActivities[static_cast<size_t>(a.activity)];
  json e = base(kAccountChange, "Account Change", id, name, true, a.time_ms);
  e["user"] = user_object(a.user, a.account);
  // Only the account's own first request creates it; the operator deletes, moves and restores;
  // the daemon itself forgets.
  json actor = user_object(a.user, a.account);
  if (a.activity == AccountActivity::forget)
    actor = {{"type_id", 3}, {"type", "System"}};
  else if (a.activity != AccountActivity::create)
    actor = {{"type_id", 2}, {"type", "Admin"}};
  e["actor"] = json::object();
  e["actor"]["user"] = std::move(actor);
  return e;
}

void stamp(json& event, std::string_view product_version) {
  event["metadata"] = {{"version", kOcsfVersion},
                       {"product", {{"name", "agentbox"}, {"vendor_name", "agentbox"}, {"version", product_version}}}};
}

}  // namespace agentbox::audit
