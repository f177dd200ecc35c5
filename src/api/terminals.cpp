#include "api/terminals.hpp"

#include <boost/beast/websocket/rfc6455.hpp>

#include <memory>

#include "api/errors.hpp"
#include "api/services.hpp"
#include "box/box_error.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "http/takeover_response.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

using nlohmann::json;

json terminal_json(const exec::TerminalInfo& t) {
  return {{"id", t.id}, {"created_at", t.created_at}, {"pid", t.pid}};
}

[[noreturn]] void terminal_not_found() { throw HttpError(http::status::not_found, "Session not found"); }

// Why a terminal did not start, as the client should see it.
Response create_error_response(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const SpawnError& e) {
    return error_response(http::status::bad_request, std::string("Terminal could not start: ") + e.what());
  } catch (...) {
    return response_for_exception(std::current_exception(), "POST /api/terminals");
  }
}

Response describe(accounts::AccountDirectory& callers, exec::Terminals& terminals, const Request& req) {
  accounts::Caller caller = callers.resolve(req);
  auto t = terminals.get(caller.account.name, req.param("id"));
  if (!t) terminal_not_found();
  return Response::json(terminal_json(*t));
}

}  // namespace

void add_terminal_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  exec::AccountBoxes& boxes = *s.boxes;
  exec::Terminals& terminals = *s.terminals;
  const TerminalRoutesOptions options = s.terminal_options;
  router.translate_errors(&domain_error_response);  // FsError, BoxUnavailable... as statuses
  router.add_async(http::verb::post, "/api/terminals",
                   [&callers, &boxes, &terminals](const Request& req, std::shared_ptr<ResponseWriter> writer) {
    accounts::Caller caller = callers.resolve(req);
    BoxSpec spec = boxes.spec_for(caller.account);
    SpawnRequest shell = exec::login_shell_request(spec, caller.cwd);
    try {
      // The box answers on the loop; the request waits there, holding no thread.
      terminals.create(spec, std::move(shell), [writer](exec::CreateOutcome created) {
        writer->send(created.error ? create_error_response(created.error)
                                   : Response::json(terminal_json(*created.terminal)));
      });
    } catch (const exec::TerminalLimitError& e) {
      throw HttpError(http::status::too_many_requests, e.what());
    }
  });

  router.add(http::verb::get, "/api/terminals", [&callers, &terminals](const Request& req) {
    accounts::Caller caller = callers.resolve(req);
    json list = json::array();
    for (const auto& t : terminals.list(caller.account.name)) list.push_back(terminal_json(t));
    return Response::json(list);
  });

  // One path for the REST description and the WebSocket: the route sees the upgrade header.
  auto ctx = std::make_shared<const TerminalSocketContext>(
      TerminalSocketContext{terminals, callers, ApiKeyAuth(options.api_key), options.socket});
  router.add_takeover(
      http::verb::get, "/api/terminals/{id}",
      [ctx, &callers, &terminals](Takeover t) {
        if (boost::beast::websocket::is_upgrade(t.parser->get())) return TerminalSocket::serve(std::move(t), ctx);
        if (!t.key_accepted) {
          Response r = error_response(http::status::unauthorized, "Invalid API key");
          r.headers.set(http::field::www_authenticate, "Bearer");
          return respond_and_close(std::move(t), std::move(r));
        }
        Response r;
        try {
          r = describe(callers, terminals, t.request);
        } catch (...) {
          r = response_for_exception(std::current_exception(), "GET /api/terminals/{id}");
        }
        respond_and_close(std::move(t), std::move(r));
      },
      RouteOptions{.auth_in_handler = true});

  router.add_async(http::verb::delete_, "/api/terminals/{id}",
                   [&callers, &terminals](const Request& req, std::shared_ptr<ResponseWriter> writer) {
    accounts::Caller caller = callers.resolve(req);
    terminals.remove(caller.account.name, req.param("id"), [writer](bool found) {
      writer->send(found ? Response::json({{"status", "deleted"}})
                         : error_response(http::status::not_found, "Session not found"));
    });
  });
}

}  // namespace agentbox::api
