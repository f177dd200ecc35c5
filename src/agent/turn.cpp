#include "agent/turn.hpp"

#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <ctime>
#include <mutex>
#include <thread>

#include "agent/approvals.hpp"
#include "agent/native_events.hpp"
#include "agent/openai_stream.hpp"
#include "agent/run_end.hpp"
#include "agent/sse_frames.hpp"
#include "agent/stream_json_parser.hpp"
#include "fs/content_type.hpp"
#include "fs/file_read.hpp"
#include "fs/glob_search.hpp"
#include "util/log.hpp"
#include "util/random_hex.hpp"

namespace agentbox::agent {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

using nlohmann::json;
using Writer = std::shared_ptr<ResponseWriter>;

constexpr int kSnapshotFiles = 500;  // files of a chat directory compared before and after a turn
// A warm CLI writes its transcript a little after its answer (a -p run has by its exit): the
// answer's end waits at most this long for the last message to be in it.
constexpr std::chrono::milliseconds kTranscriptWait{2000};
constexpr size_t kTranscriptTail = 256 << 10;

// The CLI's transcript of session in cwd, under the home (~/.claude/projects/<cwd, every
// character but letters and digits made '-'>/<session>.jsonl).
std::string transcript_path(const std::string& cwd, const std::string& session) {
  std::string slug = cwd;
  for (char& c : slug)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  return ".claude/projects/" + slug + "/" + session + ".jsonl";
}

// Whether the last part of the transcript names message uuid (false when it is not there yet).
bool transcript_has(const accounts::Caller& caller, const std::string& rel, const std::string& uuid) {
  try {
    struct stat st {};
    UniqueFd fd = open_regular_file(*caller.home, caller.home->path(rel, caller.box_home), st);
    const off_t from = st.st_size > static_cast<off_t>(kTranscriptTail) ? st.st_size - kTranscriptTail : 0;
    if (::lseek(fd.get(), from, SEEK_SET) < 0) return false;
    std::string tail;
    read_up_to(fd.get(), tail, kTranscriptTail, rel);
    return tail.find("\"uuid\":\"" + uuid + "\"") != std::string::npos;
  } catch (const std::exception&) {
    return false;
  }
}

std::string url_encoded(std::string_view s) { return boost::urls::encode(s, boost::urls::unreserved_chars); }

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
  if (bytes < (1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

// One turn, from the request to the last byte of the answer. Lives as long as the run or the
// client needs it; its parser and renderer are touched by the run's sink only (one at a time).
// Where a turn's ask-mode decisions go: beside its session's transcript, written on the pool.
// Runs on: record() on a loop or pool thread (the warm CLI's), the writes on the pool.
struct ApprovalLog {
  // s: the chat's session as the turn starts (an answer's decision comes before any line of it)
  ApprovalLog(accounts::Caller c, std::string d, std::shared_ptr<FairPool> p, std::string k, std::string s)
      : caller(std::move(c)), cwd(std::move(d)), pool(std::move(p)), key(std::move(k)), session(std::move(s)) {}
  const accounts::Caller caller;
  const std::string cwd;
  const std::shared_ptr<FairPool> pool;
  const std::string key;               // the pool's queue (the account)
  std::atomic<bool> answered = false;  // this turn's message answered a question

  void set_session(const std::string& id) {
    std::lock_guard lock(mu);
    session = id;
  }

  void record(const agent::ApprovalDecision& d) {
    if (d.decision != "expired") answered = true;
    std::string rel;
    {
      std::lock_guard lock(mu);
      if (!session.empty()) rel = approvals_path(transcript_path(cwd, session));
    }
    if (rel.empty()) return;
    pool->post(key, [caller = caller, rel, d] {
      try {
        record_approval(caller, rel, d);
      } catch (const std::exception& e) {
        log::warn("agent", "agent: recording an approval in {}: {}", rel, e.what());
      }
    });
  }

  std::mutex mu;  // guards session
  std::string session;
};

class Turn : public std::enable_shared_from_this<Turn> {
 public:
  using Mode = TurnMode;
  using Setup = TurnSetup;

  Turn(Setup setup, agent::ClaudeRunner& runner, ChatSessions& chats, std::shared_ptr<const SignedLinks> links,
       std::shared_ptr<FairPool> pool, const TurnOptions& options, Writer writer, std::shared_ptr<ChatQueue::Hold> hold)
      : s_(std::move(setup)),
        runner_(runner),
        chats_(chats),
        links_(std::move(links)),
        pool_(std::move(pool)),
        options_(options),
        writer_(std::move(writer)),
        hold_(std::move(hold)),
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
    // Not self: a question's expiry comes after this turn is over (and its chat moved on).
    sink.decided = [log = approvals_](const agent::ApprovalDecision& d) { log->record(d); };
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
    if (init || approvals_->answered) started_ = true;  // an answer continues a running session
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
    if (const auto* m = std::get_if<agent::AssistantMessage>(&e.body); m && m->parent_tool_use_id.empty()) {
      const json line = json::parse(e.line, nullptr, /*allow_exceptions=*/false);
      if (line.is_object() && line.contains("uuid") && line["uuid"].is_string()) last_uuid_ = line["uuid"];
    }
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
    approvals_->set_session(session_id);
    try {
      chats_.remember(s_.box.name, s_.chat, session_id, std::time(nullptr));
    } catch (const std::exception& e) {
      log::warn("agent", "agent: remembering the session of chat {} of {}: {}", s_.chat, s_.box.name, e.what());
    }
  }

  void send_chunks(const std::vector<json>& chunks) {
    std::string out;
    for (const auto& c : chunks) out += agent::sse::json_data(c);
    if (!out.empty()) writer_->write_chunk(std::move(out));
  }

  void on_exit(const agent::ClaudeExit& exit) {
    parser_.finish([&](const agent::Event& e) { on_line(e); });
    // The chat's warm CLI ended (idle end, box stop, crash) before it answered: the same turn
    // again on a new CLI, which resumes the session the warm one left. Once.
    if (exit.warm_gone && !started_ && !rerun_ && !client_gone()) {
      rerun_ = true;
      log::info("agent", "agent: chat {} of {}: its warm Claude Code CLI is gone, resuming in a new one", s_.chat,
                s_.box.name);
      parser_ = agent::StreamJsonParser();
      held_.clear();
      return run();
    }
    // A session the CLI no longer knows (its transcript was deleted): start the chat afresh
    // rather than fail, once.
    if (s_.claude.resume && !started_ && !approvals_->answered && !exit.start_error && !exit.killed && !retried_) {
      retried_ = true;
      log::info("agent", "agent: chat {} of {}: session {} is unknown to the CLI, starting afresh", s_.chat,
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
    end.asking = exit.question.has_value();
    if (exit.question) question_ = agent::approval_question(*exit.question);
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
      log::warn("agent", "agent: listing {} after a turn: {}", s_.dir.shown, e.what());
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

  // The answer ends once the chat's session has it: what reads the transcript next (the
  // sessions routes, the next turn's --resume after the warm CLI is gone) finds the whole turn.
  void await_transcript() {
    if (remembered_.empty() || last_uuid_.empty()) return;
    const std::string rel = transcript_path(s_.claude.cwd, remembered_);
    const auto deadline = std::chrono::steady_clock::now() + kTranscriptWait;
    while (!transcript_has(s_.caller, rel, last_uuid_)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        log::warn("agent", "agent: chat {} of {}: the transcript of session {} lacks the turn's last message", s_.chat,
                  s_.box.name, remembered_);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void finish(const agent::RunEnd& end) {
    if (!s_.chat.empty()) await_transcript();
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
    if (!question_.empty()) trailer += (trailer.empty() ? "" : "\n") + question_;
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
  std::shared_ptr<FairPool> pool_;
  const TurnOptions& options_;
  Writer writer_;
  // The chat, held while this turn lives: its next turn starts when the last owner of this
  // turn lets go (after finish(), or after the client left and the run exited).
  std::shared_ptr<ChatQueue::Hold> hold_;

  // The run's sink only (one call at a time), then finish() after it.
  agent::StreamJsonParser parser_;
  agent::OpenAiStream render_;
  bool started_ = false;  // the run's session started (system/init)
  std::string held_;      // lines before that, of a resumed run
  bool retried_ = false;  // afresh, after an unknown session
  bool rerun_ = false;    // on a new CLI, after the warm one was gone
  std::string remembered_;
  std::string last_uuid_;  // of the run's last assistant message (not a subagent's)
  std::string question_;   // ask mode: the turn ended on this question (the answer's trailer)
  std::shared_ptr<ApprovalLog> approvals_ =
      std::make_shared<ApprovalLog>(s_.caller, s_.claude.cwd, pool_, s_.box.name, s_.claude.resume.value_or(""));

  std::mutex mu_;  // guards what follows
  std::shared_ptr<agent::ClaudeRun> run_;
  bool client_gone_ = false;
};

}  // namespace

Snapshot snapshot(const accounts::Caller& caller, const HomePath& dir) {
  GlobOptions opt;
  opt.pattern = "**";
  opt.type = GlobType::file;
  opt.max_results = kSnapshotFiles;
  Snapshot files;
  for (const auto& m : glob_files(*caller.home, dir, opt).matches) files[m.path] = {m.size, m.modified};
  return files;
}

void start_turn(TurnSetup setup, ClaudeRunner& runner, ChatSessions& chats, std::shared_ptr<const SignedLinks> links,
                std::shared_ptr<FairPool> pool, const TurnOptions& options, std::shared_ptr<ResponseWriter> writer,
                std::shared_ptr<ChatQueue::Hold> hold) {
  std::make_shared<Turn>(std::move(setup), runner, chats, std::move(links), std::move(pool), options, std::move(writer),
                         std::move(hold))
      ->start();
}

}  // namespace agentbox::agent
