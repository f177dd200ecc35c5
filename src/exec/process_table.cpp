#include "exec/process_table.hpp"

#include "exec/process_table_impl.hpp"

namespace agentbox::exec {

using namespace ptable;

// ---- the table's inside: shutdown, waits, retention, views, start ---------------------------

void ProcessTable::Impl::shut_down() {
  if (guard.closed()) return;
  guard.close();        // waits for the handlers at work
  save_unsaved_ends();  // the last chance for ends a full disk refused
  std::vector<std::shared_ptr<Proc>> all;
  {
    std::lock_guard lock(mu);
    for (auto& [id, p] : procs) all.push_back(p);
  }
  for (auto& p : all)
    asio::post(p->strand, [p] {
      close_io(*p);
      for (auto& w : p->waiters) w->timer.reset();
      p->waiters.clear();
      p->kill_done.clear();
    });
  asio::post(purge_strand, [self = shared_from_this()] { self->purge_timer.reset(); });
}

void ProcessTable::Impl::complete(const std::shared_ptr<WaitOp>& w) {
  w->timer.reset();
  if (!w->claim()) return;
  std::optional<ProcessView> view;
  try {
    if (auto p = w->proc.lock()) {
      view = view_of(*p, w->read);
    } else {
      view = load_view(w->account, w->id, w->read);
    }
  } catch (...) {
    // The store failed: answer as for an unknown process rather than never.
  }
  auto done = std::move(w->done);
  w->done = nullptr;
  call_quietly(done, std::move(view));
}

void ProcessTable::Impl::start_wait(const std::shared_ptr<Proc>& p, const std::shared_ptr<WaitOp>& w) {
  if (w->settled()) return;
  bool finished;
  {
    std::lock_guard lock(mu);
    finished = p->status != ProcessStatus::running;
  }
  if (finished || (w->until_output && p->log->end_offset() > w->read.offset) || Clock::now() >= w->deadline) {
    complete(w);
    return;
  }
  w->timer = std::make_unique<asio::steady_timer>(p->strand, w->deadline);
  w->timer->async_wait([self = shared_from_this(), w](const boost::system::error_code& ec) {
    if (!ec) self->guard.run([&] { self->complete(w); });
  });
  p->waiters.push_back(w);
  if (p->waiters.size() >= p->prune_mark) {
    prune_waiters(*p);
    p->prune_mark = std::max<size_t>(16, 2 * p->waiters.size());
  }
}

void ProcessTable::Impl::prune_waiters(Proc& p) {
  std::erase_if(p.waiters, [](const std::shared_ptr<WaitOp>& w) {
    if (!w->settled()) return false;
    w->timer.reset();
    return true;
  });
}

void ProcessTable::Impl::notify_output(const std::shared_ptr<Proc>& p) {
  if (p->waiters.empty()) return;
  const uint64_t end = p->log->end_offset();
  for (auto& w : p->waiters)
    if (!w->settled() && w->until_output && end > w->read.offset) complete(w);
  prune_waiters(*p);
}

void ProcessTable::Impl::purge() {
  const int64_t cutoff = unix_now() - static_cast<int64_t>(opts.retention.count());
  std::set<std::string> dropped;  // beyond keep_finished: out of memory too, their logs are gone
  try {
    std::vector<std::string> gone = store.purge_ended_before_returning_logs(cutoff);
    if (opts.keep_finished > 0)
      for (const auto& d : store.purge_finished_beyond(opts.keep_finished)) {
        gone.push_back(d.log_path);
        dropped.insert(d.id);
      }
    {  // a log still writing what its disk refused must not make its files again once removed
      const std::set<std::string> paths(gone.begin(), gone.end());
      std::lock_guard lock(mu);
      for (const auto& [id, p] : procs)
        if (paths.contains(p->log->path())) p->log->abandon();
    }
    for (const auto& path : gone) OutputLog::remove(path);
  } catch (const std::exception& e) {
    report_store_failure("purge (tried again next round)", e);
  }
  save_unsaved_ends();
  std::vector<std::shared_ptr<Proc>> evicted;
  {
    std::lock_guard lock(mu);
    const auto now = Clock::now();
    std::set<std::string> end_unsaved;  // stays in memory, the one copy that knows its end
    for (const auto& e : unsaved) end_unsaved.insert(e.id);
    for (auto it = procs.begin(); it != procs.end();) {
      const Proc& p = *it->second;
      if (p.status != ProcessStatus::running && !end_unsaved.contains(p.id) &&
          (p.ended < cutoff || now - p.finished_at >= kEvictAfter || dropped.contains(p.id))) {
        evicted.push_back(std::move(it->second));
        it = procs.erase(it);
      } else {
        ++it;
      }
    }
  }
  purge_timer = std::make_unique<asio::steady_timer>(purge_strand, opts.purge_interval);
  purge_timer->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->guard.run([&] { self->purge(); });
  });
}

