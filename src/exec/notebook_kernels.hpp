#pragma once
// NotebookKernels: the Jupyter kernels behind /notebooks (API.md Part A), one per open notebook.
// A kernel is an ordinary command of its account (ProcessTable: in the user's box, as the user,
// with the box's limits and egress; it shows in GET /execute): Debian's python3 running the
// bridge (exec/notebook_bridge.py), which starts ipykernel through jupyter_client and speaks
// JSON lines on its stdin and stdout. The daemon writes one line per cell and reads one answer
// per line, in order; it never connects to the kernel's ZMQ sockets inside the box.
//
// A kernel ends on close(), when it has been idle (no cell running or waiting) for
// idle_timeout, when its box goes away (its command ends), or when the bridge does not answer a
// cell within cell_timeout plus a grace (the bridge itself interrupts a cell at cell_timeout).
// An account has at most per_account kernels, starting ones included.
//
// Runs on: public methods from any thread; callbacks on the box loop (ProcessTable's waits) or
// on `loop` (the sweep timer), never under the lock. State is guarded by one mutex, held briefly.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "box/box_spec.hpp"
#include "exec/process_table.hpp"

namespace agentbox::exec {

struct NotebookOptions {
  size_t per_account = 4;                   // kernels open at once per account; one more: refused
  std::chrono::seconds idle_timeout{3600};  // a kernel with no cell running this long ends
  std::chrono::seconds cell_timeout{300};   // a cell running this long is interrupted
  std::string python = "/usr/bin/python3";  // Debian's, where python3-ipykernel is installed
  std::chrono::seconds start_timeout{120};  // the bridge must say ready within this
  std::chrono::seconds answer_grace{30};    // past cell_timeout, the bridge is taken for hung
  std::chrono::milliseconds sweep_interval{1000};
};

struct NotebookInfo {  // GET /notebooks/{id}
  std::string id;
  std::string path;    // the .ipynb as the box sees it
  std::string kernel;  // the kernel's name ("python3")
  bool busy = false;   // a cell is running or waiting
  size_t cells = 0;    // cells in the notebook when it was opened
};

enum class NotebookFailure { none, cap, start_failed, not_found, ended };

struct NotebookOpened {
  std::optional<NotebookInfo> info;
  NotebookFailure failure = NotebookFailure::none;
  std::string detail;  // a sentence for the client when it failed
};

struct CellAnswer {
  std::optional<nlohmann::json> result;  // {"status", "execution_count", "outputs"}
  NotebookFailure failure = NotebookFailure::none;
  std::string detail;
};

class NotebookKernels {
 public:
  NotebookKernels(boost::asio::io_context& loop, ProcessTable& table, NotebookOptions options);
  ~NotebookKernels();
  NotebookKernels(const NotebookKernels&) = delete;
  NotebookKernels& operator=(const NotebookKernels&) = delete;

  // Starts a kernel for the notebook at box path `path` in `box` (box.name: the account);
  // done once, when it is ready or could not start.
  // `cells` are the sources of the notebook's cells, run by index when a request sends none.
  void open(const BoxSpec& box, std::string path, std::vector<std::string> cells,
            std::function<void(NotebookOpened)> done);
  // The source of cell `index` as the notebook held it when opened; nullopt past its end.
  std::optional<std::string> cell(const std::string& account, const std::string& id, size_t index);
  // Runs code in the kernel; answers queue behind earlier cells. done once.
  void execute(const std::string& account, const std::string& id, std::string code,
               std::function<void(CellAnswer)> done);
  std::optional<NotebookInfo> get(const std::string& account, const std::string& id);
  // Ends the kernel (its cells waiting are answered "ended"); false when there is no such kernel.
  bool close(const std::string& account, const std::string& id);

  // Stops the sweep; kernels are left to their boxes. Idempotent; not from a loop thread.
  void shut_down();

 private:
  struct Kernel;
  struct State;
  std::shared_ptr<State> state_;  // shared with the callbacks it queues
};

}  // namespace agentbox::exec
