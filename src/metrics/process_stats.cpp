#include "metrics/process_stats.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace agentbox::metrics {

namespace {

// /proc/self/stat's fields after the command (which may hold spaces and parentheses).
std::vector<std::string> stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> fields;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(line.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

double boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double t = 0;
      in >> t;
      return t;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

size_t open_fds() {
  std::error_code ec;
  size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n > 0 ? n - 1 : 0;  // the iterator's own descriptor
}

}  // namespace

void write_process_stats(Exposition& out) {
  const std::vector<std::string> f = stat_fields();
  // Fields counted from "state" (field 3 of proc(5)) as 0.
  auto field = [&](size_t proc5_number) -> double {
    const size_t i = proc5_number - 3;
    return i < f.size() ? std::stod(f[i]) : 0.0;
  };
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));

  out.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
  out.sample("process_cpu_seconds_total", (field(14) + field(15)) / ticks);
  out.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  out.sample("process_resident_memory_bytes", field(24) * page);
  out.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  out.sample("process_virtual_memory_bytes", field(23));
  out.family("process_open_fds", "gauge", "Number of open file descriptors.");
  out.sample("process_open_fds", static_cast<double>(open_fds()));
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  out.family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
  out.sample("process_max_fds", static_cast<double>(nofile.rlim_cur));
  out.family("process_threads", "gauge", "Number of OS threads in the process.");
  out.sample("process_threads", field(20));
  out.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
  out.sample("process_start_time_seconds", boot_time() + field(22) / ticks);
}

}  // namespace agentbox::metrics