auto ProcessTable::Impl::find_locked(const std::string& account, const std::string& id) -> std::shared_ptr<Proc> {
  auto it = procs.find(id);
  if (it == procs.end() || it->second->account != account) return nullptr;
  return it->second;
}

auto ProcessTable::Impl::find(const std::string& account, const std::string& id) -> std::shared_ptr<Proc> {
  std::lock_guard lock(mu);
  return find_locked(account, id);
}

ProcessView ProcessTable::Impl::view_of(const Proc& p, const ReadSpec& read) {
  ProcessView v;
  {
    // Status first, output second: a "done" view then carries all the output.
    std::lock_guard lock(mu);
    v.id = p.id;
    v.command = p.command;
    v.status = p.status;
    v.exit_code = p.exit_code;
  }
  fill_output(v, p.log->read(read.offset, read.max_bytes, read.tail_lines));
  return v;
}

std::optional<ProcessView> ProcessTable::Impl::load_view(const std::string& account, const std::string& id,
                                                         const ReadSpec& read) {
  auto rec = store.get(account, id);
  if (!rec) return std::nullopt;
  ProcessView v;
  v.id = rec->id;
  v.command = rec->command;
  v.status = rec->status;
  if (rec->exit_code) v.exit_code = static_cast<int>(*rec->exit_code);
  v.next_offset = read.offset;
  try {
    fill_output(v, OutputLog::open(rec->log_path)->read(read.offset, read.max_bytes, read.tail_lines));
  } catch (const Error&) {
    // The log is gone (removed by hand, or never written): the record still answers.
  }
  return v;
}

void ProcessTable::Impl::started(const std::shared_ptr<Proc>& p, SpawnResult spawned, const std::string& log_path,
                                 std::optional<std::string> stdin_data,
                                 std::optional<std::chrono::milliseconds> timeout,
                                 const std::function<void(StartOutcome)>& done) {
  p->spawn = spawned.id;
  p->pty_fd = std::move(spawned.pty_master);
  ProcessRecord rec;
  rec.id = p->id;
  rec.account = p->account;
  rec.command = p->command;
  rec.started = unix_now();
  rec.log_path = log_path;
  rec.chat = p->chat;
  try {
    if (p->tty && !p->pty_fd) throw Error("spawn: no terminal for the command");
    for (int fd : {p->pty_fd.get(), p->stdout_fd.get(), p->stderr_fd.get(), p->stdin_fd.get()})
      if (fd >= 0) set_nonblocking(fd);
    store.insert(rec);
  } catch (...) {
    // Not recorded means not started: nobody could ever see or stop it.
    send_signal(*p, SIGKILL);
    OutputLog::remove(log_path);
    call_quietly(done, StartOutcome{{}, std::current_exception()});
    return;
  }
  {
    std::lock_guard lock(mu);
    procs[p->id] = p;
  }
  setup(p, std::move(stdin_data), timeout);
  call_quietly(done, StartOutcome{p->id, nullptr});
}

void ProcessTable::Impl::start(StartRequest req, std::function<void(StartOutcome)> done) {
  std::shared_ptr<OutputLog> log;
  std::string id, log_path;
  const std::string log_dir = opts.log_dir_of ? opts.log_dir_of(req.box.name) : opts.log_dir;
  for (int attempt = 0;; ++attempt) {
    id = new_process_id();
    log_path = log_dir + "/" + id + ".log";
    try {
      log = OutputLog::create(log_path, opts.output_cap, opts.memory_tail);  // exclusive: the id is new
      break;
    } catch (const Error& e) {
      if (e.code() != EEXIST || attempt + 1 >= kIdAttempts) throw;
    }
  }

  auto p = std::make_shared<Proc>(loop.strand_of(req.box.name));
  p->id = id;
  p->account = req.box.name;
  p->command = req.command;
  p->chat = req.chat;
  p->tty = req.spawn.tty;
  p->log = log;
  p->stdin_open = req.spawn.tty || !req.stdin_data;

  std::vector<UniqueFd> stdio;
  if (!p->tty) {
    UniqueFd child_in, child_out, child_err;
    make_pipe(child_in, p->stdin_fd);
    make_pipe(p->stdout_fd, child_out);
    make_pipe(p->stderr_fd, child_err);
    stdio.push_back(std::move(child_in));
    stdio.push_back(std::move(child_out));
    stdio.push_back(std::move(child_err));
  }

  // The box calls these on the account's strand, which is the process's: they run at once.
  auto self = shared_from_this();
  SpawnHandlers h;
  h.started = [self, p, log_path, stdin_data = req.stdin_data, timeout = req.timeout, done](SpawnResult r) {
    auto result = std::make_shared<SpawnResult>(std::move(r));
    self->dispatch(p->strand, [self, p, result, log_path, stdin_data, timeout, done]() mutable {
      self->started(p, std::move(*result), log_path, std::move(stdin_data), timeout, done);
    });
  };
  h.failed = [self, log_path, done](std::exception_ptr error) {
    OutputLog::remove(log_path);
    call_quietly(done, StartOutcome{{}, error});
  };
  h.ended = [self, p](SpawnEnd end) { self->dispatch(p->strand, [self, p, end] { self->handle_end(p, end); }); };
  boxes.spawn(req.box, std::move(req.spawn), std::move(stdio), std::move(h));
}

