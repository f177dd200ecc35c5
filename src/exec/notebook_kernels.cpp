#include "exec/notebook_kernels.hpp"

#include <deque>
#include <vector>

#include "box/box_env.hpp"
#include "exec/notebook_bridge_script.hpp"
#include "util/random_hex.hpp"

namespace agentbox::exec {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {
constexpr std::chrono::seconds kPollWindow{60};  // a read of the bridge's output ends at least this often
constexpr size_t kStderrTail = 4 << 10;          // of the bridge's stderr, kept to say why it failed
}  // namespace

struct NotebookKernels::Kernel {
  std::string id, account, path, kernel = "python3";
  std::string process_id;  // in the account's ProcessTable; empty until it started
  bool ready = false;
  bool closing = false;              // close(), the sweep or a failure asked it to end
  uint64_t offset = 0;               // the read chain only
  std::vector<std::string> sources;  // the notebook's cells when it was opened
  std::string line;                  // stdout not yet ended by a newline
  std::string stderr_tail;
  std::function<void(NotebookOpened)> on_open;  // until ready (or failed)
  struct Cell {
    std::function<void(CellAnswer)> done;
    Clock::time_point sent;  // when it became the one running (the front)
  };
  std::deque<Cell> cells;
  Clock::time_point started = Clock::now();
  Clock::time_point last_used = Clock::now();

  NotebookInfo info() const { return {id, path, kernel, !cells.empty(), sources.size()}; }
};

struct NotebookKernels::State : std::enable_shared_from_this<State> {
  State(asio::io_context& l, ProcessTable& t, NotebookOptions o) : loop(l), table(t), options(std::move(o)), timer(l) {}

  asio::io_context& loop;
  ProcessTable& table;
  const NotebookOptions options;
  std::mutex mu;  // guards what follows
  std::map<std::string, std::shared_ptr<Kernel>> kernels;
  asio::steady_timer timer;
  bool stopped = false;

  // Everything a kernel's end answers, taken out under the lock and called outside it.
  struct Ending {
    std::function<void(NotebookOpened)> on_open;
    std::vector<std::function<void(CellAnswer)>> cells;
    std::string account, process_id;
  };

  Ending take_ending(Kernel& k) {
    Ending e{std::move(k.on_open), {}, k.account, k.process_id};
    k.on_open = nullptr;
    for (auto& c : k.cells) e.cells.push_back(std::move(c.done));
    k.cells.clear();
    k.closing = true;
    kernels.erase(k.id);
    return e;
  }

  void finish(Ending e, NotebookFailure failure, const std::string& why, bool kill) {
    if (kill && !e.process_id.empty()) table.kill(e.account, e.process_id, /*force=*/false, [](bool) {});
    if (e.on_open) e.on_open({std::nullopt, NotebookFailure::start_failed, why});
    for (auto& done : e.cells) done({std::nullopt, failure, why});
  }

  void end(const std::string& id, NotebookFailure failure, const std::string& why, bool kill) {
    Ending e;
    {
      std::lock_guard lock(mu);
      auto it = kernels.find(id);
      if (it == kernels.end()) return;
      auto k = it->second;
      e = take_ending(*k);
    }
    finish(std::move(e), failure, why, kill);
  }

  void read_next(const std::shared_ptr<Kernel>& k) {
    ReadSpec read;
    read.offset = k->offset;
    table.wait(k->account, k->process_id, read, /*until_output=*/true, Clock::now() + kPollWindow,
               [self = shared_from_this(), k](std::optional<ProcessView> view) { self->on_view(k, view); });
  }

