#include "agent/warm_clis.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <cctype>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "util/log.hpp"

namespace agentbox::agent {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

constexpr std::chrono::seconds kPollWindow{60};  // a wait ends at least this often (no output)
constexpr size_t kReadPage = 1 << 20;
constexpr size_t kMaxLine = 64 << 20;  // a line longer than this is not the CLI's: the CLI is ended

// The CLI's end of input: ProcessTable::input closes a pipe's stdin at "\x04" (JSON never
// carries the raw byte).
constexpr const char* kEndOfInput = "\x04";

bool line_is(std::string_view line, std::string_view type) {
  return line.find("\"type\":\"" + std::string(type) + "\"") != std::string_view::npos;
}

// What the CLI prints comes from a process in the user's box: read without trusting its types.
std::string string_at(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One warm CLI process: the turns of one chat, one at a time.
class Cli : public std::enable_shared_from_this<Cli> {
 public:
  // asking: a turn ended on a tool call that waits for the chat's next message (ask mode).
  enum class State { busy, idle, asking, closing, ended };

  Cli(std::weak_ptr<WarmClis::Impl> pool, asio::io_context& loop, exec::ProcessTable& table,
      const ClaudeRunnerOptions& run, std::chrono::seconds idle, std::chrono::seconds approval_timeout, std::string key,
      std::string account, std::string signature)
      : pool_(std::move(pool)),
        table_(table),
        run_(run),
        idle_(idle),
        approval_timeout_(approval_timeout),
        asks_(signature.find(std::string("--permission-prompt-tool") + '\0' + "stdio") != std::string::npos),
        key_(std::move(key)),
        account_(std::move(account)),
        signature_(std::move(signature)),
        timer_(loop) {}

  const std::string& key() const { return key_; }
  const std::string& account() const { return account_; }

  // The CLI's first turn: starts the process, then writes its line. Throws what
  // ProcessTable::start throws (nothing started then).
  uint64_t launch(exec::StartRequest req, std::string line, ClaudeSink sink) {
    uint64_t turn;
    {
      std::lock_guard lock(mu_);
      sink_ = std::move(sink);
      turn = begin_turn_locked(/*reused=*/false);
    }
    auto self = shared_from_this();
    table_.start(std::move(req), [self, line = std::move(line)](exec::StartOutcome started) mutable {
      if (started.error) {
        ClaudeExit exit;
        exit.start_error = started.error;
        return self->gone(std::move(exit));
      }
      bool stop_now;
      {
        std::lock_guard lock(self->mu_);
        self->id_ = started.id;
        stop_now = self->interrupted_;
      }
      if (stop_now || self->table_.input(self->account_, started.id, std::move(line)) != exec::InputResult::ok)
        self->kill();
      self->next();
    });
    return turn;
  }

  enum class Served { yes, no };
  // A later turn on this CLI, when it is idle and was started with `signature`'s flags. no: the
  // sink is left with the caller. yes: the turn is this CLI's (its end comes through the sink).
  Served serve(const std::string& signature, std::string line, ClaudeSink& sink, uint64_t& turn) {
    std::string id;
    std::optional<Answer> answer;
    {
      std::lock_guard lock(mu_);
      if (state_ == State::asking && signature == signature_) answer = answer_locked(line, sink, turn);
    }
    if (answer) {
      decide(answer->pending, answer->decision, answer->reason, /*interrupt=*/false, answer->record);
      return Served::yes;
    }
    {
      std::lock_guard lock(mu_);
      if (state_ != State::idle || signature != signature_ || id_.empty()) return Served::no;
      sink_ = std::move(sink);
      turn = begin_turn_locked(/*reused=*/true);
      id = id_;
    }
    if (table_.input(account_, id, std::move(line)) == exec::InputResult::ok) return Served::yes;
    // Its input is gone (it is ending): the turn goes back to the caller unless the CLI's end
    // already reported it (then as warm_gone, which the caller retries).
    std::lock_guard lock(mu_);
    if (state_ != State::busy || turn_ != turn) return Served::yes;
    sink = std::move(sink_);
    sink_ = {};
    state_ = State::closing;
    return Served::no;
  }

  // The client of `turn` left: the control protocol's interrupt (the CLI ends the turn with a
  // result and stays), the CLI's end if no result comes within the grace.
  void interrupt(uint64_t turn) {
    std::string id;
    {
      std::lock_guard lock(mu_);
      if (turn != turn_ || state_ != State::busy || interrupted_) return;
      interrupted_ = true;
      if (id_.empty()) return;  // launch() ends it once it has an id
      id = id_;
      arm_locked(run_.interrupt_grace, &Cli::kill);
    }
    const json request = {{"type", "control_request"},
                          {"request_id", "interrupt-" + std::to_string(turn)},
                          {"request", {{"subtype", "interrupt"}}}};
    if (table_.input(account_, id, request.dump() + "\n") != exec::InputResult::ok) kill();
  }

  // Ends it if it is idle (its end of input: it exits as after any -p run). false when busy.
  bool end_if_idle() {
    std::string id;
    std::optional<Pending> abandoned;
    {
      std::lock_guard lock(mu_);
      if (state_ == State::asking) abandoned = take_pending_locked(State::idle);
      if (state_ != State::idle) return state_ != State::busy;
      state_ = State::closing;
      id = id_;
      arm_locked(run_.interrupt_grace, &Cli::kill);
    }
    // The chat went on without answering its question (with another model): denied.
    if (abandoned)
      decide(*abandoned, "no", "the chat went on with another model", /*interrupt=*/true, abandoned->decided);
    if (table_.input(account_, id, kEndOfInput) != exec::InputResult::ok) kill();
    return true;
  }

  std::optional<Clock::time_point> idle_since() const {
    std::lock_guard lock(mu_);
    if (state_ != State::idle) return std::nullopt;
    return last_used_;
  }

  std::string process_id() const {
    std::lock_guard lock(mu_);
    return id_;
  }

 private:
  uint64_t begin_turn_locked(bool reused) {
    state_ = State::busy;
    reused_ = reused;
    answered_ = false;
    interrupted_ = false;
    if (run_.timeout) arm_locked(*run_.timeout, &Cli::kill);
    return ++turn_;
  }

  // One timer for what comes next (a turn's deadline, the idle end, an interrupt's grace).
  void arm_locked(std::chrono::milliseconds after, void (Cli::*what)()) {
    const uint64_t gen = ++timer_gen_;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), gen, what](const boost::system::error_code& ec) {
      if (ec) return;
      {
        std::lock_guard lock(self->mu_);
        if (gen != self->timer_gen_) return;
      }
      ((*self).*what)();
    });
  }

  void kill() {
    std::string id = process_id();
    if (!id.empty()) table_.kill(account_, id, /*force=*/false, [](bool) {});
  }

  void on_idle_timeout() {
    if (end_if_idle()) forget();
  }

  void next() {
    exec::ReadSpec read;
    read.offset = offset_;
    read.max_bytes = kReadPage;
    table_.wait(account_, process_id(), read, /*until_output=*/true, Clock::now() + kPollWindow,
                [self = shared_from_this()](std::optional<exec::ProcessView> view) { self->on_view(view); });
  }

  void on_view(const std::optional<exec::ProcessView>& view) {
    if (!view) return gone(ClaudeExit{});
    for (const auto& chunk : view->output) {
      if (chunk.type == "stderr") {
        stderr_tail_ += chunk.data;
        if (stderr_tail_.size() > run_.stderr_tail_bytes)
          stderr_tail_.erase(0, stderr_tail_.size() - run_.stderr_tail_bytes);
        continue;
      }
      partial_ += chunk.data;
      size_t from = 0;
      for (size_t nl; (nl = partial_.find('\n', from)) != std::string::npos; from = nl + 1)
        on_line(std::string_view(partial_).substr(from, nl - from));
      partial_.erase(0, from);
      if (partial_.size() > kMaxLine) kill();
    }
    offset_ = view->next_offset;
    if (view->status == ProcessStatus::running || !view->output.empty() || view->more) return next();
    if (!partial_.empty()) on_line(std::exchange(partial_, {}));
    ClaudeExit exit;
    exit.exit_code = view->exit_code;
    exit.killed = view->status != ProcessStatus::done;
    gone(std::move(exit));
  }

  void on_line(std::string_view line) {
    // The control protocol is between the CLI and us, not part of the turn's answer.
    if (line_is(line, "control_response") || line_is(line, "control_cancel_request")) return;
    if (line_is(line, "control_request")) return answer_control(line);
    std::function<void(std::string_view)> output;
    {
      std::lock_guard lock(mu_);
      if (state_ != State::busy) return;  // between turns nothing is asked: nothing to relay
      answered_ = true;
      output = sink_.output;
    }
    if (output) output(std::string(line) + "\n");
    if (line_is(line, "result")) {
      const json result = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (result.is_object() && string_at(result, "type") == "result") {
        auto is_error = result.find("is_error");
        end_turn(is_error != result.end() && is_error->is_boolean() && is_error->get<bool>());
      }
    }
  }

  // Permission prompts: asked in ask mode (held), denied in the others (the model is told).
  void answer_control(std::string_view line) {
    const json request = json::parse(line, nullptr, false);
    if (!request.is_object()) return;
    const std::string id = string_at(request, "request_id");
    auto body = request.find("request");
    json response;
    const bool can_use_tool =
        body != request.end() && body->is_object() && string_at(*body, "subtype") == "can_use_tool";
    if (can_use_tool && asks_ && hold(id, *body)) return;
    if (can_use_tool)
      response = {{"subtype", "success"},
                  {"request_id", id},
                  {"response", {{"behavior", "deny"}, {"message", "Nobody can approve tools in this mode."}}}};
    else
      response = {{"subtype", "error"}, {"request_id", id}, {"error", "not supported by agentbox"}};
    respond(response);
  }

  void respond(const json& response) {
    table_.input(account_, process_id(),
                 json{{"type", "control_response"}, {"response", response}}.dump(-1, ' ', false,
                                                                                 json::error_handler_t::replace) +
                     "\n");
  }

  // A tool call waiting for the user's approval.
  struct Pending {
    std::string request_id;
    std::string tool;
    std::string tool_use_id;
    json input;
    std::function<void(const ApprovalDecision&)> decided;  // the asking turn's (records an expiry)
  };

  // can_use_tool in ask mode: the running turn ends with the question; the call waits for the
  // chat's next message (serve()) or the approval timeout. false: no turn to ask in (denied).
  bool hold(const std::string& request_id, const json& body) {
    Pending p;
    p.request_id = request_id;
    p.tool = string_at(body, "tool_name");
    p.tool_use_id = string_at(body, "tool_use_id");
    auto input = body.find("input");
    p.input = input != body.end() && input->is_object() ? *input : json::object();
    ClaudeSink sink;
    {
      std::lock_guard lock(mu_);
      if (state_ != State::busy || interrupted_ || pending_ || !sink_.exited) return false;
      sink = std::move(sink_);
      sink_ = {};
      p.decided = sink.decided;
      pending_ = p;
      state_ = State::asking;
      arm_locked(approval_timeout_, &Cli::expire);
    }
    ClaudeExit exit;
    exit.exit_code = 0;
    exit.stderr_tail = stderr_tail_;
    exit.question = ClaudeExit::Question{p.tool, p.input.dump(-1, ' ', false, json::error_handler_t::replace)};
    sink.exited(exit);
    return true;
  }

  // Leaves the asking state for `next` (the pending call is the caller's to answer).
  Pending take_pending_locked(State next) {
    Pending p = std::move(*pending_);
    pending_.reset();
    state_ = next;
    return p;
  }

  struct Answer {
    Pending pending;
    std::string decision;
    std::string reason;
    std::function<void(const ApprovalDecision&)> record;
  };

  // The chat's next message, while a call waits: it answers the call (decide() it, out of the
  // lock), and the turn relays the rest of the CLI's answer.
  Answer answer_locked(const std::string& line, ClaudeSink& sink, uint64_t& turn) {
    Pending p = take_pending_locked(State::busy);
    sink_ = std::move(sink);
    sink = {};
    turn = begin_turn_locked(/*reused=*/true);
    answered_ = true;  // the call is answered: this turn is never run again as a prompt
    const json user = json::parse(line, nullptr, false);
    std::string text;
    if (user.is_object() && user.contains("message") && user["message"].is_object())
      text = string_at(user["message"], "content");
    std::string word = text;
    word.erase(0, word.find_first_not_of(" \t\r\n"));
    while (!word.empty() && std::string_view(" \t\r\n.!").find(word.back()) != std::string_view::npos) word.pop_back();
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
    const std::string decision = word == "yes" || word == "y" ? "yes" : word == "always" ? "always" : "no";
    std::string reason = decision == "no" ? (word.empty() ? std::string("no") : text) : std::string();
    return Answer{std::move(p), decision, std::move(reason), sink_.decided};
  }

  // No answer in time: denied, and the turn stops (nobody reads it).
  void expire() {
    Pending p;
    {
      std::lock_guard lock(mu_);
      if (state_ != State::asking) return;
      p = take_pending_locked(State::busy);
      sink_ = {};
      begin_turn_locked(/*reused=*/true);
      answered_ = true;
    }
    log::info("agent", "agent: {}: a tool call waited {} s for approval: denied", account_, approval_timeout_.count());
    decide(p, "expired", "no answer within the approval timeout", /*interrupt=*/true, p.decided);
  }

  // Sends the decision on p to the CLI and has `record` keep it.
  void decide(const Pending& p, const std::string& decision, const std::string& reason, bool interrupt,
              const std::function<void(const ApprovalDecision&)>& record) {
    json answer;
    if (decision == "yes" || decision == "always") {
      answer = {{"behavior", "allow"}, {"updatedInput", p.input}, {"toolUseID", p.tool_use_id}};
      if (decision == "always")
        answer["updatedPermissions"] = json::array({json{{"type", "addRules"},
                                                         {"rules", json::array({json{{"toolName", p.tool}}})},
                                                         {"behavior", "allow"},
                                                         {"destination", "session"}}});
    } else {
      answer = {{"behavior", "deny"}, {"message", reason}, {"toolUseID", p.tool_use_id}};
      if (interrupt) answer["interrupt"] = true;
    }
    if (record)
      record(ApprovalDecision{p.tool, p.input.dump(-1, ' ', false, json::error_handler_t::replace), decision,
                              decision == "yes" || decision == "always" ? "" : reason});
    respond({{"subtype", "success"}, {"request_id", p.request_id}, {"response", answer}});
  }

  // The turn's result came: the turn is over, the CLI waits for the next.
  void end_turn(bool is_error) {
    ClaudeSink sink;
    {
      std::lock_guard lock(mu_);
      if (state_ != State::busy) return;
      sink = std::move(sink_);
      sink_ = {};
      state_ = State::idle;
      last_used_ = Clock::now();
      arm_locked(idle_, &Cli::on_idle_timeout);
    }
    ClaudeExit exit;
    exit.exit_code = is_error ? 1 : 0;  // as a -p run would have exited
    exit.stderr_tail = stderr_tail_;
    if (sink.exited) sink.exited(exit);
    if (auto pool = pool_.lock()) trim(pool);
  }

  void trim(const std::shared_ptr<WarmClis::Impl>& pool);
  void forget();

  void gone(ClaudeExit exit) {
    ClaudeSink sink;
    {
      std::lock_guard lock(mu_);
      if (state_ == State::ended) return;
      if (state_ == State::busy) {
        sink = std::move(sink_);
        sink_ = {};
        exit.warm_gone = reused_ && !answered_;
      }
      state_ = State::ended;
      ++timer_gen_;
      timer_.cancel();
    }
    forget();
    exit.stderr_tail = std::move(stderr_tail_);
    if (sink.exited) sink.exited(exit);
  }

  const std::weak_ptr<WarmClis::Impl> pool_;
  exec::ProcessTable& table_;
  const ClaudeRunnerOptions run_;
  const std::chrono::milliseconds idle_;
  const std::chrono::milliseconds approval_timeout_;
  const bool asks_;  // ask mode: can_use_tool is asked, not denied
  const std::string key_;
  const std::string account_;
  const std::string signature_;

  // The read chain only.
  uint64_t offset_ = 0;
  std::string partial_;
  std::string stderr_tail_;

  mutable std::mutex mu_;  // guards what follows
  std::string id_;
  State state_ = State::busy;
  ClaudeSink sink_;  // the running turn's
  uint64_t turn_ = 0;
  bool reused_ = false;       // the running turn came to a CLI that had served one before
  bool answered_ = false;     // the running turn has had a line of output
  bool interrupted_ = false;  // the running turn's client left
  Clock::time_point last_used_ = Clock::now();
  std::optional<Pending> pending_;  // asking: the call that waits
  asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
};

