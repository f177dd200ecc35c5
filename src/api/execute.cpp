#include "api/execute.hpp"

#include <charconv>
#include <csignal>
#include <filesystem>

#include "accounts/caller_routes.hpp"
#include "accounts/user_id.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "box/box_error.hpp"
#include "exec/input_escapes.hpp"
#include "fs/dir_list.hpp"
#include "fs/fs_error.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/query_params.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
using accounts::Caller;
using accounts::with_caller;
using accounts::with_reader;

namespace {

using nlohmann::json;
using std::chrono::steady_clock;

constexpr double kMaxWaitSeconds = 300;
constexpr double kMaxTimeoutSeconds = 24 * 3600;
constexpr int64_t kMaxOffset = INT64_MAX;
// Command plus environment travel to the box in one message (box/protocol.hpp, 256 KiB), and
// the kernel refuses any single argument over 128 KiB anyway.
constexpr size_t kMaxCommandBytes = 128 * 1024;
constexpr size_t kMaxEnvBytes = 128 * 1024;

[[noreturn]] void process_not_found() { throw HttpError(http::status::not_found, "Process not found"); }

std::string status_name(ProcessStatus s) { return std::string(to_string(s)); }

// The body of POST /execute, checked field by field (unknown fields are ignored).
struct ExecBody {
  std::string command;
  std::optional<std::string> cwd;
  std::map<std::string, std::string> env;
  std::optional<double> timeout;
  bool pty = true;
  std::optional<std::string> stdin_data;
};

ExecBody parse_exec_body(const Request& req) {
  json body = parse_json_object(req);
  ExecBody out;
  out.command = required_string(body, "command");
  if (out.command.empty()) unprocessable("Field 'command' must not be empty");
  if (out.command.find('\0') != std::string::npos)
    throw HttpError(http::status::bad_request, "Field 'command' contains a NUL byte");
  if (out.command.size() > kMaxCommandBytes)
    throw HttpError(http::status::payload_too_large,
                    "Field 'command' is " + std::to_string(out.command.size()) +
                        " bytes; the limit is 131072 (write a script file and run that)");
  out.cwd = optional_string(body, "cwd");
  out.stdin_data = optional_string(body, "stdin");
  if (auto it = body.find("env"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) unprocessable("Field 'env' must be an object of strings");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) unprocessable("Field 'env': value of '" + k + "' must be a string");
      std::string value = v.get<std::string>();
      if (k.empty() || k.find_first_of("=") != std::string::npos || k.find('\0') != std::string::npos ||
          value.find('\0') != std::string::npos)
        unprocessable("Field 'env': '" + k + "' is not a valid variable");
      out.env[k] = std::move(value);
    }
    size_t env_bytes = 0;
    for (const auto& [k, v] : out.env) env_bytes += k.size() + v.size() + 2;
    if (env_bytes > kMaxEnvBytes)
      throw HttpError(http::status::payload_too_large,
                      "Field 'env' is " + std::to_string(env_bytes) + " bytes; the limit is 131072");
  }
  if (auto it = body.find("timeout"); it != body.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() <= 0 || it->get<double>() > kMaxTimeoutSeconds)
      unprocessable("Field 'timeout' must be a number of seconds above 0 and at most 86400");
    out.timeout = it->get<double>();
  }
  if (auto it = body.find("pty"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) unprocessable("Field 'pty' must be a boolean");
    out.pty = it->get<bool>();
  }
  return out;
}

exec::ReadSpec read_spec(const Request& req, uint64_t default_offset = 0) {
  exec::ReadSpec read;
  read.offset =
      static_cast<uint64_t>(query_int(req, "offset", 0, kMaxOffset).value_or(static_cast<int64_t>(default_offset)));
  if (auto tail = query_int(req, "tail", 1, 1'000'000)) read.tail_lines = static_cast<uint64_t>(*tail);
  return read;
}

// The offset a reconnecting EventSource sends back: an id this stream gave, so only digits, as
// the offset query takes them (stoull read "-1" as 2^64-1 and " 12abc" as 12).
uint64_t last_event_offset(std::string_view value) {
  uint64_t offset = 0;
  const char* end = value.data() + value.size();
  auto [stop, ec] = std::from_chars(value.data(), end, offset);
  if (value.empty() || value.front() < '0' || value.front() > '9' || ec != std::errc() || stop != end ||
      offset > static_cast<uint64_t>(kMaxOffset))
    throw HttpError(
        http::status::bad_request,
        "Last-Event-ID must be an offset this stream sent: a whole number from 0 to " + std::to_string(kMaxOffset));
  return offset;
}

