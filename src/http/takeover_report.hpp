#pragma once
// A takeover route's one line in the HTTP observer (HttpServerOptions::on_request): the session
// hands the connection over before any answer, so the handler that answers reports it — 101 for
// an accepted upgrade, a proxied response's status once its head goes out, a refusal's status —
// and the metrics and the audit trail see takeovers as they see every other request.
// respond_and_close() reports on its own. Reports once; later calls do nothing. Default-built or
// moved-from: reports nothing.
//
// Runs on: whichever thread answers the connection (an io strand, the terminals' loop); one
// thread at a time, as the connection it belongs to.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "http/options.hpp"
#include "http/request.hpp"

namespace agentbox::http {

class TakeoverReport {
 public:
  using Observer = std::function<void(const CompletedRequest&)>;
  using Credential = CompletedRequest::Credential;

  TakeoverReport() = default;
  // head: the request as authorize() left it (its body is not read); copied.
  TakeoverReport(const Observer& observer, size_t route_index, std::string method, Credential credential,
                 const Request& head, std::chrono::steady_clock::time_point started);

  // The answer, with the credential found at the hand-over.
  void operator()(unsigned status);
  // How a takeover that authenticates itself (a WebSocket's auth frame) decided.
  struct Outcome {
    Credential credential = Credential::nothing;  // the credential it accepted
    bool refused = false;                         // it turned a key down (an Authentication failure)
    bool key_in_frame = false;                    // a key came, though not in an Authorization header
    const Request* head = nullptr;                // replaces the request (a user the frame's key named)
  };
  void operator()(unsigned status, const Outcome& outcome);

  bool pending() const { return state_ != nullptr; }

 private:
  struct State {
    Observer observer;
    size_t route_index;
    std::string method;
    Credential credential;
    Request head;
    std::chrono::steady_clock::time_point started;
  };
  std::unique_ptr<State> state_;  // null once reported
};

}  // namespace agentbox::http
