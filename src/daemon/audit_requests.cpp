#include "daemon/audit_requests.hpp"

#include <fmt/format.h>

#include <chrono>

#include "accounts/user_id.hpp"
#include "audit/redact.hpp"
#include "http/request.hpp"

namespace agentbox::daemon {

namespace {

using Credential = http::CompletedRequest::Credential;

// Bytes of a request body copied off the io thread for the REQUEST level: enough to parse most
// JSON bodies whole (then redacted by key) before the 4 KiB cut; longer ones are scanned as text.
constexpr size_t kBodyCopy = 64 * 1024;

std::string_view key_kind(Credential c) {
  switch (c) {
    case Credential::api_key: return "shared";
    case Credential::admin_key: return "admin";
    case Credential::user_key: return "user";
    case Credential::signed_link: return "link";
    case Credential::nothing: break;
  }
  return "none";
}

// "10.0.0.5:41234" or "::1:41234" (the session's peer): the address without the port.
std::string ip_of(std::string_view remote) {
  const size_t colon = remote.rfind(':');
  return std::string(colon == std::string_view::npos ? remote : remote.substr(0, colon));
}

std::int64_t ms_of(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

void audit_request(const http::CompletedRequest& r, std::string_view route) {
  if (!audit::on() || !r.request) return;
  const http::Request& req = *r.request;
  if (r.refused_credential) {
    audit::auth_refused({audit::now_ms(), std::string(r.method), std::string(route), r.status,
                         req.header("Authorization").has_value() || r.key_in_frame,
                         std::string(req.header("X-User-Id").value_or("")), ip_of(req.remote_address)});
    return;
  }
  if (r.credential == Credential::nothing) return;  // public routes: no one to name
  audit::ApiCall c;
  c.time_ms = audit::now_ms();
  c.method = std::string(r.method);
  c.route = std::string(route);
  c.status = r.status;
  c.key_kind = std::string(key_kind(r.credential));
  if (r.credential != Credential::admin_key) {
    try {
      c.user = accounts::user_id_of(req, true);
    } catch (const std::exception&) {  // none, or two that disagree: the request named no one
    }
  }
  c.src_ip = ip_of(req.remote_address);
  c.duration_ms = static_cast<double>(ms_of(r.duration));
  if (audit::level() != audit::Level::request) return audit::api_call(std::move(c));
  // REQUEST: the headers and the body's first bytes, redacted on the writer thread.
  std::string body = req.body.size() > kBodyCopy ? req.body.substr(0, kBodyCopy) : req.body;
  if (body.empty() && req.body_size > 0) body = fmt::format("[{} bytes received to a file: not kept]", req.body_size);
  audit::record(audit::EventClass::api_activity,
                [c = std::move(c), headers = req.headers, body = std::move(body)]() mutable {
                  c.request = nlohmann::json::object();
                  (*c.request)["headers"] = audit::redact_headers(headers);
                  if (!body.empty()) (*c.request)["body"] = audit::redact_body(body);
                  return audit::api_activity(c);
                });
}

audit::TrailOptions trail_options(const ServerConfig& config, std::string_view version, std::vector<std::string> scrub,
                                  std::function<std::string(const std::string&)> account_of) {
  audit::TrailOptions o;
  switch (config.audit.level) {
    case AuditConfig::Level::none: o.level = audit::Level::none; break;
    case AuditConfig::Level::metadata: o.level = audit::Level::metadata; break;
    case AuditConfig::Level::request: o.level = audit::Level::request; break;
  }
  o.file.path = config.audit.path.empty() ? config.state_dir + "/audit/audit.jsonl" : config.audit.path;
  o.file.max_size = config.audit.max_size;
  o.file.max_files = config.audit.max_files;
  o.file.keep_days = config.audit.keep_days;
  o.to_stdout = config.audit.to_stdout;
  o.product_version = std::string(version);
  o.scrub = std::move(scrub);
  o.account_of = std::move(account_of);
  return o;
}

}  // namespace agentbox::daemon
