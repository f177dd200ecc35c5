#include "daemon/metrics_page.hpp"

#include <sys/statvfs.h>

#include "accounts/account_forgetting.hpp"
#include "audit/trail.hpp"
#include "metrics/events.hpp"
#include "metrics/exposition.hpp"
#include "metrics/process_stats.hpp"

namespace agentbox::daemon {

namespace {

using metrics::Exposition;

double load(const std::atomic<std::uint64_t>& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); }
double load(const std::atomic<std::int64_t>& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); }

void one(Exposition& out, std::string_view name, std::string_view type, std::string_view help, double value) {
  out.family(name, type, help);
  out.sample(name, value);
}

void write_http_layer(Exposition& out, const http::HttpCounters& c) {
  // Connections and the requests turned away before a route ran, by the limit that did it.
  one(out, "agentbox_http_connections_total", "counter", "TCP connections accepted by the API.",
      load(c.connections_accepted));
  out.family("agentbox_http_limit_events_total", "counter",
             "Connections and requests turned away or closed by the HTTP layer's limits, by event.");
  for (const http::HttpCounterName& n : http::kHttpCounterNames) {
    if (n.name == "connections_accepted" || n.name == "requests") continue;
    out.sample("agentbox_http_limit_events_total", load(c.*n.member), {{"event", n.name}});
  }
}

void write_boxes(Exposition& out, BoxManager& boxes) {
  const metrics::Events& m = metrics::events();
  one(out, "agentbox_boxes_starting", "gauge", "Boxes whose start is under way.", load(m.boxes_starting));
  one(out, "agentbox_boxes_running", "gauge", "Boxes started and serving.", load(m.boxes_running));
  one(out, "agentbox_boxes_held", "gauge", "Boxes starting, running or stopping.",
      static_cast<double>(boxes.running()));
  one(out, "agentbox_boxes_started_total", "counter", "Box starts that ended in a running box.", load(m.boxes_started));
  out.family("agentbox_box_start_failures_total", "counter",
             "Box starts that did not end in a running box, by reason (launch, init, timeout, protocol, stopped).");
  for (size_t i = 0; i < metrics::kStartFailureNames.size(); ++i)
    out.sample("agentbox_box_start_failures_total", load(m.box_start_failures[i]),
               {{"reason", metrics::kStartFailureNames[i]}});
  one(out, "agentbox_box_commands_running", "gauge",
      "Commands running in boxes: processes of /execute, terminals' shells, agent CLIs, notebook kernels.",
      load(m.box_commands_running));
  out.family("agentbox_box_start_duration_seconds", "histogram",
             "Seconds from a box's launch to its init reporting ready.");
  m.box_start_seconds.write(out, "agentbox_box_start_duration_seconds", {});
}

void write_network(Exposition& out) {
  const metrics::Events& m = metrics::events();
  out.family("agentbox_egress_decisions_total", "counter",
             "Connections boxes asked the egress proxy for, by verdict (allowed, denied).");
  out.sample("agentbox_egress_decisions_total", load(m.egress_allowed), {{"verdict", "allowed"}});
  out.sample("agentbox_egress_decisions_total", load(m.egress_denied), {{"verdict", "denied"}});
  out.family("agentbox_egress_tunnelled_bytes_total", "counter",
             "Bytes relayed by the egress proxy, by direction (up: box to destination).");
  out.sample("agentbox_egress_tunnelled_bytes_total", load(m.egress_bytes_up), {{"direction", "up"}});
  out.sample("agentbox_egress_tunnelled_bytes_total", load(m.egress_bytes_down), {{"direction", "down"}});
  out.family("agentbox_gateway_requests_total", "counter",
             "Requests boxes made to the model gateway, by verdict (allowed, denied).");
  out.sample("agentbox_gateway_requests_total", load(m.gateway_allowed), {{"verdict", "allowed"}});
  out.sample("agentbox_gateway_requests_total", load(m.gateway_denied), {{"verdict", "denied"}});
  out.family("agentbox_gateway_upstream_responses_total", "counter",
             "Answers of the model upstream relayed by the gateway, by status class.");
  constexpr std::string_view kClasses[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
  for (size_t i = 0; i < 5; ++i)
    out.sample("agentbox_gateway_upstream_responses_total", load(m.gateway_upstream_status[i]),
               {{"class", kClasses[i]}});
  out.family("agentbox_gateway_tokens_total", "counter", "Model tokens the upstream reported, by kind.");
  for (size_t i = 0; i < metrics::kTokenKinds.size(); ++i)
    out.sample("agentbox_gateway_tokens_total", load(m.gateway_tokens[i]), {{"kind", metrics::kTokenKinds[i]}});
}

void write_mirror(Exposition& out, backup::MirrorService& mirror) {
  const nlohmann::json status = mirror.status();
  const nlohmann::json& last = status["last_pass"];
  if (!last.is_object() || !last.contains("ended")) return;  // no pass yet: no sample
  one(out, "agentbox_mirror_last_pass_end_timestamp_seconds", "gauge", "When the mirror's last pass ended (unix).",
      last.value("ended", 0.0));
  one(out, "agentbox_mirror_last_pass_duration_seconds", "gauge", "How long the mirror's last pass took.",
      last.value("ended", 0.0) - last.value("started", 0.0));
  one(out, "agentbox_mirror_last_pass_errors", "gauge", "Files the mirror's last pass could not copy.",
      last.value("errors", 0.0));
  one(out, "agentbox_mirror_last_pass_copied_bytes", "gauge", "Bytes the mirror's last pass copied.",
      last.value("bytes_copied", 0.0));
}

// The audit trail's writer (audit/trail.hpp): what it wrote, what it dropped, whether it writes.
void write_audit(Exposition& out) {
  const audit::TrailStats& a = audit::stats();
  out.family("agentbox_audit_events_total", "counter", "Audit events written, by OCSF class.");
  for (size_t i = 0; i < audit::kClassCount; ++i)
    out.sample("agentbox_audit_events_total", load(a.events[i]), {{"class", audit::kClassNames[i]}});
  out.family("agentbox_audit_dropped_total", "counter",
             "Audit events not written, by reason (queue_full, write_error: the disk refused).");
  for (size_t i = 0; i < std::size(audit::kDropReasons); ++i)
    out.sample("agentbox_audit_dropped_total", load(a.dropped[i]), {{"reason", audit::kDropReasons[i]}});
  one(out, "agentbox_audit_writing", "gauge", "1 while the audit trail is on and its last write succeeded, else 0.",
      a.writing.load(std::memory_order_relaxed) ? 1 : 0);
}

// The state directory's filesystem, where the volumes are sparse images: once it is full, a box's
// write that needs a new block of its image fails below ext4, which then stops its journal and
// keeps the volume read-only (what was not yet written is lost). The alert to set is on this.
void write_state_filesystem(Exposition& out, const std::string& dir) {
  struct statvfs st {};
  if (dir.empty() || ::statvfs(dir.c_str(), &st) != 0) return;  // no sample rather than a false 0
  const double block = static_cast<double>(st.f_frsize);
  one(out, "agentbox_state_filesystem_size_bytes", "gauge",
      "Size of the filesystem holding the state directory (SQLite, the account volumes' images).",
      static_cast<double>(st.f_blocks) * block);
  one(out, "agentbox_state_filesystem_avail_bytes", "gauge",
      "Bytes of the state directory's filesystem the daemon may still use.", static_cast<double>(st.f_bavail) * block);
}

}  // namespace

