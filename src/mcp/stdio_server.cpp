#include "mcp/stdio_server.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <variant>

#include "http/response.hpp"
#include "mcp/jsonrpc.hpp"
#include "mcp/mcp_routes.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/log.hpp"

namespace agentbox::mcp {

using nlohmann::json;

// The output, shared with the answers still on their way: one message a line, whole lines only.
struct StdioServer::Output {
  std::mutex mu;
  std::condition_variable answered;
  int fd;
  bool open = true;  // false once the server is gone or the reader of the output has left
  int pending = 0;   // requests read and not yet answered

  explicit Output(int f) : fd(f) {}
  bool write(const json& message) {
    std::string line = http::dump_json(message);
    line += '\n';
    std::lock_guard lock(mu);
    if (!open) return false;
    try {
      write_all(fd, line);
    } catch (const Error& e) {
      log::warn("mcp", "stdout: {}: the client has gone", e.what());
      open = false;
    }
    return open;
  }
  void close() {
    std::lock_guard lock(mu);
    open = false;
  }
  void started() {
    std::lock_guard lock(mu);
    ++pending;
  }
  void reply(const json& message) {
    write(message);
    std::lock_guard lock(mu);
    --pending;
    answered.notify_all();
  }
  // Waits up to `for_at_most` for every request read to be answered; true when they are.
  bool drained(std::chrono::milliseconds for_at_most) {
    std::unique_lock lock(mu);
    return answered.wait_for(lock, for_at_most, [this] { return pending == 0; });
  }
};

StdioServer::StdioServer(std::shared_ptr<McpServer> server, CallerContext caller, int in, int out)
    : server_(std::move(server)), caller_(std::move(caller)), in_(in), out_(std::make_shared<Output>(out)) {}

StdioServer::~StdioServer() { out_->close(); }

void StdioServer::on_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.empty()) return;
  std::variant<Message, json> parsed = parse_message(line);
  if (const json* error = std::get_if<json>(&parsed)) {
    out_->write(*error);
    return;
  }
  const Message& msg = std::get<Message>(parsed);
  if (!msg.request()) return;  // a notification (initialized, cancelled) or a response: nothing to answer

  Exchange e;
  e.caller = caller_;
  e.open_stream = [] { return true; };
  e.notify = [out = out_](json message) { return out->write(message); };
  e.reply = [out = out_](json message) { out->reply(message); };
  out_->started();
  const RequestRevision revision = revision_of(http::Request{}, msg.params);
  if (revision.modern() || msg.method == "server/discover")
    answer_modern(server_, msg, revision, std::move(e));
  else
    answer_legacy(server_, msg, std::move(e));
}

bool StdioServer::serve(int stop_fd) {
  std::string buffer;
  bool skipping = false;  // the rest of a line over the limit
  char chunk[65536];
  for (;;) {
    pollfd p[2] = {{in_, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw sys_error("poll");
    }
    if (p[1].revents & POLLIN) return false;
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = ::read(in_, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      if (!skipping) on_line(buffer);  // a last message without its newline
      return drain(stop_fd);
    }
    std::string_view data(chunk, static_cast<size_t>(n));
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      const std::string_view piece = data.substr(0, nl);
      if (!skipping) buffer.append(piece);
      if (buffer.size() > kMessageLimit) {
        if (!skipping)
          out_->write(error_message(nullptr, kInvalidRequest,
                                    "Invalid Request: a message over " + std::to_string(kMessageLimit) + " bytes"));
        skipping = true;
        buffer.clear();
      }
      if (nl == std::string_view::npos) break;
      if (!skipping) on_line(buffer);
      skipping = false;
      buffer.clear();
      data.remove_prefix(nl + 1);
    }
  }
}

// End of input: a client that wrote its requests and closed its end (`... | agentbox mcp`) still
// gets every answer; a stop signal ends the wait.
bool StdioServer::drain(int stop_fd) {
  for (;;) {
    if (out_->drained(std::chrono::milliseconds(100))) return true;
    pollfd p{stop_fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) return false;
  }
}

}  // namespace agentbox::mcp
