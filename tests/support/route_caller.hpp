#pragma once
// Route handlers called directly, in memory: no listener, no socket, no session. A test builds a
// Router with one feature's routes (add_file_routes(router, services), ...), and RouteCaller
// routes a Request built by hand to its handler and gives back the Response, through the
// daemon's own in-memory call (http/in_memory_call.hpp, which MCP's tool calls use):
//
//   sync handler      called; an exception it lets escape goes through the table's ErrorMap
//   async handler     called with a ResponseWriter whose session is an InMemorySession, which
//                     collects what the writer posts; call() waits (bounded) for the response
//                     to be complete, from whatever thread the handler answers on
//   takeover handler  not callable without a connection: the test fails
//
// What the session does before a handler runs is the session's and is tested with it
// (tests/unit/http_session_test.cpp, http_authorize_test.cpp): the key, CORS, body limits. Here
// a target the session would refuse (no route, another method, an invalid target) fails the
// test rather than imitating the session's answer. The ErrorMap is the router's, as the
// session's is: a test sets the daemon's (api::error_map, which register_routes sets) so a
// domain error's status is what a client sees.
//
// Runs on: the test's thread; the sessions' post_* calls come from any thread.
#include <gtest/gtest.h>

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "http/in_memory_call.hpp"
#include "http/request.hpp"
#include "http/response.hpp"
#include "http/router.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::testing {

namespace http = agentbox::http;

// What a route answered.
struct RouteReply {
  bool answered = false;  // false: no complete response within the wait (or the route was not called)
  http::status status = http::status::unknown;
  http::fields headers;
  std::string body;      // the whole body: a sent one, a file's bytes, or the chunks joined
  bool chunked = false;  // the body came as chunks (a stream)
  bool aborted = false;  // the writer cut the connection mid-stream

  unsigned code() const { return static_cast<unsigned>(status); }
  nlohmann::json js() const {
    auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) ADD_FAILURE() << "not JSON: " << body.substr(0, 200);
    return parsed;
  }
  // The {"detail": ...} of an error, "" when there is none.
  std::string detail() const {
    auto j = js();
    return j.is_object() && j.contains("detail") && j["detail"].is_string() ? j["detail"].get<std::string>() : "";
  }
};

inline RouteReply reply_of(http::InMemoryReply r) {
  return RouteReply{true,      r.response.status, std::move(r.response.headers), std::move(r.response.body),
                    r.chunked, r.aborted};
}

// An InMemorySession a test holds and waits on (a ResponseWriter's tests write to it directly).
class RecordingSession final : public http::InMemorySession {
 public:
  RecordingSession()
      : http::InMemorySession([this](http::InMemoryReply r) {
          std::lock_guard lock(recorded_mu_);
          recorded_ = reply_of(std::move(r));
          recorded_cv_.notify_all();
        }) {}

  // The reply once complete, or nothing (answered false) by the deadline.
  RouteReply wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(recorded_mu_);
    recorded_cv_.wait_for(lock, timeout, [&] { return recorded_.answered; });
    return recorded_;
  }

 private:
  std::mutex recorded_mu_;
  std::condition_variable recorded_cv_;
  RouteReply recorded_;
};

// A request as a test writes it: the target with its query, encoded as on the wire.
struct RouteRequest {
  http::verb method = http::verb::get;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

class RouteCaller {
 public:
  // spool_dir: where a spool_body route's body goes (an unlinked file, as the session makes it).
  explicit RouteCaller(http::Router router, std::string spool_dir = "/tmp")
      : router_(std::move(router)), spool_dir_(std::move(spool_dir)) {}

  http::Router& router() { return router_; }

  // Routes req to its handler and returns its response; an async one is awaited up to `timeout`.
  RouteReply call(const RouteRequest& spec, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    http::Request req;
    req.method = spec.method;
    req.target = spec.target;
    for (const auto& [name, value] : spec.headers) req.headers.insert(name, value);
    req.remote_address = "192.0.2.7:40000";  // documentation addresses: nothing real
    req.local_address = "192.0.2.1:8000";
    std::string why;
    const http::Route* route = http::route_in_memory(router_, req, &why);
    if (!route) {
      ADD_FAILURE() << http::to_string(spec.method) << " " << spec.target << ": " << why
                    << " (the session refuses it before any handler)";
      return {};
    }
    if (std::holds_alternative<http::TakeoverHandler>(route->handler)) {
      ADD_FAILURE() << spec.target << ": a takeover route needs a connection";
      return {};
    }
    req.body_size = spec.body.size();
    if (route->options.spool_body)
      req.body_file = spool(spec.body);
    else
      req.body = spec.body;
    const std::string context = std::string(http::to_string(spec.method)) + " " + req.path;

    struct Waiting {
      std::mutex mu;
      std::condition_variable cv;
      RouteReply reply;
    };
    auto waiting = std::make_shared<Waiting>();  // outlives a handler that answers after the wait
    auto call = http::call_in_memory(router_, *route, req, context, [waiting](http::InMemoryReply r) {
      std::lock_guard lock(waiting->mu);
      waiting->reply = reply_of(std::move(r));
      waiting->cv.notify_all();
    });
    bool answered;
    {
      std::unique_lock lock(waiting->mu);
      answered = waiting->cv.wait_for(lock, timeout, [&] { return waiting->reply.answered; });
    }
    // As the session does when the response is complete or the client gives up: whatever
    // still waits on the writer (a long-poll, a stream) is told the connection is gone. Not
    // answered in time: what had arrived, answered false.
    call.hang_up();
    std::lock_guard lock(waiting->mu);
    RouteReply reply = waiting->reply;
    if (!answered) reply.answered = reply.aborted = false;
    return reply;
  }

  RouteReply get(const std::string& target, std::vector<std::pair<std::string, std::string>> headers = {}) {
    return call({http::verb::get, target, std::move(headers), {}});
  }
  RouteReply post(const std::string& target, std::string body,
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
    headers.emplace_back("Content-Type", "application/json");
    return call({http::verb::post, target, std::move(headers), std::move(body)});
  }
  RouteReply del(const std::string& target, std::vector<std::pair<std::string, std::string>> headers = {}) {
    return call({http::verb::delete_, target, std::move(headers), {}});
  }

 private:
  UniqueFd spool(const std::string& body) {
    UniqueFd file(::open(spool_dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!file) {
      ADD_FAILURE() << "open(O_TMPFILE in " << spool_dir_ << "): " << std::strerror(errno);
      return file;
    }
    for (size_t done = 0; done < body.size();) {
      ssize_t n = ::write(file.get(), body.data() + done, body.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ADD_FAILURE() << "writing the spooled body: " << std::strerror(errno);
        break;
      }
      done += static_cast<size_t>(n);
    }
    ::lseek(file.get(), 0, SEEK_SET);
    return file;
  }

  http::Router router_;
  std::string spool_dir_;
};

}  // namespace agentbox::testing