// A turn's handle: its interrupt reaches its own turn, never a later one of the same CLI.
class WarmTurn : public ClaudeRun {
 public:
  WarmTurn(std::weak_ptr<Cli> cli, uint64_t turn, std::string id_hint)
      : cli_(std::move(cli)), turn_(turn), id_hint_(std::move(id_hint)) {}
  void interrupt() override {
    if (auto cli = cli_.lock()) cli->interrupt(turn_);
  }
  std::string process_id() const override {
    auto cli = cli_.lock();
    return cli ? cli->process_id() : id_hint_;
  }

 private:
  std::weak_ptr<Cli> cli_;
  uint64_t turn_;
  std::string id_hint_;
};

}  // namespace

struct WarmClis::Impl {
  Impl(asio::io_context& l, exec::ProcessTable& t, const ClaudeRunnerOptions& r, WarmOptions w)
      : loop(l), table(t), run(r), warm(w) {}
  asio::io_context& loop;
  exec::ProcessTable& table;
  const ClaudeRunnerOptions run;
  const WarmOptions warm;

  mutable std::mutex mu;                                       // guards clis; taken before a Cli's own, never after
  std::unordered_map<std::string, std::shared_ptr<Cli>> clis;  // by chat key

  void forget(const Cli* cli) {
    std::shared_ptr<Cli> dropped;  // let go outside the lock
    std::lock_guard lock(mu);
    auto it = clis.find(cli->key());
    if (it != clis.end() && it->second.get() == cli) {
      dropped = std::move(it->second);
      clis.erase(it);
    }
  }