std::chrono::milliseconds wait_of(const Request& req) {
  double s = query_number(req, "wait", 0, kMaxWaitSeconds).value_or(0);
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// Answers through writer with the view, or 404 when the process is gone.
void answer(const std::shared_ptr<ResponseWriter>& writer, const std::optional<exec::ProcessView>& view) {
  if (!view) {
    writer->send(error_response(http::status::not_found, "Process not found"));
    return;
  }
  writer->send(Response::json(process_json(*view)));
}

// Long-poll helper: answers now when there is nothing to wait for, else when the table says.
void wait_and_answer(exec::ProcessTable& table, const std::string& account, const std::string& id,
                     const exec::ReadSpec& read, bool until_output, std::chrono::milliseconds wait,
                     const std::shared_ptr<ResponseWriter>& writer) {
  if (wait.count() == 0) {
    answer(writer, table.get(account, id, read));
    return;
  }
  auto handle = table.wait(account, id, read, until_output, steady_clock::now() + wait,
                           [writer](std::optional<exec::ProcessView> view) { answer(writer, view); });
  writer->on_close([handle] { handle->cancel(); });
}

std::string sse_event(std::string_view event, const json& data, std::optional<uint64_t> id) {
  std::string out;
  if (id) out += "id: " + std::to_string(*id) + "\n";
  out += "event: ";
  out += event;
  out += "\ndata: ";
  out += dump_json(data);
  out += "\n\n";
  return out;
}

// One SSE connection: long-polls the table until the process finishes or the client leaves.
class OutputStream : public std::enable_shared_from_this<OutputStream> {
 public:
  OutputStream(exec::ProcessTable& table, std::string account, std::string id, uint64_t offset,
               std::chrono::seconds keepalive, std::shared_ptr<ResponseWriter> writer)
      : table_(table),
        account_(std::move(account)),
        id_(std::move(id)),
        offset_(offset),
        keepalive_(keepalive),
        writer_(std::move(writer)) {}

  void next() {
    auto self = shared_from_this();
    exec::ReadSpec read;
    read.offset = offset_;
    auto handle = table_.wait(account_, id_, read, /*until_output=*/true, steady_clock::now() + keepalive_,
                              [self](std::optional<exec::ProcessView> view) { self->on_view(view); });
    std::lock_guard lock(mu_);
    handle_ = handle;
  }

  void cancel() {
    std::lock_guard lock(mu_);
    if (handle_) handle_->cancel();
  }

 private:
  void on_view(const std::optional<exec::ProcessView>& view) {
    if (!view) {
      writer_->write_chunk(sse_event("error", {{"detail", "Process not found"}}, std::nullopt));
      writer_->end_chunked();
      return;
    }
    std::string out;
    if (view->truncated) out += sse_event("truncated", {{"offset", offset_}}, std::nullopt);
    for (size_t i = 0; i < view->output.size(); ++i) {
      const auto& chunk = view->output[i];
      // The last event of a batch carries the offset to resume from (Last-Event-ID).
      bool last = i + 1 == view->output.size();
      out += sse_event("output", {{"type", chunk.type}, {"data", chunk.data}},
                       last ? std::optional<uint64_t>(view->next_offset) : std::nullopt);
    }
    offset_ = view->next_offset;
    bool finished = view->status != ProcessStatus::running;
    if (finished && !view->output.empty()) {
      // More may remain past max_bytes: keep reading before the exit event.
      if (!writer_->write_chunk(std::move(out))) return;
      next();
      return;
    }
    if (finished) {
      out += sse_event("exit",
                       {{"status", status_name(view->status)},
                        {"exit_code", view->exit_code ? json(*view->exit_code) : json(nullptr)},
                        {"next_offset", view->next_offset}},
                       std::nullopt);
      writer_->write_chunk(std::move(out));
      writer_->end_chunked();
      return;
    }
    if (out.empty()) out = ": keepalive\n\n";
    if (!writer_->write_chunk(std::move(out))) return;
    next();
  }

  exec::ProcessTable& table_;
  std::string account_, id_;
  uint64_t offset_;
  std::chrono::seconds keepalive_;
  std::shared_ptr<ResponseWriter> writer_;
  std::mutex mu_;
  std::shared_ptr<exec::ProcessTable::Wait> handle_;
};

// ---------------------------------------------------------------- requests checked first
//
// Every route that takes input checks all of it before its caller is resolved: a malformed
// request is answered (400, 413, 422) without making an account, a volume or a box for it. A
// request naming no user is still a 400 for that first, as before.

using Writer = std::shared_ptr<ResponseWriter>;

// POST /execute: the command, how long to wait for it and what of its output to answer with.
struct StartCheck {
  ExecBody body;
  std::chrono::milliseconds wait;
  exec::ReadSpec read;
};
StartCheck check_start(const Request& req) {
  StartCheck c{parse_exec_body(req), wait_of(req), read_spec(req)};  // in this order (braces)
  c.read.offset = 0;
  return c;
}

// GET /execute/{id}/status. With an explicit offset a poll also ends when new output arrives
// (paging a live log); without one it waits for the end, as Open Terminal's does.
struct PollCheck {
  std::string id;
  exec::ReadSpec read;
  bool until_output;
  std::chrono::milliseconds wait;
};
PollCheck check_poll(const Request& req) {
  return {req.param("id"), read_spec(req), req.query_param("offset").has_value(), wait_of(req)};
}

// POST /execute/{id}/input: the input with its escapes decoded.
struct InputCheck {
  std::string id;
  std::string input;
};
InputCheck check_input(const Request& req) {
  json body = parse_json_object(req);
  return {req.param("id"), exec::decode_input_escapes(required_string(body, "input"))};
}

Response answer_input(exec::InputResult result) {
  switch (result) {
    case exec::InputResult::ok: return Response::json({{"status", "ok"}});
    case exec::InputResult::not_found: process_not_found();
    case exec::InputResult::exited: throw HttpError(http::status::bad_request, "Process has already exited");
    case exec::InputResult::closed: throw HttpError(http::status::bad_request, "Process stdin is closed");
  }
  process_not_found();
}

// DELETE /execute/{id}?force=
struct KillCheck {
  std::string id;
  bool force;
};
KillCheck check_kill(const Request& req) { return {req.param("id"), query_bool(req, "force").value_or(false)}; }

// GET /execute/{id}/stream: where to resume, from the offset query or else Last-Event-ID.
struct StreamCheck {
  std::string id;
  uint64_t offset;
};
StreamCheck check_stream(const Request& req) {
  uint64_t offset = read_spec(req).offset;
  if (auto last = req.header("Last-Event-ID"); last && !req.query_param("offset")) offset = last_event_offset(*last);
  return {req.param("id"), offset};
}

// The route's handler: the user named (user_id_of), the request checked (check), then the
// caller resolved (with_caller) and handed with what was checked to act. The routes on a process
// only read: an account with no volume has started none, and gets no volume to say so.
template <class Checked, class Act>
AsyncHandler checked_first(accounts::AccountDirectory& callers, Checked (*check)(const Request&), Act act,
                           accounts::HomeUse use = accounts::HomeUse::read) {
  return [&callers, check, act, use](const Request& req, Writer writer) {
    accounts::user_id_of(req);  // throws the 400 of a request naming no user
    auto checked = std::make_shared<Checked>(check(req));
    auto resolved = with_caller(callers,
                                accounts::CallerAsyncHandler([checked, act](const Request&, const Caller& caller,
                                                                            Writer w) { act(caller, *checked, w); }),
                                false, use);
    resolved(req, std::move(writer));
  };
}

}  // namespace