  void on_view(const std::shared_ptr<Kernel>& k, const std::optional<ProcessView>& view) {
    if (!view) return end(k->id, NotebookFailure::ended, "The notebook's kernel has ended", false);
    for (const auto& chunk : view->output) {
      if (chunk.type == "stderr") {
        k->stderr_tail += chunk.data;
        if (k->stderr_tail.size() > kStderrTail) k->stderr_tail.erase(0, k->stderr_tail.size() - kStderrTail);
        continue;
      }
      k->line += chunk.data;
      size_t nl;
      while ((nl = k->line.find('\n')) != std::string::npos) {
        std::string one = k->line.substr(0, nl);
        k->line.erase(0, nl + 1);
        on_line(k, one);
      }
    }
    k->offset = view->next_offset;
    if (view->status == ProcessStatus::running || !view->output.empty() || view->more) return read_next(k);
    std::string why = "The notebook's kernel has ended";
    if (!k->ready && !k->stderr_tail.empty()) why = "The notebook kernel did not start: " + k->stderr_tail;
    end(k->id, NotebookFailure::ended, why, false);
  }

  void on_line(const std::shared_ptr<Kernel>& k, const std::string& text) {
    json msg = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!msg.is_object()) return;  // not ours (a library printing to the real stdout)
    if (msg.contains("failed")) {
      std::string why = "The notebook kernel did not start: " + msg["failed"].dump();
      return end(k->id, NotebookFailure::start_failed, why, true);
    }
    if (msg.contains("ready")) {
      std::function<void(NotebookOpened)> on_open;
      NotebookInfo info;
      {
        std::lock_guard lock(mu);
        if (k->closing) return;
        k->ready = true;
        if (msg["kernel"].is_string()) k->kernel = msg["kernel"].get<std::string>();
        k->last_used = Clock::now();
        on_open = std::move(k->on_open);
        k->on_open = nullptr;
        info = k->info();
      }
      if (on_open) on_open({info, NotebookFailure::none, {}});
      return;
    }
    std::function<void(CellAnswer)> done;
    {
      std::lock_guard lock(mu);
      if (k->cells.empty()) return;
      done = std::move(k->cells.front().done);
      k->cells.pop_front();
      if (!k->cells.empty()) k->cells.front().sent = Clock::now();
      k->last_used = Clock::now();
    }
    if (done) done({std::move(msg), NotebookFailure::none, {}});
  }

  void schedule_sweep() {
    timer.expires_after(options.sweep_interval);
    timer.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      self->sweep();
    });
  }

  // Ends the kernels idle past idle_timeout, those that never said ready and those whose bridge
  // does not answer a cell it should have interrupted long ago.
  void sweep() {
    auto now = Clock::now();
    std::vector<std::pair<std::string, std::string>> ends;  // id, why
    {
      std::lock_guard lock(mu);
      if (stopped) return;
      for (const auto& [id, k] : kernels) {
        if (!k->ready && now - k->started > options.start_timeout)
          ends.emplace_back(
              id, "The notebook kernel did not start within " + std::to_string(options.start_timeout.count()) + " s");
        else if (k->ready && k->cells.empty() && now - k->last_used > options.idle_timeout)
          ends.emplace_back(id, "The notebook's kernel was idle and has been stopped");
        else if (!k->cells.empty() && now - k->cells.front().sent > options.cell_timeout + options.answer_grace)
          ends.emplace_back(id, "The notebook's kernel stopped answering and has been stopped");
      }
    }
    for (const auto& [id, why] : ends) end(id, NotebookFailure::ended, why, true);
    schedule_sweep();
  }
};

NotebookKernels::NotebookKernels(asio::io_context& loop, ProcessTable& table, NotebookOptions options)
    : state_(std::make_shared<State>(loop, table, std::move(options))) {
  std::lock_guard lock(state_->mu);
  state_->schedule_sweep();
}

NotebookKernels::~NotebookKernels() { shut_down(); }

void NotebookKernels::shut_down() {
  std::lock_guard lock(state_->mu);
  state_->stopped = true;
  state_->timer.cancel();
}