  // Over the account's cap: its least recently used idle CLIs end (busy ones are counted, never
  // ended; the cap holds again when their turns are over).
  void trim(const std::string& account) {
    std::vector<std::pair<Clock::time_point, std::shared_ptr<Cli>>> idle;
    size_t count = 0;
    {
      std::lock_guard lock(mu);
      for (const auto& [key, cli] : clis) {
        if (cli->account() != account) continue;
        ++count;
        if (auto since = cli->idle_since()) idle.emplace_back(*since, cli);
      }
    }
    if (count <= warm.per_account) return;
    std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < idle.size() && count > warm.per_account; ++i) {
      if (!idle[i].second->end_if_idle()) continue;
      log::info("agent", "agent: {} has more than {} warm Claude Code CLIs: the least recently used ends", account,
                warm.per_account);
      forget(idle[i].second.get());
      --count;
    }
  }
};

void Cli::trim(const std::shared_ptr<WarmClis::Impl>& pool) {
  // A CLI the pool no longer holds (replaced while it ran a turn) ends once idle.
  bool held;
  {
    std::lock_guard lock(pool->mu);
    auto it = pool->clis.find(key_);
    held = it != pool->clis.end() && it->second.get() == this;
  }
  if (!held) {
    end_if_idle();
    return;
  }
  pool->trim(account_);
}

