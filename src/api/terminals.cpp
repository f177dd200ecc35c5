#include "api/terminals.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <memory>

#include "accounts/caller_routes.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "box/box_error.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "http/takeover_response.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
using accounts::Caller;
using accounts::with_caller;
using accounts::with_reader;

namespace {

using nlohmann::json;

json terminal_json(const exec::TerminalInfo& t) { return {{"id", t.id}, {"created_at", t.created_at}, {"pid", t.pid}}; }

[[noreturn]] void terminal_not_found() { throw HttpError(http::status::not_found, "Session not found"); }

Response describe(exec::Terminals& terminals, const Request& req, const accounts::Caller& caller) {
  auto t = terminals.get(caller.box, req.param("id"));
  if (!t) terminal_not_found();
  return Response::json(terminal_json(*t));
}

}  // namespace

void add_terminal_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  exec::AccountBoxes& boxes = *s.boxes;
  exec::Terminals& terminals = *s.terminals;
  const TerminalRoutesOptions options = s.terminal_options;
  router.add_async(http::verb::post, "/api/terminals",
                   with_caller(callers, [&boxes, &terminals](const Request&, const Caller& caller,
                                                             std::shared_ptr<ResponseWriter> writer) {
                     BoxSpec spec = boxes.spec_for(caller.account, caller.place());
                     SpawnRequest shell = exec::login_shell_request(spec, caller.cwd);
                     // The box answers on the loop; the request waits there, holding no thread. At the
                     // account's limit this throws TerminalLimitError (429). Made in a chat, it is
                     // that chat's (the lists below, api/user_terminal.hpp).
                     terminals.create(spec, std::move(shell), caller.session_id, [writer](exec::CreateOutcome created) {
                       writer->send(created.error ? error_response_for(created.error, "POST /api/terminals", "Terminal")
                                                  : Response::json(terminal_json(*created.terminal)));
                     });
                   }));

  router.add_async(http::verb::get, "/api/terminals",
                   with_reader(callers, [&terminals](const Request&, const Caller& caller) {
                     json list = json::array();
                     // The chat's when the request names one, else all of the account's.
                     for (const auto& t : terminals.list(caller.box, caller.session_id))
                       list.push_back(terminal_json(t));
                     return Response::json(list);
                   }));

  // One path for the REST description and the WebSocket: the route sees the upgrade header.
  auto ctx = std::make_shared<const TerminalSocketContext>(
      TerminalSocketContext{terminals, callers, ApiKeyAuth(options.shared_key_in_frame ? options.api_key : ""),
                            options.socket, options.user_keys, s.profiles});
  router.add_takeover(
      http::verb::get, "/api/terminals/{id}",
      [ctx, &callers, &terminals](Takeover t) {
        if (boost::beast::websocket::is_upgrade(t.parser->get())) return TerminalSocket::serve(std::move(t), ctx);
        if (!t.key_accepted) {
          Response r = error_response(http::status::unauthorized, "Invalid API key");
          r.headers.set(http::field::www_authenticate, "Bearer");
          t.report(401, {.refused = true});  // an Authentication failure, as on any other route
          return respond_and_close(std::move(t), std::move(r));
        }
        // The caller at once when ready, else from the pool: back on the connection's strand.
        auto conn = std::make_shared<Takeover>(std::move(t));
        accounts::resolve_caller(callers, conn->request, false, accounts::HomeUse::read,
                                 [conn, &terminals](accounts::Resolved resolved) {
                                   auto strand = conn->socket.get_executor();
                                   boost::asio::dispatch(strand, [conn, &terminals, resolved = std::move(resolved)] {
                                     Response r;
                                     try {
                                       r = describe(terminals, conn->request, resolved.get());
                                     } catch (...) {
                                       r = error_response_for(std::current_exception(), "GET /api/terminals/{id}");
                                     }
                                     respond_and_close(std::move(*conn), std::move(r));
                                   });
                                 });
      },
      RouteOptions{.auth_in_handler = true});

  router.add_async(http::verb::delete_, "/api/terminals/{id}",
                   with_reader(callers, [&terminals](const Request& req, const Caller& caller,
                                                     std::shared_ptr<ResponseWriter> writer) {
                     terminals.remove(caller.box, req.param("id"), [writer](bool found) {
                       writer->send(found ? Response::json({{"status", "deleted"}})
                                          : error_response(http::status::not_found, "Session not found"));
                     });
                   }));
}

}  // namespace agentbox::api
