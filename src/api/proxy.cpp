#include "api/proxy.hpp"

#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>

#include <charconv>

#include "accounts/caller_routes.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
using accounts::Caller;
using accounts::with_caller;

namespace {

namespace urls = boost::urls;
using nlohmann::json;

// Every method a box's server may want (REST, WebDAV, ...); CONNECT has no origin-form target.
constexpr http::verb kMethods[] = {
    http::verb::delete_,    http::verb::get,         http::verb::head,      http::verb::post,    http::verb::put,
    http::verb::options,    http::verb::trace,       http::verb::copy,      http::verb::lock,    http::verb::mkcol,
    http::verb::move,       http::verb::propfind,    http::verb::proppatch, http::verb::search,  http::verb::unlock,
    http::verb::bind,       http::verb::rebind,      http::verb::unbind,    http::verb::acl,     http::verb::report,
    http::verb::mkactivity, http::verb::checkout,    http::verb::merge,     http::verb::msearch, http::verb::notify,
    http::verb::subscribe,  http::verb::unsubscribe, http::verb::patch,     http::verb::purge,   http::verb::mkcalendar,
    http::verb::link,       http::verb::unlink,
};

std::uint16_t port_of(const Request& req) {
  const std::string& text = req.param("port");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535)
    unprocessable("Port must be a number from 1 to 65535, not '" + text + "'");
  return static_cast<std::uint16_t>(value);
}

json ports_json(const std::vector<exec::AccountBoxes::ListeningPort>& ports) {
  json list = json::array();
  for (const auto& p : ports)
    list.push_back({{"port", p.port},
                    {"pid", p.pid > 0 ? json(p.pid) : json(nullptr)},  // 0: nobody holding it was found
                    {"process", p.name.empty() ? json(nullptr) : json(p.name)}});
  return {{"ports", std::move(list)}};
}

// The connection to the caller's box, on the connection's strand; or the answer why not.
void proxy_to_box(ProxySession& session, exec::AccountBoxes& boxes, const accounts::Resolved& resolved) {
  const Request& req = session.request();
  try {
    const accounts::Caller& caller = resolved.get();
    ProxyTarget target;
    target.port = port_of(req);
    auto rest = upstream_target(req.target);
    if (!rest) throw HttpError(http::status::bad_request, "Invalid request target");
    target.target = std::move(*rest);
    target.prefix = "/proxy/" + std::to_string(target.port);
    boxes.touch(caller.box);  // a preview in use keeps the box from its idle stop
    target.open = [&boxes, account = caller.box](int family, std::function<void(UniqueFd, std::string)> done) {
      boxes.open_socket_in_box(account, family, std::move(done));
    };
    session.start(std::move(target));
  } catch (...) {
    session.reject(error_response_for(std::current_exception(), "proxy " + req.path));
  }
}

}  // namespace

ProxyOptions proxy_options(const ServerConfig::Proxy& config) {
  ProxyOptions o;
  o.connect_timeout = config.connect_timeout;
  o.response_timeout = config.response_timeout;
  o.idle_timeout = config.idle_timeout;
  o.tunnel_idle_timeout = config.tunnel_idle_timeout;
  return o;
}

std::optional<std::string> upstream_target(std::string_view request_target) {
  auto parsed = urls::parse_origin_form(request_target);
  if (!parsed) return std::nullopt;
  // The path past /proxy/{port}, still encoded: an encoded slash stays one.
  std::string_view path = parsed->encoded_path();
  for (int skip = 0; skip < 2; ++skip) {
    if (path.empty() || path.front() != '/') return std::nullopt;
    const auto next = path.find('/', 1);
    path = next == std::string_view::npos ? std::string_view() : path.substr(next);
  }
  std::string out = path.empty() ? "/" : std::string(path);
  urls::url rest(*parsed);
  rest.params().erase("user_id");  // names the caller to us, not to the box's server
  if (rest.has_query() && !rest.encoded_query().empty()) out.append("?").append(rest.encoded_query());
  return out;
}

void add_proxy_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  exec::AccountBoxes& boxes = *s.boxes;
  const ProxyOptions options = s.proxy_options;
  router.add_async(
      http::verb::get, "/ports",
      with_reader(callers, [&boxes](const Request&, const Caller& caller, std::shared_ptr<ResponseWriter> writer) {
        boxes.list_ports(caller.box, [writer](std::vector<exec::AccountBoxes::ListeningPort> ports) {
          writer->send(Response::json(ports_json(ports)));
        });
      }));

  auto proxy = [&callers, &boxes, options](Takeover conn) {
    auto strand = conn.socket.get_executor();
    auto session = std::make_shared<ProxySession>(std::move(conn), options);
    // The caller at once when ready, else from the pool: back on the connection's strand.
    // A box's port: an account with no volume has no box to proxy to, and gets no volume for it.
    accounts::resolve_caller(callers, session->request(), /*query_user_allowed=*/true, accounts::HomeUse::read,
                             [strand, session, &boxes](accounts::Resolved resolved) {
                               boost::asio::dispatch(strand, [session, &boxes, resolved = std::move(resolved)] {
                                 proxy_to_box(*session, boxes, resolved);
                               });
                             });
  };
  for (http::verb method : kMethods) {
    router.add_takeover(method, "/proxy/{port}", proxy);
    router.add_takeover(method, "/proxy/{port}/{path:path}", proxy);
  }
}

}  // namespace agentbox::api