void Cli::forget() {
  if (auto pool = pool_.lock()) pool->forget(this);
}

WarmClis::WarmClis(asio::io_context& loop, exec::ProcessTable& table, const ClaudeRunnerOptions& run, WarmOptions warm)
    : warm_(warm), impl_(std::make_shared<Impl>(loop, table, run, warm)) {}

WarmClis::~WarmClis() = default;

std::shared_ptr<ClaudeRun> WarmClis::start(const std::string& key, const std::string& signature,
                                           exec::StartRequest cold, std::string line, ClaudeSink sink) {
  std::shared_ptr<Cli> found;
  {
    std::lock_guard lock(impl_->mu);
    if (auto it = impl_->clis.find(key); it != impl_->clis.end()) found = it->second;
  }
  if (found) {
    uint64_t turn = 0;
    if (found->serve(signature, line, sink, turn) == Cli::Served::yes)
      return std::make_shared<WarmTurn>(found, turn, found->process_id());
    // Started with other flags, or ending: it makes room for the new one.
    found->end_if_idle();
    impl_->forget(found.get());
  }
  const std::string account = cold.box.name;
  auto cli = std::make_shared<Cli>(impl_, impl_->loop, impl_->table, impl_->run, warm_.idle, warm_.approval_timeout,
                                   key, account, signature);
  {
    std::lock_guard lock(impl_->mu);
    impl_->clis[key] = cli;
  }
  uint64_t turn;
  try {
    turn = cli->launch(std::move(cold), std::move(line), std::move(sink));
  } catch (...) {
    impl_->forget(cli.get());
    throw;
  }
  impl_->trim(account);
  return std::make_shared<WarmTurn>(cli, turn, "");
}

std::size_t WarmClis::count(const std::string& account) const {
  std::lock_guard lock(impl_->mu);
  return std::count_if(impl_->clis.begin(), impl_->clis.end(),
                       [&](const auto& kv) { return kv.second->account() == account; });
}

std::string stream_json_user_line(const std::string& prompt) {
  const json line = {{"type", "user"},
                     {"message", {{"role", "user"}, {"content", prompt}}},
                     {"parent_tool_use_id", nullptr},
                     {"session_id", ""}};
  return line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace agentbox::agent