std::string metrics_page(const MetricsSources& s) {
  Exposition out;
  out.family("agentbox_build_info", "gauge", "The daemon's version; always 1.");
  out.sample("agentbox_build_info", 1, {{"version", s.version}});
  if (s.http) s.http->write(out);
  if (const http::HttpCounters* c = s.http_counters ? s.http_counters() : nullptr) write_http_layer(out, *c);
  if (s.boxes) write_boxes(out, *s.boxes);
  if (s.terminals)
    one(out, "agentbox_terminals_open", "gauge", "Terminals open (all accounts).",
        static_cast<double>(s.terminals->count()));
  if (s.accounts)
    one(out, "agentbox_accounts_known", "gauge", "Accounts in the store.", static_cast<double>(s.accounts->count()));
  if (s.boxes)
    one(out, "agentbox_accounts_active", "gauge", "Accounts with a box or a network namespace held now.",
        static_cast<double>(s.boxes->accounts_held()));
  if (s.file_pool) {
    out.family("agentbox_pool_queued_jobs", "gauge", "Jobs waiting for a thread of a pool, by pool.");
    out.sample("agentbox_pool_queued_jobs", static_cast<double>(s.file_pool->queued()), {{"pool", "files"}});
  }
  write_network(out);
  const metrics::Events& m = metrics::events();
  one(out, "agentbox_moves_activated_total", "counter", "Accounts moved here from another node and activated.",
      load(m.moves_activated));
  one(out, "agentbox_restores_total", "counter", "Restores from the mirror (a path, or an account by --all).",
      load(m.restores));
  out.family("agentbox_account_admission_refusals_total", "counter",
             "New users refused an account, by limit (rate, max_accounts, uid_range).");
  for (size_t i = 0; i < metrics::kAdmissionRefusalNames.size(); ++i)
    out.sample("agentbox_account_admission_refusals_total", load(m.account_admission_refusals[i]),
               {{"reason", metrics::kAdmissionRefusalNames[i]}});
  one(out, "agentbox_volumes_attached", "gauge", "Account volumes attached (mounted, a loop device each) now.",
      load(m.volumes_attached));
  one(out, "agentbox_volume_attaches_total", "counter", "Account volumes attached for a use.", load(m.volume_attaches));
  one(out, "agentbox_volume_detaches_total", "counter",
      "Account volumes detached: idle, over [accounts] attached, or let go (account deleted).",
      load(m.volume_detaches));
  one(out, "agentbox_accounts_forgotten_total", "counter",
      "Empty volumes of accounts not seen for [accounts] forget_after_days, deleted (the accounts stay).",
      static_cast<double>(accounts::accounts_forgotten_total()));
  if (s.mirror) write_mirror(out, *s.mirror);
  write_audit(out);
  write_state_filesystem(out, s.state_dir);
  metrics::write_process_stats(out);
  return out.take();
}

}  // namespace agentbox::daemon