json process_json(const exec::ProcessView& view) {
  json output = json::array();
  for (const auto& chunk : view.output) output.push_back({{"type", chunk.type}, {"data", chunk.data}});
  return {{"id", view.id},
          {"command", view.command},
          {"status", status_name(view.status)},
          {"exit_code", view.exit_code ? json(*view.exit_code) : json(nullptr)},
          {"output", std::move(output)},
          // Says the answer is not all the output so far: some was dropped, or more follows
          // from next_offset (a client must never take a page for the whole).
          {"truncated", view.truncated || view.more},
          {"next_offset", view.next_offset}};
}

void add_execute_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  // Reached only by requests found valid: pointers, so a test of the checks needs no table.
  exec::AccountBoxes* boxes = s.boxes;
  exec::ProcessTable* table = s.processes;
  const ExecuteRoutesOptions options = s.execute_options;
  // Each handler is given its caller, resolved off the io thread when that is slow
  // (accounts/caller_routes.hpp); those with a request to check check it before that.
  router.add_async(http::verb::get, "/execute", with_reader(callers, [table](const Request&, const Caller& caller) {
                     json list = json::array();
                     // The chat's when the request names one, else all of the account's.
                     for (const auto& p : table->list(caller.box, caller.session_id))
                       list.push_back({{"id", p.id},
                                       {"command", p.command},
                                       {"status", status_name(p.status)},
                                       {"exit_code", p.exit_code ? json(*p.exit_code) : json(nullptr)}});
                     return Response::json(list);
                   }));

  router.add_async(http::verb::post, "/execute",
                   checked_first(
                       callers, check_start,
                       [boxes, table](const Caller& caller, StartCheck& checked, const Writer& writer) {
                         ExecBody& body = checked.body;
                         HomePath cwd = caller.home->path(body.cwd.value_or(""), caller.cwd);
                         if (!is_directory(*caller.home, cwd))
                           throw FsError(FsErrorKind::not_found, "Directory not found: " + cwd.shown);

                         exec::StartRequest start;
                         start.box = boxes->spec_for(caller.account, caller.place());
                         start.command = body.command;
                         start.chat = caller.session_id;
                         start.spawn = exec::shell_spawn_request(
                             start.box, {body.command, cwd.shown, std::move(body.env), body.pty});
                         start.stdin_data = std::move(body.stdin_data);
                         if (body.timeout)
                           start.timeout = std::chrono::milliseconds(static_cast<int64_t>(*body.timeout * 1000));
                         // The box answers on the loop; the request waits there, holding no thread.
                         table->start(std::move(start), [table, account = caller.box, read = checked.read,
                                                         wait = checked.wait, writer](exec::StartOutcome started) {
                           if (started.error) {
                             writer->send(error_response_for(started.error, "POST /execute", "Command"));
                             return;
                           }
                           wait_and_answer(*table, account, started.id, read, /*until_output=*/false, wait, writer);
                         });
                       },
                       accounts::HomeUse::write));

  router.add_async(
      http::verb::get, "/execute/{id}/status",
      checked_first(callers, check_poll, [table](const Caller& caller, PollCheck& checked, const Writer& writer) {
        wait_and_answer(*table, caller.box, checked.id, checked.read, checked.until_output, checked.wait, writer);
      }));

  router.add_async(
      http::verb::post, "/execute/{id}/input",
      checked_first(callers, check_input, [table](const Caller& caller, InputCheck& checked, const Writer& writer) {
        writer->send(answer_input(table->input(caller.box, checked.id, std::move(checked.input))));
      }));

  router.add_async(
      http::verb::delete_, "/execute/{id}",
      checked_first(callers, check_kill, [table](const Caller& caller, KillCheck& checked, const Writer& writer) {
        table->kill(caller.box, checked.id, checked.force, [writer](bool found) {
          if (!found) {
            writer->send(error_response(http::status::not_found, "Process not found"));
            return;
          }
          writer->send(Response::json({{"status", "killed"}}));
        });
      }));

  router.add_async(
      http::verb::get, "/execute/{id}/stream",
      checked_first(callers, check_stream,
                    [table, options](const Caller& caller, StreamCheck& checked, const Writer& writer) {
                      if (!table->get(caller.box, checked.id, exec::ReadSpec{checked.offset, std::nullopt, 0}))
                        process_not_found();
                      Response head;
                      head.headers.set(http::field::content_type, "text/event-stream");
                      head.headers.set(http::field::cache_control, "no-cache");
                      if (!writer->begin_chunked(std::move(head))) return;
                      auto stream = std::make_shared<OutputStream>(*table, caller.box, checked.id, checked.offset,
                                                                   options.stream_keepalive, writer);
                      writer->on_close([stream] { stream->cancel(); });
                      stream->next();
                    }));
}

}  // namespace agentbox::api