ProcessTable::ProcessTable(BoxLoop& loop, ProcessSpawner& boxes, ProcessStore& store, ProcessTableOptions opts)
    : impl_(std::make_shared<Impl>(loop, boxes, store, std::move(opts))) {
  impl_->post(impl_->purge_strand, [impl = impl_.get()] { impl->purge(); });
}

ProcessTable::~ProcessTable() { shut_down(); }

void ProcessTable::shut_down() { impl_->shut_down(); }

void ProcessTable::start(StartRequest req, std::function<void(StartOutcome)> done) {
  impl_->start(std::move(req), std::move(done));
}

std::vector<ProcessSummary> ProcessTable::list(const std::string& account) { return list(account, {}); }

std::vector<ProcessSummary> ProcessTable::list(const std::string& account, const std::string& chat) {
  Impl& im = *impl_;
  const auto records = im.store.list_by_account(account);
  std::vector<ProcessSummary> out;
  out.reserve(records.size());
  std::lock_guard lock(im.mu);
  for (const auto& r : records) {
    if (!chat.empty() && r.chat != chat) continue;
    ProcessSummary s;
    s.id = r.id;
    s.command = r.command;
    s.status = r.status;
    if (r.exit_code) s.exit_code = static_cast<int>(*r.exit_code);
    if (auto p = im.find_locked(account, r.id)) {  // newer than the store while it runs
      s.status = p->status;
      s.exit_code = p->exit_code;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<ProcessView> ProcessTable::get(const std::string& account, const std::string& id, const ReadSpec& read) {
  if (auto p = impl_->find(account, id)) return impl_->view_of(*p, read);
  return impl_->load_view(account, id, read);
}

std::shared_ptr<ProcessTable::Wait> ProcessTable::wait(const std::string& account, const std::string& id,
                                                       const ReadSpec& read, bool until_output,
                                                       std::chrono::steady_clock::time_point deadline,
                                                       std::function<void(std::optional<ProcessView>)> done) {
  Impl& im = *impl_;
  auto w = std::make_shared<Impl::WaitOp>();
  w->account = account;
  w->id = id;
  w->read = read;
  w->until_output = until_output;
  w->deadline = deadline;
  w->done = std::move(done);
  if (auto p = im.find(account, id)) {
    w->proc = p;
    im.post(p->strand, [&im, p, w] { im.start_wait(p, w); });
  } else {
    im.post(im.strand_for(account), [&im, w] { im.complete(w); });  // from the store, or nullopt
  }
  return w;
}

InputResult ProcessTable::input(const std::string& account, const std::string& id, std::string bytes) {
  Impl& im = *impl_;
  std::shared_ptr<Impl::Proc> p;
  bool close_after = false;
  {
    std::lock_guard lock(im.mu);
    p = im.find_locked(account, id);
    if (p) {
      if (p->status != ProcessStatus::running || p->exited) return InputResult::exited;
      if (!p->stdin_open) return InputResult::closed;
      // Without a terminal nothing turns Ctrl-D into end of input: "\x04" closes stdin here,
      // after the bytes before it (what follows it has nowhere to go).
      if (const size_t eot = bytes.find('\x04'); !p->tty && eot != std::string::npos) {
        bytes.resize(eot);
        close_after = true;
        p->stdin_open = false;
      }
    }
  }
  if (!p) return im.store.get(account, id) ? InputResult::exited : InputResult::not_found;
  im.post(p->strand, [&im, p, bytes = std::move(bytes), close_after]() mutable {
    if (close_after) p->close_stdin_when_written = true;
    im.queue_input(p, std::move(bytes));
  });
  return InputResult::ok;
}

bool ProcessTable::signal(const std::string& account, const std::string& id, int sig) {
  Impl& im = *impl_;
  std::shared_ptr<Impl::Proc> p;
  {
    std::lock_guard lock(im.mu);
    p = im.find_locked(account, id);
    if (!p || p->status != ProcessStatus::running || p->exited) return false;
  }
  im.post(p->strand, [&im, p, sig] { im.send_signal(*p, sig); });
  return true;
}

void ProcessTable::kill(const std::string& account, const std::string& id, bool force,
                        std::function<void(bool found)> done) {
  Impl& im = *impl_;
  if (auto p = im.find(account, id)) {
    im.post(p->strand, [&im, p, force, done = std::move(done)]() mutable { im.loop_kill(p, force, std::move(done)); });
  } else {
    im.post(im.strand_for(account), [&im, account, id, done = std::move(done)]() mutable {
      bool found = false;
      try {
        found = im.store.get(account, id).has_value();  // finished earlier: its record stays as is
      } catch (...) {
      }
      Impl::call_quietly(done, found);
    });
  }
}

}  // namespace agentbox::exec
