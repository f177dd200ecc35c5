#include "api/network.hpp"

#include "accounts/caller_routes.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "http/query_params.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

constexpr int64_t kDefaultEntries = 100;
constexpr int64_t kMaxEntries = 1000;

// count: the same refusal made that many times within a minute of time_ms, the last at
// last_time_ms (1 and time_ms for every other decision).
nlohmann::json entry_json(const NetworkDecision& d) {
  return {{"id", d.id},
          {"time_ms", d.ts_ms},
          {"kind", d.kind},
          {"host", d.host},
          {"port", d.port},
          {"address", d.address},
          {"allowed", d.allowed},
          {"reason", d.reason},
          {"bytes_up", d.bytes_up},
          {"bytes_down", d.bytes_down},
          {"count", d.count},
          {"last_time_ms", d.last_ms}};
}

}  // namespace

void add_network_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  const std::shared_ptr<NetworkLog>& log = s.network_log;
  // ?limit= (1-1000, default 100) newest first; ?before=ID pages back (the previous answer's
  // next_before). Lists once the decisions made before the request are stored: a box just
  // refused finds the refusal in its log.
  // Given its caller, resolved off the io thread when that is slow (accounts/caller_routes.hpp).
  router.add_async(http::verb::get, "/network/log",
                   accounts::with_reader(callers, [log](const Request& req, const accounts::Caller& caller,
                                                        std::shared_ptr<ResponseWriter> writer) {
                     int64_t limit = query_int(req, "limit", 1, kMaxEntries).value_or(kDefaultEntries);
                     std::optional<int64_t> before = query_int(req, "before", 1, INT64_MAX);
                     log->after_stored([log, box = caller.box, limit, before, writer] {
                       try {
                         std::vector<NetworkDecision> entries = log->list(box, static_cast<size_t>(limit), before);
                         nlohmann::json out = {{"entries", nlohmann::json::array()}, {"next_before", nullptr}};
                         for (const NetworkDecision& d : entries) out["entries"].push_back(entry_json(d));
                         if (static_cast<int64_t>(entries.size()) == limit) out["next_before"] = entries.back().id;
                         writer->send(Response::json(out));
                       } catch (...) {
                         writer->fail(std::current_exception());
                       }
                     });
                   }));
}

}  // namespace agentbox::api
