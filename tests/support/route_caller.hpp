#pragma once
// Route handlers called directly, in memory: no listener, no socket, no session. A test builds a
// Router with one feature's routes (add_file_routes(router, services), ...), and RouteCaller
// routes a Request built by hand to its handler and gives back the Response:
//
//   sync handler      called; an exception it lets escape goes through the table's ErrorMap
//   async handler     called with a ResponseWriter whose session is a RecordingSession (below),
//                     which collects what the writer posts; call() waits (bounded) for the
//                     response to be complete, from whatever thread the handler answers on
//   takeover handler  not callable without a connection: the test fails
//
// What the session does before a handler runs is the session's and is tested with it
// (tests/unit/http_session_test.cpp, http_authorize_test.cpp): the key, CORS, body limits. Here
// a target the session would refuse (no route, another method, an invalid target) fails the
// test rather than imitating the session's answer. The ErrorMap is the router's, as the
// session's is: a test sets the daemon's (api::error_map, which register_routes sets) so a
// domain error's status is what a client sees.
//
// Runs on: the test's thread; the RecordingSession's post_* calls come from any thread.
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

#include "http/request.hpp"
#include "http/response.hpp"
#include "http/response_writer.hpp"
#include "http/router.hpp"
#include "http/session.hpp"
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

// The session an in-memory ResponseWriter posts to: it keeps what arrives and says when the
// response is complete.
class RecordingSession final : public http::AnySession {
 public:
  void begin_shutdown() override {}
  void force_close() override {}

  void post_send(http::Response response) override {
    std::lock_guard lock(mu_);
    reply_.status = response.status;
    reply_.headers = std::move(response.headers);
    reply_.body = std::move(response.body);
    finish_locked();
  }
  void post_chunked_head(http::Response head) override {
    std::lock_guard lock(mu_);
    reply_.status = head.status;
    reply_.headers = std::move(head.headers);
    reply_.chunked = true;
  }
  void post_chunk(std::string data) override {
    std::lock_guard lock(mu_);
    reply_.body += data;
  }
  void post_chunked_end() override {
    std::lock_guard lock(mu_);
    finish_locked();
  }
  void post_file(http::Response head, UniqueFd fd, std::uint64_t offset, std::uint64_t length) override {
    std::string bytes(length, '\0');
    std::uint64_t got = 0;
    while (got < length) {
      ssize_t n = ::pread(fd.get(), bytes.data() + got, length - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::uint64_t>(n);
    }
    EXPECT_EQ(got, length) << "the file held fewer bytes than the response announced";
    bytes.resize(got);
    std::lock_guard lock(mu_);
    reply_.status = head.status;
    reply_.headers = std::move(head.headers);
    reply_.body = std::move(bytes);
    finish_locked();
  }
  void post_abort() override {
    std::lock_guard lock(mu_);
    reply_.aborted = true;
    finish_locked();
  }

  // The reply once complete, or what arrived by the deadline (answered false).
  RouteReply wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    done_.wait_for(lock, timeout, [&] { return reply_.answered; });
    return reply_;
  }

 private:
  void finish_locked() {
    reply_.answered = true;
    done_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable done_;
  RouteReply reply_;
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
    auto target = http::parse_target(spec.target);
    if (!target) {
      ADD_FAILURE() << spec.target << ": the session refuses this target before any handler";
      return {};
    }
    req.path = std::move(target->path);
    req.query = std::move(target->query);
    auto match = router_.match(spec.method, target->segments);
    if (match.kind != http::RouteMatch::Kind::found) {
      ADD_FAILURE() << http::to_string(spec.method) << " " << spec.target << ": no such route in the table";
      return {};
    }
    req.path_params = std::move(match.params);
    req.body_size = spec.body.size();
    if (match.route->options.spool_body)
      req.body_file = spool(spec.body);
    else
      req.body = spec.body;
    const std::string context = std::string(http::to_string(spec.method)) + " " + req.path;

    const auto& handler = match.route->handler;
    if (const auto* sync = std::get_if<http::Handler>(&handler)) {
      http::Response response;
      try {
        response = (*sync)(req);
      } catch (...) {
        response = router_.error_map()(std::current_exception(), context);
      }
      return RouteReply{true, response.status, std::move(response.headers), std::move(response.body)};
    }
    if (const auto* async = std::get_if<http::AsyncHandler>(&handler)) {
      auto session = std::make_shared<RecordingSession>();
      auto writer = std::make_shared<http::ResponseWriter>(session, context, router_.error_map());
      std::weak_ptr<http::ResponseWriter> watch = writer;
      // Held through the call, as the session holds it: a handler that throws is answered
      // through it; one that drops it unanswered gets its 500 when this reference goes.
      try {
        (*async)(req, writer);
      } catch (...) {
        writer->fail(std::current_exception());
      }
      writer.reset();
      RouteReply reply = session->wait(timeout);
      // As the session does when the response is complete or the client gives up: whatever
      // still waits on the writer (a long-poll, a stream) is told the connection is gone.
      if (auto w = watch.lock()) w->notify_closed();
      return reply;
    }
    ADD_FAILURE() << spec.target << ": a takeover route needs a connection";
    return {};
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
