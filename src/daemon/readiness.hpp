#pragma once
// What GET /health/ready asks: does the store answer, does the state dir take a new file, does
// the box loop run. Checked at most once a second (a probe every few seconds from each of many
// kubelets costs one check); between checks the last answer is given again.
//
// Runs on: the API's io thread (failing()); the box loop's heartbeat job stamps an atomic. Both
// the store query and the file are quick: nothing here waits for the box loop.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "util/box_loop.hpp"

namespace agentbox::daemon {

class Readiness {
 public:
  // store: a small query, throwing if the database does not answer.
  Readiness(std::function<void()> store, std::string state_dir, BoxLoop& loop);

  // "" when ready; else "store: ...", "state_dir: ..." or "boxes: ...".
  std::string failing();

 private:
  using Clock = std::chrono::steady_clock;
  std::string check();
  std::string check_box_loop(Clock::time_point now);

  std::function<void()> store_;
  const std::string state_dir_;
  BoxLoop& loop_;
  std::mutex mu_;  // guards the fields below
  Clock::time_point checked_{};
  std::string last_;
  // The box loop's heartbeat: a job posted at posted_ stamps answered_ when it runs.
  Clock::time_point posted_{};
  std::shared_ptr<std::atomic<Clock::rep>> answered_ = std::make_shared<std::atomic<Clock::rep>>(0);
};

}  // namespace agentbox::daemon
