#include "http/takeover_report.hpp"

#include <utility>

#include "util/log.hpp"

namespace agentbox::http {

namespace {

// What the observer reads of a takeover's request: its head (the body is the handler's to read).
Request head_copy(const Request& r) {
  Request h;
  h.method = r.method;
  h.target = r.target;
  h.path = r.path;
  h.path_params = r.path_params;
  h.query = r.query;
  h.headers = r.headers;
  h.listener_tag = r.listener_tag;
  h.remote_address = r.remote_address;
  h.local_address = r.local_address;
  h.scope = r.scope;
  return h;
}

}  // namespace

TakeoverReport::TakeoverReport(const Observer& observer, size_t route_index, std::string method, Credential credential,
                               const Request& head, std::chrono::steady_clock::time_point started) {
  if (!observer) return;
  state_ =
      std::make_unique<State>(State{observer, route_index, std::move(method), credential, head_copy(head), started});
}

void TakeoverReport::operator()(unsigned status) {
  if (state_) (*this)(status, Outcome{.credential = state_->credential});
}

void TakeoverReport::operator()(unsigned status, const Outcome& outcome) {
  if (!state_) return;
  const std::unique_ptr<State> s = std::move(state_);
  const auto took = std::chrono::steady_clock::now() - s->started;
  try {
    s->observer({s->route_index, s->method, status, took, outcome.credential, outcome.refused,
                 outcome.head ? outcome.head : &s->head, outcome.key_in_frame});
  } catch (const std::exception& e) {  // an observer must not end the connection it reports
    log::error("http", "takeover report failed: {}", e.what());
  }
}

}  // namespace agentbox::http
