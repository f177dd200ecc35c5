#include "agent/claude_runner.hpp"

#include <signal.h>

#include <boost/asio/steady_timer.hpp>
#include <mutex>

#include "agent/warm_clis.hpp"
#include "box/box_env.hpp"

namespace agentbox::agent {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::seconds kPollWindow{60};  // a wait ends at least this often (no output)
constexpr size_t kReadPage = 1 << 20;

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ',';
    out += w;
  }
  return out;
}

class Run : public ClaudeRun, public std::enable_shared_from_this<Run> {
 public:
  Run(asio::io_context& loop, exec::ProcessTable& table, const ClaudeRunnerOptions& options, std::string account,
      ClaudeSink sink)
      : loop_(loop), table_(table), options_(options), account_(std::move(account)), sink_(std::move(sink)) {}

  void start(exec::StartRequest req) {
    auto self = shared_from_this();
    table_.start(std::move(req), [self](exec::StartOutcome started) {
      if (started.error) {
        ClaudeExit exit;
        exit.start_error = started.error;
        return self->finish(std::move(exit));
      }
      bool stop_now;
      {
        std::lock_guard lock(self->mu_);
        self->id_ = started.id;
        stop_now = self->interrupted_;
      }
      if (stop_now) self->send_interrupt();
      self->next();
    });
  }

  void interrupt() override {
    {
      std::lock_guard lock(mu_);
      if (interrupted_ || finished_) return;
      interrupted_ = true;
      if (id_.empty()) return;  // start() sends it once the process has an id
    }
    send_interrupt();
  }

  std::string process_id() const override {
    std::lock_guard lock(mu_);
    return id_;
  }

 private:
  void send_interrupt() {
    std::string id;
    {
      std::lock_guard lock(mu_);
      id = id_;
      if (finished_) return;
      timer_ = std::make_unique<asio::steady_timer>(loop_, options_.interrupt_grace);
      timer_->async_wait([self = shared_from_this(), id](const boost::system::error_code& ec) {
        if (ec) return;
        self->table_.kill(self->account_, id, /*force=*/false, [](bool) {});
      });
    }
    table_.signal(account_, id, SIGINT);
  }

  void next() {
    exec::ReadSpec read;
    read.offset = offset_;
    read.max_bytes = kReadPage;
    std::string id;
    {
      std::lock_guard lock(mu_);
      id = id_;
    }
    table_.wait(account_, id, read, /*until_output=*/true, Clock::now() + kPollWindow,
                [self = shared_from_this()](std::optional<exec::ProcessView> view) { self->on_view(view); });
  }

  void on_view(const std::optional<exec::ProcessView>& view) {
    if (!view) return finish(ClaudeExit{});  // gone from the table (cannot happen while we read)
    for (const auto& chunk : view->output) {
      if (chunk.type == "stderr") {
        stderr_tail_ += chunk.data;
        if (stderr_tail_.size() > options_.stderr_tail_bytes)
          stderr_tail_.erase(0, stderr_tail_.size() - options_.stderr_tail_bytes);
      } else if (sink_.output) {
        sink_.output(chunk.data);
      }
    }
    offset_ = view->next_offset;
    // A finished process may still have output past this page: read on before its exit.
    if (view->status == ProcessStatus::running || !view->output.empty() || view->more) return next();
    ClaudeExit exit;
    exit.exit_code = view->exit_code;
    exit.killed = view->status != ProcessStatus::done;
    exit.stderr_tail = std::move(stderr_tail_);
    finish(std::move(exit));
  }

  void finish(ClaudeExit exit) {
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      finished_ = true;
      if (timer_) timer_->cancel();
    }
    if (sink_.exited) sink_.exited(exit);
    sink_ = {};
  }

  asio::io_context& loop_;
  exec::ProcessTable& table_;
  const ClaudeRunnerOptions options_;
  const std::string account_;
  ClaudeSink sink_;      // the read chain only
  uint64_t offset_ = 0;  // the read chain only
  std::string stderr_tail_;

  mutable std::mutex mu_;  // guards what follows
  std::string id_;
  bool interrupted_ = false;
  bool finished_ = false;
  std::unique_ptr<asio::steady_timer> timer_;
};

}  // namespace

