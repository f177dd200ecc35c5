#include "mcp/route_call.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "http/session.hpp"

namespace agentbox::mcp {

namespace {

using nlohmann::json;

// The session an in-memory ResponseWriter posts to: collects the response, hands it on once.
class Collector final : public http::AnySession {
 public:
  // Keeps itself alive until the response is complete: the writer holds it only weakly, and a
  // writer dropped unfinished still answers (500), so finish() always runs.
  static std::shared_ptr<Collector> make(RouteDone done) {
    auto c = std::make_shared<Collector>(std::move(done));
    c->self_ = c;
    return c;
  }
  explicit Collector(RouteDone done) : done_(std::move(done)) {}

  void begin_shutdown() override {}
  void force_close() override {}
  void post_send(http::Response response) override { finish(std::move(response)); }
  void post_chunked_head(http::Response head) override {
    std::lock_guard lock(mu_);
    head_ = std::move(head);
  }
  void post_chunk(std::string data) override {
    std::lock_guard lock(mu_);
    head_.body += data;
  }
  void post_chunked_end() override {
    http::Response r;
    {
      std::lock_guard lock(mu_);
      r = std::move(head_);
    }
    finish(std::move(r));
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
    bytes.resize(got);
    head.body = std::move(bytes);
    finish(std::move(head));
  }
  void post_abort() override {
    finish(http::error_response(http::status::internal_server_error, "The operation was cut short"));
  }

 private:
  void finish(http::Response r) {
    RouteDone done;
    std::shared_ptr<Collector> self;  // released as this returns
    {
      std::lock_guard lock(mu_);
      done = std::move(done_);
      done_ = nullptr;
      self = std::move(self_);
    }
    if (done) done(std::move(r));
  }
  std::mutex mu_;
  std::shared_ptr<Collector> self_;
  RouteDone done_;
  http::Response head_;
};

// RFC 3986 unreserved characters stay, everything else is %XX.
std::string encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string text_of(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// The request target ("/execute/abc/status?wait=5") the arguments make.
std::string target_of(const Tool& tool, const json& args) {
  std::string path = tool.pattern;
  for (const std::string& name : tool.path_args) {
    std::string key = "{" + name + "}";
    auto at = path.find(key);
    std::string value = args.contains(name) ? text_of(args[name]) : "";
    if (at != std::string::npos) path.replace(at, key.size(), encode(value));
  }
  std::string query;
  auto add = [&](const std::string& name, const json& value) {
    query += query.empty() ? '?' : '&';
    query += encode(name) + "=" + encode(text_of(value));
  };
  for (const std::string& name : tool.query_args) {
    if (!args.contains(name) || args[name].is_null()) continue;
    if (args[name].is_array())
      for (const json& item : args[name]) add(name, item);
    else
      add(name, args[name]);
  }
  return path + query;
}

}  // namespace

CallerContext context_of(const http::Request& outer) {
  CallerContext c;
  for (const auto& field : outer.headers) {
    auto name = field.name();
    if (name == http::field::content_length || name == http::field::content_type || name == http::field::accept ||
        name == http::field::transfer_encoding)
      continue;
    c.headers.insert(field.name_string(), field.value());
  }
  c.listener_tag = outer.listener_tag;
  c.remote_address = outer.remote_address;
  c.local_address = outer.local_address;
  return c;
}

void call_route(const http::Router& router, const Tool& tool, const json& arguments, const CallerContext& caller,
                RouteDone done) {
  http::Request req;
  req.method = tool.method;
  req.target = target_of(tool, arguments);
  auto parsed = http::parse_target(req.target);
  if (!parsed) {
    done(http::error_response(http::status::unprocessable_entity, "Invalid arguments"));
    return;
  }
  auto match = router.match(tool.method, parsed->segments);
  if (match.kind != http::RouteMatch::Kind::found) {
    done(http::error_response(http::status::not_found, "No such operation: " + tool.name));
    return;
  }
  req.path = parsed->path;
  req.query = std::move(parsed->query);
  req.path_params = std::move(match.params);
  // Who is calling and in which chat: the MCP request's own headers (the key was checked on it).
  req.headers = caller.headers;
  if (!tool.body_args.empty()) {
    json body = json::object();
    for (const std::string& name : tool.body_args)
      if (arguments.contains(name)) body[name] = arguments[name];
    req.body = http::dump_json(body);
    req.body_size = req.body.size();
    req.headers.set(http::field::content_type, "application/json");
  }
  req.listener_tag = caller.listener_tag;
  req.remote_address = caller.remote_address;
  req.local_address = caller.local_address;

  const std::string context = "MCP " + tool.name;
  struct Visitor {
    const http::Router& router;
    const http::Request& req;
    const std::string& context;
    RouteDone& done;
    void operator()(const http::Handler& handler) {
      http::Response r;
      try {
        r = handler(req);
      } catch (...) {
        r = router.error_map()(std::current_exception(), context);
      }
      done(std::move(r));
    }
    void operator()(const http::AsyncHandler& handler) {
      auto session = Collector::make(std::move(done));
      auto writer = std::make_shared<http::ResponseWriter>(session, context, router.error_map());
      try {
        handler(req, writer);
      } catch (...) {
        writer->fail(std::current_exception());
      }
    }
    void operator()(const http::TakeoverHandler&) {
      done(http::error_response(http::status::not_found, "Not a tool: " + context));
    }
  };
  std::visit(Visitor{router, req, context, done}, match.route->handler);
}

}  // namespace agentbox::mcp
