// A process's strand: its output read into the log, its end, kill escalation and input.
#include "exec/process_table_impl.hpp"

#include "util/log.hpp"

namespace agentbox::exec {

using namespace ptable;

void ProcessTable::Impl::setup(const std::shared_ptr<Proc>& p, std::optional<std::string> stdin_data,
                               std::optional<std::chrono::milliseconds> timeout) {
  if (p->tty) {
    p->streams[0] = {std::make_unique<Descriptor>(p->strand, p->pty_fd.release()), StreamType::output, true};
    p->open_streams = 1;
  } else {
    p->streams[0] = {std::make_unique<Descriptor>(p->strand, p->stdout_fd.release()), StreamType::stdout_pipe, true};
    p->streams[1] = {std::make_unique<Descriptor>(p->strand, p->stderr_fd.release()), StreamType::stderr_pipe, true};
    p->stdin_pipe = std::make_unique<Descriptor>(p->strand, p->stdin_fd.release());
    p->open_streams = 2;
  }
  for (int i = 0; i < p->open_streams; ++i) arm_read(p, i);
  if (stdin_data) {
    // Pipes: the data is all the input there is, so the command sees EOF after it.
    p->close_stdin_when_written = !p->tty;
    queue_input(p, std::move(*stdin_data));
  }
  if (timeout) {
    p->timeout_timer = std::make_unique<asio::steady_timer>(p->strand, *timeout);
    p->timeout_timer->async_wait([self = shared_from_this(), p](const boost::system::error_code& ec) {
      if (!ec) self->guard.run([&] { self->loop_kill(p, false, nullptr); });
    });
  }
}

void ProcessTable::Impl::arm_read(const std::shared_ptr<Proc>& p, int i) {
  p->streams[i].desc->async_wait(Descriptor::wait_read,
                                 [self = shared_from_this(), p, i](const boost::system::error_code& ec) {
                                   if (ec || !p->streams[i].desc) return;  // closed by finish() or shutdown
                                   self->guard.run([&] {
                                     const bool eof = self->read_available(p, i);
                                     if (eof) {
                                       p->streams[i].open = false;
                                       self->on_stream_eof(p);
                                     } else if (p->streams[i].desc) {
                                       self->arm_read(p, i);
                                     }
                                   });
                                 });
}

bool ProcessTable::Impl::read_available(const std::shared_ptr<Proc>& p, int i) {
  Stream& s = p->streams[i];
  thread_local std::vector<char> buf(kReadBuffer);
  bool got = false, eof = false;
  for (int k = 0; k < kReadsPerWakeup; ++k) {
    const ssize_t n = ::read(s.desc->native_handle(), buf.data(), buf.size());
    if (n > 0) {
      p->log->append(s.type, std::string_view(buf.data(), static_cast<size_t>(n)));
      got = true;
      if (static_cast<size_t>(n) < buf.size()) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // 0, EIO, or an error that will not go away
    break;
  }
  if (got) notify_output(p);
  return eof;
}

void ProcessTable::Impl::on_stream_eof(const std::shared_ptr<Proc>& p) {
  if (--p->open_streams > 0) return;
  bool exited, gone;
  {
    std::lock_guard lock(mu);
    exited = p->exited;
    gone = p->box_gone;
  }
  if (exited || gone) {
    finish(p);
  }
}

void ProcessTable::Impl::handle_end(const std::shared_ptr<Proc>& p, SpawnEnd end) {
  {
    std::lock_guard lock(mu);
    if (p->status != ProcessStatus::running || p->exited || p->box_gone) return;
    if (end.exited) {
      p->exited = true;
      p->raw_status = end.status;
    } else {
      p->box_gone = true;  // everything in the box is dead: its output reaches EOF now
    }
  }
  if (p->timeout_timer) p->timeout_timer.reset();
  if (p->open_streams == 0) {
    finish(p);
  } else {
    arm_drain(p);  // a background child may hold the output open for ever
  }
}

void ProcessTable::Impl::arm_drain(const std::shared_ptr<Proc>& p) {
  if (p->drain_timer) return;
  p->drain_timer = std::make_unique<asio::steady_timer>(p->strand, opts.drain_grace);
  p->drain_timer->async_wait([self = shared_from_this(), p](const boost::system::error_code& ec) {
    if (!ec) self->guard.run([&] { self->finish(p); });
  });
}

// A finished process whose output the disk refused (its volume was full) tries once a second to
// write it, for as long as the process is in memory (kEvictAfter): reads before that come from
// memory anyway, and a restart after it finds the output on disk.
void ProcessTable::Impl::retry_log(const std::shared_ptr<Proc>& p) {
  p->log_retry = std::make_unique<asio::steady_timer>(p->strand, kLogRetry);
  p->log_retry->async_wait(
      [self = shared_from_this(), weak = std::weak_ptr<Proc>(p)](const boost::system::error_code& ec) {
        const std::shared_ptr<Proc> p = weak.lock();  // evicted: the retries end with it
        if (!ec && p)
          self->guard.run([&] {
            if (p->log->write_missed()) self->retry_log(p);
          });
      });
}

void ProcessTable::Impl::close_io(Proc& p) {
  for (auto& s : p.streams) {
    s.desc.reset();
    s.open = false;
  }
  p.stdin_pipe.reset();
  p.drain_timer.reset();
  p.kill_timer.reset();
  p.timeout_timer.reset();
}

void ProcessTable::Impl::finish(const std::shared_ptr<Proc>& p) {
  {
    std::lock_guard lock(mu);
    if (p->status != ProcessStatus::running) return;
  }
  for (int i = 0; i < 2; ++i)
    if (p->streams[i].desc && p->streams[i].open) read_available(p, i);
  // The log is complete before the status says so: a reader that sees "done" has it all.
  const bool log_missed = p->log->finish();
  ProcessStatus status;
  std::optional<int> code;
  const int64_t ended = unix_now();
  {
    std::lock_guard lock(mu);
    status = p->kill_requested || (p->box_gone && !p->exited) ? ProcessStatus::killed : ProcessStatus::done;
    if (p->exited) code = exit_code_of(p->raw_status);
    p->status = status;
    p->exit_code = code;
    p->ended = ended;
    p->finished_at = Clock::now();
    p->stdin_open = false;
  }
  close_io(*p);
  if (log_missed) retry_log(p);
  save_end(p->id, status, code, ended);
  auto waiters = std::move(p->waiters);
  p->waiters.clear();
  for (auto& w : waiters) complete(w);
  auto kill_done = std::move(p->kill_done);
  p->kill_done.clear();
  for (auto& d : kill_done) call_quietly(d, true);
}

void ProcessTable::Impl::save_end(const std::string& id, ProcessStatus status, std::optional<int> code, int64_t ended) {
  // Bounded: past this many a disk that stays full loses the oldest (they read "lost" after a
  // restart, as all of them did before).
  constexpr size_t kMaxUnsaved = 100000;
  {
    std::lock_guard lock(mu);
    unsaved.push_back({id, status, code, ended});
    if (unsaved.size() > kMaxUnsaved) unsaved.pop_front();
  }
  save_unsaved_ends();
}

void ProcessTable::Impl::save_unsaved_ends() {
  std::deque<UnsavedEnd> todo;
  {
    std::lock_guard lock(mu);
    todo.swap(unsaved);
  }
  while (!todo.empty()) {
    const UnsavedEnd& e = todo.front();
    try {
      store.update(e.id, e.status, e.code, e.ended);
    } catch (const std::exception& ex) {
      // The memory copy answers meanwhile; kept for the next try, in order.
      report_store_failure("update (tried again later)", ex);
      std::lock_guard lock(mu);
      unsaved.insert(unsaved.begin(), todo.begin(), todo.end());
      return;
    }
    todo.pop_front();
  }
}

void ProcessTable::Impl::report_store_failure(const char* what, const std::exception& e) {
  std::string message = std::string("process store: ") + what + ": " + e.what();
  {
    std::lock_guard lock(mu);
    if (!reported.insert(message).second) return;
  }
  log::warn("exec", "{}", message);
}

void ProcessTable::Impl::send_signal(const Proc& p, int sig) {
  try {
    boxes.signal(p.account, p.spawn, sig);
  } catch (...) {
    // The box is going away; the escalation timer still ends the process.
  }
}

void ProcessTable::Impl::loop_kill(const std::shared_ptr<Proc>& p, bool force, std::function<void(bool)> done) {
  bool running;
  {
    std::lock_guard lock(mu);
    running = p->status == ProcessStatus::running;
    if (running && !p->exited) p->kill_requested = true;
  }
  if (!running) {
    call_quietly(done, true);
    return;
  }
  if (done) p->kill_done.push_back(std::move(done));
  if (force && p->kill_stage < 2) {
    p->kill_stage = 2;
    send_signal(*p, SIGKILL);
    arm_kill_timer(p);
  } else if (p->kill_stage == 0) {
    p->kill_stage = 1;
    send_signal(*p, SIGTERM);
    arm_kill_timer(p);
  }
}

void ProcessTable::Impl::arm_kill_timer(const std::shared_ptr<Proc>& p) {
  p->kill_timer = std::make_unique<asio::steady_timer>(p->strand, opts.kill_grace);
  p->kill_timer->async_wait([self = shared_from_this(), p](const boost::system::error_code& ec) {
    if (ec) return;
    self->guard.run([&] {
      if (p->kill_stage == 1) {
        p->kill_stage = 2;
        self->send_signal(*p, SIGKILL);
        self->arm_kill_timer(p);
      } else {
        self->finish(p);  // KILL got no exit either (box unreachable): the wait stays bounded
      }
    });
  });
}

void ProcessTable::Impl::queue_input(const std::shared_ptr<Proc>& p, std::string bytes) {
  if (!input_target(*p)) return;
  if (!bytes.empty()) p->input_queue.push_back(std::move(bytes));
  if (!p->writing) write_next(p);
}

void ProcessTable::Impl::close_stdin(const std::shared_ptr<Proc>& p) {
  if (!p->stdin_pipe) return;
  p->stdin_pipe.reset();
  std::lock_guard lock(mu);
  p->stdin_open = false;
}

void ProcessTable::Impl::write_next(const std::shared_ptr<Proc>& p) {
  Descriptor* target = input_target(*p);
  if (!target) return;
  if (p->input_queue.empty()) {
    p->writing = false;
    if (p->close_stdin_when_written) close_stdin(p);
    return;
  }
  p->writing = true;
  asio::async_write(*target, asio::buffer(p->input_queue.front()),
                    [self = shared_from_this(), p](const boost::system::error_code& ec, size_t) {
                      p->writing = false;
                      if (ec) {
                        // The reader is gone (EPIPE) or the process finished.
                        p->input_queue.clear();
                        if (!p->tty) self->close_stdin(p);
                        return;
                      }
                      p->input_queue.pop_front();
                      self->write_next(p);
                    });
}

}  // namespace agentbox::exec
