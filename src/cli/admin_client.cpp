#include "cli/admin_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cctype>
#include <ctime>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "config/secret_file.hpp"
#include "config/server_config.hpp"
#include "util/error.hpp"

namespace agentbox::cli {

namespace asio = boost::asio;
namespace http = boost::beast::http;

void add_admin_target_options(CLI::App& command, AdminTargetOptions& o) {
  command
      .add_option("--config", o.config, "The daemon's config file (default $AGENTBOX_CONFIG, else built-in defaults)")
      ->type_name("FILE");
  command.add_option("--listen", o.listen, "The running daemon's address, if not the config's")->type_name("ADDR:PORT");
  command.add_option("--state", o.state, "The daemon's state directory (holds admin_key), if not the config's")
      ->type_name("DIR");
}

std::string AdminTarget::url() const {
  return host.find(':') != std::string::npos ? fmt::format("http://[{}]:{}", host, port)
                                             : fmt::format("http://{}:{}", host, port);
}

AdminTarget find_admin_target(const AdminTargetOptions& o) {
  ServerConfig config;
  ListenAddress listen;
  try {
    config = load_server_config(o.config);
    if (o.listen) config.listen = *o.listen;
    if (o.state) config.state_dir = *o.state;
    listen = parse_listen_address(config.listen);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (listen.port == 0)
    throw UsageError("the configured listen port is 0 (any free port): give the running daemon's --listen ADDR:PORT");
  AdminTarget t;
  t.host = listen.host == "0.0.0.0" ? "127.0.0.1" : listen.host == "::" ? "::1" : listen.host;
  t.port = listen.port;
  if (config.admin_key) {
    t.admin_key = *config.admin_key;
    return t;
  }
  const std::string path = absolute_path(config.state_dir) + "/admin_key";
  try {
    std::optional<std::string> key = read_secret_file(path, /*missing_ok=*/true);
    if (!key)
      throw UsageError(
          fmt::format("no admin key: {} does not exist (has the daemon started with this state directory?)", path));
    t.admin_key = *key;
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(fmt::format("cannot read the admin key: {} (run as root, or set AGENTBOX_ADMIN_KEY)", e.what()));
  }
  return t;
}

nlohmann::json AdminClient::request(http::verb method, std::string_view path,
                                    const std::optional<nlohmann::json>& body) const {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(target_.host, ec);
  if (ec) throw AdminError(fmt::format("bad daemon address {}: {}", target_.host, ec.message()));
  socket.connect({address, target_.port}, ec);
  if (ec) throw AdminError(fmt::format("agentbox is not running at {} ({})", target_.url(), ec.message()));

  http::request<http::string_body> req{method, std::string(path), 11};
  req.set(http::field::host, fmt::format("{}:{}", target_.host, target_.port));
  req.set(http::field::authorization, "Bearer " + target_.admin_key);
  req.set(http::field::user_agent, "agentbox-cli");
  if (body) {
    req.set(http::field::content_type, "application/json");
    req.body() = body->dump();
  }
  req.keep_alive(false);
  req.prepare_payload();
  http::write(socket, req, ec);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (!ec) http::read(socket, buffer, res, ec);
  if (ec) throw AdminError(fmt::format("no answer from agentbox at {} ({})", target_.url(), ec.message()));

  const unsigned status = res.result_int();
  nlohmann::json answer =
      res.body().empty() ? nlohmann::json(nullptr) : nlohmann::json::parse(res.body(), nullptr, false);
  if (status >= 200 && status < 300) {
    if (answer.is_discarded())
      throw AdminError(fmt::format("agentbox at {} answered something not JSON", target_.url()), status);
    return answer;
  }
  std::string detail = answer.is_object() && answer.contains("detail") && answer["detail"].is_string()
                           ? answer["detail"].get<std::string>()
                           : std::string(res.reason());
  if (status == 401)
    throw AdminError(
        fmt::format("agentbox at {} refused the admin key ({}): is it the daemon of this config and state?",
                    target_.url(), detail),
        status);
  if (status == 404 && detail == "Not Found")
    throw AdminError(fmt::format("agentbox at {} has no {} (an older version?)", target_.url(), path), status);
  throw AdminError(detail, status);
}

std::string url_segment(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string utc_time(double unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace agentbox::cli