std::vector<std::string> claude_argv(const ClaudeTurn& turn) {
  std::vector<std::string> argv = {"claude",      "-p",        "--output-format",
                                   "stream-json", "--verbose", "--include-partial-messages"};
  if (turn.resume) argv.insert(argv.end(), {"--resume", *turn.resume});
  if (!turn.model.empty()) argv.insert(argv.end(), {"--model", turn.model});
  if (turn.max_turns > 0) argv.insert(argv.end(), {"--max-turns", std::to_string(turn.max_turns)});
  // With a list, what it does not name is refused (in -p mode nobody can grant it); without
  // one every tool runs unasked: the box, not a prompt, is the sandbox.
  // A mode that asks (edits, plan) is passed with a list too: what needs asking is refused.
  if (!turn.allowed_tools.empty()) argv.insert(argv.end(), {"--allowedTools", joined(turn.allowed_tools)});
  if (!turn.permission_mode.empty() && (turn.allowed_tools.empty() || turn.permission_mode != "bypassPermissions"))
    argv.insert(argv.end(), {"--permission-mode", turn.permission_mode});
  // Ask mode: what needs approval comes to agentbox as a can_use_tool control request on stdout
  // (agent/warm_clis.hpp holds it and asks the chat).
  if (turn.permission_mode == "default") argv.insert(argv.end(), {"--permission-prompt-tool", "stdio"});
  if (!turn.append_system_prompt.empty())
    argv.insert(argv.end(), {"--append-system-prompt", turn.append_system_prompt});
  argv.insert(argv.end(), turn.extra_args.begin(), turn.extra_args.end());
  return argv;
}

ClaudeRunner::ClaudeRunner(asio::io_context& loop, exec::ProcessTable& table, ClaudeRunnerOptions options)
    : ClaudeRunner(loop, table, std::move(options), WarmOptions{}) {}

ClaudeRunner::ClaudeRunner(asio::io_context& loop, exec::ProcessTable& table, ClaudeRunnerOptions options,
                           const WarmOptions& warm)
    : loop_(loop),
      table_(table),
      options_(std::move(options)),
      warm_(std::make_unique<WarmClis>(loop, table, options_, warm)) {}

ClaudeRunner::~ClaudeRunner() = default;

std::size_t ClaudeRunner::warm_count(const std::string& account) const { return warm_->count(account); }

std::shared_ptr<ClaudeRun> ClaudeRunner::start(ClaudeTurn turn, ClaudeSink sink) {
  auto env = base_env(turn.box, /*tty=*/false);
  env["PWD"] = turn.cwd;
  for (const auto& [k, v] : turn.env) env[k] = v;
  exec::StartRequest req;
  req.box = turn.box;
  req.spawn.argv = claude_argv(turn);
  req.spawn.env = env_strings(env);
  req.spawn.cwd = turn.cwd;
  req.spawn.tty = false;
  if (!turn.warm_key.empty() && warm_->enabled()) {
    // The flags a warm CLI must have been started with to serve this turn: all but --resume
    // (a warm CLI is in the chat's session already).
    ClaudeTurn flags = turn;
    flags.resume.reset();
    std::string signature = turn.cwd;
    for (const auto& word : claude_argv(flags)) signature += '\0' + word;
    req.command = "claude -p --input-format stream-json (warm agent session in " + turn.cwd + ")";
    req.spawn.argv.insert(req.spawn.argv.end(), {"--input-format", "stream-json"});
    // Its turns have the run timeout each (WarmClis); stdin stays open for the next prompt.
    return warm_->start(turn.warm_key, signature, std::move(req), stream_json_user_line(turn.prompt), std::move(sink));
  }
  req.command = "claude -p (agent turn in " + turn.cwd + ")";
  req.stdin_data = std::move(turn.prompt);
  req.timeout = options_.timeout;
  auto run = std::make_shared<Run>(loop_, table_, options_, turn.box.name, std::move(sink));
  run->start(std::move(req));
  return run;
}

}  // namespace agentbox::agent
