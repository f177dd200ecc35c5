#pragma once
// The operator's commands talk to the running daemon's /admin/ routes with the admin key
// (`agentbox backup ...`, `agentbox accounts ...`). find_admin_target() finds the daemon the way
// `agentbox serve` reads its configuration (--config FILE, else $AGENTBOX_CONFIG, else the
// defaults; --listen and --state override), and the admin key in admin_key /
// AGENTBOX_ADMIN_KEY, else STATE/admin_key. AdminClient is a small synchronous HTTP/1.1 client
// (Boost.Beast) whose every failure is an AdminError with one line fit for the terminal.
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace CLI {
class App;
}

namespace agentbox::cli {

struct AdminTargetOptions {
  std::optional<std::string> config;  // --config FILE
  std::optional<std::string> listen;  // --listen HOST:PORT of the running daemon
  std::optional<std::string> state;   // --state DIR (where admin_key is)
};

// Adds --config, --listen and --state to a subcommand.
void add_admin_target_options(CLI::App& command, AdminTargetOptions& options);

struct AdminTarget {
  std::string host;  // numeric; a wildcard listen address is reached on loopback
  uint16_t port = 0;
  std::string admin_key;
  std::string url() const;  // "http://127.0.0.1:8000"
};

// Throws UsageError with one line: a config error, a listen port of 0, an admin key file that
// is missing or unreadable (run as root, or set AGENTBOX_ADMIN_KEY).
AdminTarget find_admin_target(const AdminTargetOptions& options);

// One line: "agentbox is not running at http://127.0.0.1:8000 (Connection refused)",
// "the daemon at ... refused the admin key", or the daemon's own detail ("Unknown user: bob").
class AdminError : public Error {
 public:
  AdminError(std::string message, unsigned status = 0) : Error(std::move(message)), status_(status) {}
  unsigned status() const noexcept { return status_; }  // the HTTP status; 0 when none came

 private:
  unsigned status_;
};

class AdminClient {
 public:
  explicit AdminClient(AdminTarget target) : target_(std::move(target)) {}

  // The JSON body of a 2xx answer (null when empty); anything else throws AdminError.
  nlohmann::json request(boost::beast::http::verb method, std::string_view path,
                         const std::optional<nlohmann::json>& body = std::nullopt) const;
  nlohmann::json get(std::string_view path) const { return request(boost::beast::http::verb::get, path); }
  nlohmann::json post(std::string_view path, const nlohmann::json& body) const {
    return request(boost::beast::http::verb::post, path, body);
  }
  nlohmann::json del(std::string_view path) const { return request(boost::beast::http::verb::delete_, path); }

  const AdminTarget& target() const { return target_; }

 private:
  AdminTarget target_;
};

// "2026-12-02 05:40:12 UTC" for a unix time.
std::string utc_time(double unix_seconds);

// A path segment percent-encoded for a URL (`/admin/accounts/` + url_segment(name)).
std::string url_segment(std::string_view text);

}  // namespace agentbox::cli