void NotebookKernels::open(const BoxSpec& box, std::string path, std::vector<std::string> cells,
                           std::function<void(NotebookOpened)> done) {
  auto k = std::make_shared<Kernel>();
  k->sources = std::move(cells);
  k->id = random_hex(8);
  k->account = box.name;
  k->path = std::move(path);
  k->on_open = std::move(done);
  bool full;
  {
    std::lock_guard lock(state_->mu);
    size_t n = 0;
    for (const auto& [id, other] : state_->kernels) n += other->account == box.name;
    full = n >= state_->options.per_account;
    if (!full) state_->kernels[k->id] = k;
  }
  if (full) {  // answered outside the lock, as every callback
    k->on_open({std::nullopt, NotebookFailure::cap,
                "Too many notebook kernels open (" + std::to_string(state_->options.per_account) +
                    ", [notebooks] per_account); close one first"});
    return;
  }
  auto env = base_env(box, /*tty=*/false);
  env["JUPYTER_RUNTIME_DIR"] = "/tmp/jupyter-runtime";  // connection files: in the box's own /tmp
  env["PYTHONUNBUFFERED"] = "1";
  StartRequest req;
  req.box = box;
  req.command = "notebook kernel: " + k->path;
  req.spawn.argv = {state_->options.python, "-c", kNotebookBridgeScript,
                    std::to_string(state_->options.cell_timeout.count())};
  req.spawn.env = env_strings(env);
  req.spawn.cwd = env.count("HOME") ? env["HOME"] : "/";
  if (auto slash = k->path.rfind('/'); slash != std::string::npos && slash > 0)
    req.spawn.cwd = k->path.substr(0, slash);
  req.spawn.tty = false;
  auto state = state_;
  state_->table.start(std::move(req), [state, k](StartOutcome started) {
    if (started.error) {
      std::string why = "The notebook kernel could not start in the box";
      try {
        std::rethrow_exception(started.error);
      } catch (const std::exception& e) {
        why += std::string(": ") + e.what();
      }
      return state->end(k->id, NotebookFailure::start_failed, why, false);
    }
    bool closing;
    {
      std::lock_guard lock(state->mu);
      k->process_id = started.id;
      closing = k->closing;
    }
    if (closing) {  // closed before it started
      state->table.kill(k->account, started.id, /*force=*/false, [](bool) {});
      return;
    }
    state->read_next(k);
  });
}

void NotebookKernels::execute(const std::string& account, const std::string& id, std::string code,
                              std::function<void(CellAnswer)> done) {
  std::string process_id;
  std::shared_ptr<Kernel> k;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->kernels.find(id);
    if (it != state_->kernels.end() && it->second->account == account && it->second->ready) {
      k = it->second;
      k->cells.push_back({std::move(done), Clock::now()});
      k->last_used = Clock::now();
      process_id = k->process_id;
    }
  }
  if (!k) return done({std::nullopt, NotebookFailure::not_found, "Notebook not found"});
  std::string line = json{{"code", std::move(code)}}.dump() + "\n";
  if (state_->table.input(account, process_id, std::move(line)) != InputResult::ok)
    state_->end(id, NotebookFailure::ended, "The notebook's kernel has ended", true);
}

std::optional<NotebookInfo> NotebookKernels::get(const std::string& account, const std::string& id) {
  std::lock_guard lock(state_->mu);
  auto it = state_->kernels.find(id);
  if (it == state_->kernels.end() || it->second->account != account || !it->second->ready) return std::nullopt;
  return it->second->info();
}

std::optional<std::string> NotebookKernels::cell(const std::string& account, const std::string& id, size_t index) {
  std::lock_guard lock(state_->mu);
  auto it = state_->kernels.find(id);
  if (it == state_->kernels.end() || it->second->account != account || index >= it->second->sources.size())
    return std::nullopt;
  return it->second->sources[index];
}

bool NotebookKernels::close(const std::string& account, const std::string& id) {
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->kernels.find(id);
    if (it == state_->kernels.end() || it->second->account != account) return false;
  }
  state_->end(id, NotebookFailure::ended, "The notebook's kernel was stopped", true);
  return true;
}

}  // namespace agentbox::exec
