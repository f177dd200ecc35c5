#include "server/agent_routes.hpp"

#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <map>
#include <mutex>
#include <sys/random.h>

#include "agent/chat_request.hpp"
#include "agent/native_events.hpp"
#include "agent/openai_stream.hpp"
#include "agent/run_end.hpp"
#include "agent/sse_frames.hpp"
#include "agent/stream_json_parser.hpp"
#include "fs/content_type.hpp"
#include "fs/entry_ops.hpp"
#include "fs/file_write.hpp"
#include "fs/glob_search.hpp"
#include "http/access_log.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/response_writer.hpp"
#include "util/random_hex.hpp"
#include "server/errors.hpp"

namespace agentbox::server {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

using nlohmann::json;
using Writer = std::shared_ptr<ResponseWriter>;

constexpr int kSnapshotFiles = 500;  // files of a chat directory compared before and after a turn

std::string url_encoded(std::string_view s) { return boost::urls::encode(s, boost::urls::unreserved_chars); }

// The chat a request belongs to: Open WebUI's chat id, else the session; "" for a one-shot turn.
std::string chat_of(const Request& req) {
  for (const char* header : {"X-OpenWebUI-Chat-Id", "X-Session-Id"})
    if (auto v = req.header(header); v && !v->empty()) return std::string(*v);
  return {};
}

// A file of the chat directory as it was: what tells a changed file from an untouched one.
struct FileState {
  uint64_t size = 0;
  double modified = 0;
  bool operator==(const FileState&) const = default;
};
using Snapshot = std::map<std::string, FileState>;  // path relative to the chat directory

Snapshot snapshot(const Caller& caller, const HomePath& dir) {
  GlobOptions opt;
  opt.pattern = "**";
  opt.type = GlobType::file;
  opt.max_results = kSnapshotFiles;
  Snapshot files;
  for (const auto& m : glob_files(*caller.home, dir, opt).matches) files[m.path] = {m.size, m.modified};
  return files;
}

struct Artifact {
  std::string name;  // relative to the chat directory
  std::string path;  // as the box sees it
  uint64_t size = 0;
  std::string url;
  bool image = false;
};

std::string human_size(uint64_t bytes) {
  char buf[32];
  if (bytes < 1024) return std::to_string(bytes) + " B";
  if (bytes < (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

// The system prompt Claude Code gets on top of its own: where it runs and what becomes of files.
std::string box_prompt(const Caller& caller, const std::string& chat_dir, const std::string& network) {
  std::string p =
      "You are running inside agentbox: a Linux sandbox of this user's own (their files, their "
      "processes, their network rules). There is no display and no browser window: produce files "
      "instead of showing things.\n"
      "The current directory " + chat_dir + " belongs to this chat. Files you create or change in it "
      "are delivered to the user as download links after your answer (images are shown inline), so "
      "save results there. The user's home is " + caller.box_home + ".";
  if (!network.empty()) p += "\nNetwork: " + network;
  return p;
}

// One turn, from the request to the last byte of the answer. Lives as long as the run or the
// client needs it; its parser and renderer are touched by the run's sink only (one at a time).
class Turn : public std::enable_shared_from_this<Turn> {
 public:
  enum class Mode { openai_stream, openai_whole, native };

  struct Setup {
    Mode mode = Mode::openai_whole;
    Caller caller;
    BoxSpec box;
    std::string chat;        // "" for one-shot
    HomePath dir;            // the chat directory
    Snapshot before;
    agent::ClaudeTurn claude;
    std::string model_name;  // as the client asked
    std::string base_url;    // for links
  };

  Turn(Setup setup, agent::ClaudeRunner& runner, ChatSessions& chats, std::shared_ptr<const SignedLinks> links,
       std::shared_ptr<BlockingPool> pool, const AgentRoutesOptions& options, Writer writer)
      : s_(std::move(setup)),
        runner_(runner),
        chats_(chats),
        links_(std::move(links)),
        pool_(std::move(pool)),
        options_(options),
        writer_(std::move(writer)),
        render_(s_.model_name, "chatcmpl-" + random_hex(12), std::time(nullptr)) {}

  void start() {
    if (s_.mode != Mode::openai_whole) {
      Response head;
      head.headers.set(http::field::content_type, "text/event-stream");
      head.headers.set(http::field::cache_control, "no-cache");
      head.headers.set("X-Accel-Buffering", "no");  // a proxy in front must not hold the stream
      if (!writer_->begin_chunked(std::move(head))) return;
    }
    std::weak_ptr<Turn> weak = weak_from_this();
    writer_->on_close([weak] {
      if (auto self = weak.lock()) self->client_left();
    });
    run();
  }

 private:
  void run() {
    auto self = shared_from_this();
    agent::ClaudeSink sink;
    sink.output = [self](std::string_view bytes) {
      self->parser_.feed(bytes, [&](const agent::Event& e) { self->on_line(e); });
    };
    sink.exited = [self](const agent::ClaudeExit& exit) { self->on_exit(exit); };
    auto run = runner_.start(s_.claude, std::move(sink));
    std::lock_guard lock(mu_);
    run_ = run;
    if (client_gone_) run->interrupt();
  }

  void client_left() {
    std::shared_ptr<agent::ClaudeRun> run;
    {
      std::lock_guard lock(mu_);
      client_gone_ = true;
      run = run_;
    }
    if (run) run->interrupt();  // Ctrl-C: the turn stops, its session stays resumable
  }

  // Until a resumed run has started its session (system/init, its first line) what it prints
  // is held back: a session the CLI no longer knows ends the run before that, and the chat
  // then starts afresh without the client seeing the failed start.
  void on_line(const agent::Event& e) {
    const bool init = std::holds_alternative<agent::SystemInit>(e.body);
    if (init) started_ = true;
    if (!started_ && s_.claude.resume) {
      held_.append(e.line);
      held_ += '\n';
      return;
    }
    if (!held_.empty()) release_held();
    on_event(e);
  }

  void release_held() {
    std::string held = std::move(held_);
    held_.clear();
    agent::StreamJsonParser replay;
    replay.feed(held, [&](const agent::Event& e) { on_event(e); });
    replay.finish([&](const agent::Event& e) { on_event(e); });
  }

  void on_event(const agent::Event& e) {
    if (const auto* init = std::get_if<agent::SystemInit>(&e.body); init && !init->session_id.empty())
      remember(init->session_id);
    if (const auto* result = std::get_if<agent::RunResult>(&e.body); result && !result->session_id.empty())
      remember(result->session_id);
    if (s_.mode == Mode::native) {
      writer_->write_chunk(agent::native::line_event(e));
      return;
    }
    std::vector<json> chunks = render_.on(e);
    if (s_.mode == Mode::openai_stream) send_chunks(chunks);
  }

  void remember(const std::string& session_id) {
    if (s_.chat.empty() || session_id == remembered_) return;
    remembered_ = session_id;
    try {
      chats_.remember(s_.box.name, s_.chat, session_id, std::time(nullptr));
    } catch (const std::exception& e) {
      http_logger()->warn("agent: remembering the session of chat {} of {}: {}", s_.chat, s_.box.name, e.what());
    }
  }

  void send_chunks(const std::vector<json>& chunks) {
    std::string out;
    for (const auto& c : chunks) out += agent::sse::json_data(c);
    if (!out.empty()) writer_->write_chunk(std::move(out));
  }

  void on_exit(const agent::ClaudeExit& exit) {
    parser_.finish([&](const agent::Event& e) { on_line(e); });
    // A session the CLI no longer knows (its transcript was deleted): start the chat afresh
    // rather than fail, once.
    if (s_.claude.resume && !started_ && !exit.start_error && !exit.killed && !retried_) {
      retried_ = true;
      http_logger()->info("agent: chat {} of {}: session {} is unknown to the CLI, starting afresh", s_.chat,
                          s_.box.name, *s_.claude.resume);
      try {
        chats_.forget(s_.box.name, s_.chat);
      } catch (...) {
      }
      s_.claude.resume.reset();
      parser_ = agent::StreamJsonParser();
      held_.clear();
      return run();
    }
    if (!held_.empty()) release_held();
    agent::RunEnd end;
    if (exit.exit_code && *exit.exit_code >= 0) end.exit_code = exit.exit_code;
    if (exit.exit_code && *exit.exit_code < 0) end.signal = -*exit.exit_code;
    end.interrupted = exit.killed || client_gone();
    end.stderr_tail = exit.stderr_tail;
    if (exit.start_error) {
      try {
        std::rethrow_exception(exit.start_error);
      } catch (const std::exception& e) {
        end.stderr_tail = std::string("Claude Code could not start: ") + e.what();
      }
    }
    // Comparing the chat directory reads the disk: not on the loop.
    auto self = shared_from_this();
    pool_->post(s_.box.name, [self, end] { self->finish(end); });
  }

  bool client_gone() {
    std::lock_guard lock(mu_);
    return client_gone_;
  }

  std::vector<Artifact> artifacts() {
    std::vector<Artifact> out;
    if (!links_) return out;
    Snapshot after;
    try {
      after = snapshot(s_.caller, s_.dir);
    } catch (const std::exception& e) {
      http_logger()->warn("agent: listing {} after a turn: {}", s_.dir.shown, e.what());
      return out;
    }
    const int64_t expires = std::time(nullptr) + options_.link_ttl.count();
    for (const auto& [name, state] : after) {
      auto was = s_.before.find(name);
      if (was != s_.before.end() && was->second == state) continue;
      if (state.size > options_.max_artifact_bytes || out.size() >= options_.max_artifacts) continue;
      Artifact a;
      a.name = name;
      a.path = s_.dir.shown + "/" + name;
      a.size = state.size;
      a.image = content_type_for(name).starts_with("image/");
      const std::string& user = s_.caller.account.external_id;
      a.url = s_.base_url + "/files/view?path=" + url_encoded(a.path) + "&user_id=" + url_encoded(user) +
              "&token=" + links_->sign(user, a.path, expires);
      out.push_back(std::move(a));
    }
    return out;
  }

  void finish(const agent::RunEnd& end) {
    const std::vector<Artifact> files = artifacts();
    if (s_.mode == Mode::native) {
      std::string out;
      for (const auto& a : files)
        out += agent::native::artifact_event({{"name", a.name}, {"path", a.path}, {"size", a.size}, {"url", a.url}});
      json extra = json::object();
      if (!remembered_.empty()) extra["session_id"] = remembered_;
      out += agent::native::exit_event(end, extra);
      writer_->write_chunk(std::move(out));
      writer_->end_chunked();
      return;
    }
    std::string trailer;
    if (!files.empty()) {
      trailer = "Files from this turn:\n";
      for (const auto& a : files)
        trailer += std::string(a.image ? "- ![" : "- [") + a.name + "](" + a.url + ") (" + human_size(a.size) + ")\n";
    }
    std::vector<json> last = render_.finish(end, trailer);
    if (s_.mode == Mode::openai_stream) {
      send_chunks(last);
      writer_->write_chunk(agent::sse::done());
      writer_->end_chunked();
      return;
    }
    Response r = Response::json(render_.completion());
    writer_->send(std::move(r));
  }

  Setup s_;
  agent::ClaudeRunner& runner_;
  ChatSessions& chats_;
  std::shared_ptr<const SignedLinks> links_;
  std::shared_ptr<BlockingPool> pool_;
  const AgentRoutesOptions& options_;
  Writer writer_;

  // The run's sink only (one call at a time), then finish() after it.
  agent::StreamJsonParser parser_;
  agent::OpenAiStream render_;
  bool started_ = false;  // the run's session started (system/init)
  std::string held_;      // lines before that, of a resumed run
  bool retried_ = false;
  std::string remembered_;

  std::mutex mu_;  // guards what follows
  std::shared_ptr<agent::ClaudeRun> run_;
  bool client_gone_ = false;
};

// Everything a turn needs before it runs, read from the request and prepared on disk (on a pool
// thread): the chat directory, the attachments in it, what it held before.
Turn::Setup prepare(const Request& req, Turn::Mode mode, CallerDirectory& callers, exec::AccountBoxes& boxes,
                    ChatSessions& chats, const AgentRoutesOptions& options) {
  Turn::Setup s;
  s.mode = mode;
  s.caller = callers.resolve(req);
  json body = parse_json_object(req);
  agent::ChatRequest chat;
  try {
    if (mode == Turn::Mode::native) {
      // POST /agent/runs {"prompt", "system"?, "model"?}: the same turn without OpenAI's envelope.
      auto prompt = body.find("prompt");
      if (prompt == body.end() || !prompt->is_string() || prompt->get<std::string>().empty())
        throw HttpError(http::status::unprocessable_entity, "Field 'prompt' is required and must be a non-empty string");
      chat.prompt = prompt->get<std::string>();
      chat.system = body.value("system", "");
      chat.model = body.value("model", "");
    } else {
      chat = agent::parse_chat_request(body, options.max_attachment_bytes);
      s.mode = chat.stream ? Turn::Mode::openai_stream : Turn::Mode::openai_whole;
    }
  } catch (const agent::ChatRequestError& e) {
    throw HttpError(http::status::bad_request, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw HttpError(http::status::bad_request, std::string("Malformed request: ") + e.what());
  }
  // "claude-code" runs the configured model; "claude-code/NAME" asks the CLI for NAME.
  std::string claude_model = options.claude_model;
  if (!chat.model.empty() && chat.model != options.model_id) {
    const std::string prefix = options.model_id + "/";
    if (!chat.model.starts_with(prefix) || chat.model.size() == prefix.size())
      throw HttpError(http::status::not_found, "Model '" + chat.model + "' not found; this server offers '" +
                                                   options.model_id + "' (or '" + prefix + "MODEL')");
    claude_model = chat.model.substr(prefix.size());
  }
  s.model_name = chat.model.empty() ? options.model_id : chat.model;
  s.chat = chat_of(req);
  // Open WebUI asks the chat's model for a title, tags and follow-ups with a "### Task:" prompt
  // in the same chat: a one-shot turn, so the chat's own session never sees them.
  if (chat.prompt.starts_with("### Task:")) s.chat.clear();
  const std::string dir_name = s.chat.empty() ? "once-" + random_hex(8) : agent::chat_dir_name(s.chat);
  s.dir = s.caller.home->path("chats/" + dir_name, s.caller.box_home);
  make_dir(*s.caller.home, s.dir);
  for (const auto& a : chat.attachments)
    write_atomic(*s.caller.home, s.dir.child(a.name), a.bytes, /*create_parents=*/false);
  s.before = snapshot(s.caller, s.dir);
  s.box = boxes.spec_for(s.caller.account);

  // Never from a header: whoever sends the request (or sits between it and us) would choose
  // where the user's browser takes the signed link. Without public_url, the address this
  // request reached: the listen address, or with a wildcard listen address the one dialled.
  s.base_url = !options.public_url.empty()        ? options.public_url
               : !req.local_address.empty() ? "http://" + req.local_address
                                            : "http://127.0.0.1";

  agent::ClaudeTurn& t = s.claude;
  t.box = s.box;
  t.cwd = s.dir.shown;
  t.prompt = std::move(chat.prompt);
  if (!s.chat.empty()) t.resume = chats.find(s.box.name, s.chat);
  const std::string network = options.network_of ? options.network_of(s.caller.account.external_id) : options.network;
  t.append_system_prompt = box_prompt(s.caller, s.dir.shown, network);
  if (!chat.system.empty()) t.append_system_prompt += "\n\n" + chat.system;
  t.model = claude_model;
  t.max_turns = options.max_turns;
  t.allowed_tools = options.allowed_tools;
  // agentbox's own fields of the request narrow what the configuration allows, never widen it.
  if (auto it = body.find("max_turns"); it != body.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1000)
      throw HttpError(http::status::bad_request, "max_turns must be an integer from 1 to 1000");
    const int asked = static_cast<int>(it->get<int64_t>());
    t.max_turns = t.max_turns > 0 ? std::min(t.max_turns, asked) : asked;
  }
  if (auto it = body.find("allowed_tools"); it != body.end()) {
    if (!it->is_array()) throw HttpError(http::status::bad_request, "allowed_tools must be a list of tool names");
    std::vector<std::string> asked;
    for (const json& tool : *it) {
      if (!tool.is_string() || tool.get<std::string>().empty())
        throw HttpError(http::status::bad_request, "allowed_tools must be a list of tool names");
      const std::string name = tool.get<std::string>();
      if (t.allowed_tools.empty() ||
          std::find(t.allowed_tools.begin(), t.allowed_tools.end(), name) != t.allowed_tools.end())
        asked.push_back(name);
    }
    if (asked.empty()) throw HttpError(http::status::bad_request, "allowed_tools names no tool this server allows");
    t.allowed_tools = std::move(asked);
  }
  t.extra_args = options.extra_args;
  if (options.max_retries) t.env["CLAUDE_CODE_MAX_RETRIES"] = std::to_string(*options.max_retries);
  return s;
}

}  // namespace

void add_agent_routes(Router& router, CallerDirectory& callers, exec::AccountBoxes& boxes,
                      agent::ClaudeRunner& runner, ChatSessions& chats, std::shared_ptr<const SignedLinks> links,
                      std::shared_ptr<BlockingPool> pool, AgentRoutesOptions options) {
  router.translate_errors(&domain_error_response);  // FsError, BoxUnavailable... as statuses
  auto opts = std::make_shared<const AgentRoutesOptions>(std::move(options));

  router.add(http::verb::get, "/v1/models", [opts](const Request&) {
    json model = {{"id", opts->model_id},
                  {"object", "model"},
                  {"created", 1767225600},
                  {"owned_by", "agentbox"},
                  {"name", "Claude Code"},
                  {"description", "Claude Code running in your own agentbox sandbox"}};
    return Response::json({{"object", "list"}, {"data", json::array({model})}});
  });

  auto turn_route = [&callers, &boxes, &runner, &chats, links, pool, opts](Turn::Mode mode) {
    return offload(pool, BlockingWork([&callers, &boxes, &runner, &chats, links, pool, opts, mode](
                                          const Request& req, const Writer& writer) {
      if (!opts->unavailable.empty()) throw HttpError(http::status::service_unavailable, opts->unavailable);
      Turn::Setup setup = prepare(req, mode, callers, boxes, chats, *opts);
      auto turn = std::make_shared<Turn>(std::move(setup), runner, chats, links, pool, *opts, writer);
      turn->start();
    }));
  };
  router.add_async(http::verb::post, "/v1/chat/completions", turn_route(Turn::Mode::openai_whole));
  router.add_async(http::verb::post, "/agent/runs", turn_route(Turn::Mode::native));
}

}  // namespace agentbox::server
