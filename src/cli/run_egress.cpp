#include "cli/run_egress.hpp"

#include <unistd.h>

#include <mutex>
#include <set>
#include <string_view>

#include <boost/asio/executor_work_guard.hpp>

#include "config/egress_config.hpp"
#include "config/server_config.hpp"
#include "net/egress_listener.hpp"
#include "net/egress_proxy.hpp"
#include "util/error.hpp"

namespace agentbox::cli {
namespace {

// "a,b" -> {"a", "b"}; an empty item is an error (a stray comma hides a typo).
std::vector<std::string> split_list(const char* flag, const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw UsageError(std::string(flag) + ": empty item in \"" + text + "\"");
    items.push_back(std::move(item));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

template <class F>
void as_flag(const char* flag, F&& f) {
  try {
    f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string(flag) + ": " + e.what());
  }
}

// Tells the person at the terminal what the program in the box was refused, once per reason:
// a client that retries should not fill the screen.
class DenialNotices {
 public:
  explicit DenialNotices(bool crlf) : crlf_(crlf) {}
  void operator()(const NetworkDecision& d) {
    if (d.allowed) return;
    {
      std::lock_guard lock(mu_);
      if (!told_.insert(d.reason).second) return;
    }
    std::string line = d.reason + (crlf_ ? "\r\n" : "\n");
    (void)!::write(STDERR_FILENO, line.data(), line.size());  // one write: lines stay whole
  }

 private:
  const bool crlf_;
  std::mutex mu_;
  std::set<std::string> told_;
};

}  // namespace

std::optional<net::EgressConfig> run_egress_config(const RunNetFlags& flags, const net::EgressConfig& profile) {
  net::EgressConfig config;
  config.default_policy = profile.default_policy;
  config.hosts = profile.hosts;
  for (const std::string& text : flags.allow_net)
    as_flag("--allow-net", [&] {
      for (const std::string& item : split_list("--allow-net", text))
        config.default_policy.allow.push_back(net::HostRule::parse(item));
    });
  for (const std::string& text : flags.allow_addresses)
    as_flag("--allow-address", [&] {
      for (const std::string& item : split_list("--allow-address", text))
        config.default_policy.allow_addresses.push_back(net::AddressRange::parse(item));
    });
  for (const std::string& text : flags.add_hosts)
    as_flag("--add-host", [&] {
      size_t eq = text.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
        throw UsageError("--add-host: expected NAME=ADDRESS, got \"" + text + "\"");
      add_static_host(config, std::string_view(text).substr(0, eq), std::string_view(text).substr(eq + 1));
    });
  if (config.default_policy.allows_anything()) return config;
  if (!flags.allow_addresses.empty() || !flags.add_hosts.empty())
    throw UsageError("--allow-address and --add-host need --allow-net HOST (without it the box has no network)");
  return std::nullopt;
}

RunEgress::RunEgress(net::EgressConfig config, bool crlf) {
  // The server's defaults for timeouts and the bounds on connections and their buffers.
  const ServerConfig::EgressProxy defaults;
  net::EgressLimits limits;
  limits.connections_per_account = defaults.connections;
  limits.connect_timeout = defaults.connect_timeout;
  limits.idle_timeout = defaults.idle_timeout;
  limits.tunnel_idle_timeout = defaults.tunnel_idle_timeout;
  limits.connect_rate = defaults.connect_rate;
  limits.socket_buffer = defaults.socket_buffer;
  auto notices = std::make_shared<DenialNotices>(crlf);
  context_ = std::make_shared<net::EgressContext>(std::make_shared<const net::EgressConfig>(std::move(config)), limits,
                                                  net::DecisionSink([notices](NetworkDecision d) { (*notices)(d); }));
  proxy_ = std::make_unique<net::EgressProxy>(io_, context_);
}

RunEgress::~RunEgress() {
  proxy_->stop_all();
  io_.stop();  // open tunnels and requests end with the command: their handlers are dropped
  if (thread_.joinable()) thread_.join();
}

void RunEgress::start(pid_t init_pid, uint16_t port) {
  proxy_->serve(net::listen_in_netns_of(init_pid, port), "run", "");
  thread_ = std::thread([this] {
    auto work = boost::asio::make_work_guard(io_);  // serves until stopped, between connections too
    io_.run();
  });
}

}  // namespace agentbox::cli
