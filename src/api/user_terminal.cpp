#include "api/user_terminal.hpp"

#include <memory>

#include "accounts/caller_routes.hpp"
#include "api/services.hpp"
#include "exec/terminal_text.hpp"
#include "exec/terminals.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/query_params.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
using accounts::Caller;
using accounts::with_caller;

namespace {

using nlohmann::json;

constexpr int64_t kDefaultLines = 100;
constexpr int64_t kMaxLines = 10000;
constexpr size_t kMaxInputBytes = 64 << 10;

// The terminal this chat's user has attached, or the 404 a model can act on.
exec::TerminalInfo attached_terminal(const exec::Terminals& terminals, const Caller& caller) {
  if (caller.session_id.empty())
    throw HttpError(http::status::not_found,
                    "No chat named (X-Session-Id): the user's terminal can only be reached from the chat it is open "
                    "in.");
  auto t = terminals.attached_in_chat(caller.box, caller.session_id);
  if (!t)
    throw HttpError(http::status::not_found,
                    "The user has no terminal open in this chat. Ask them to open the terminal panel for this chat, "
                    "or run the command yourself with run_command.");
  return *t;
}

Response gone_meanwhile() {
  return error_response(http::status::not_found,
                        "The user's terminal in this chat ended. Ask them to open the terminal panel again.");
}

}  // namespace

void add_user_terminal_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  exec::Terminals& terminals = *s.terminals;

  router.add_async(
      http::verb::get, "/user-terminal/read",
      with_reader(
          callers, [&terminals](const Request& req, const Caller& caller, std::shared_ptr<ResponseWriter> writer) {
            const int64_t lines = query_int(req, "lines", 1, kMaxLines).value_or(kDefaultLines);
            exec::TerminalInfo t = attached_terminal(terminals, caller);
            terminals.recent_output(caller.box, t.id, [writer, id = t.id, lines](std::optional<std::string> raw) {
              if (!raw) {
                writer->send(gone_meanwhile());
                return;
              }
              std::string text = exec::last_lines(exec::terminal_text(*raw), static_cast<size_t>(lines));
              writer->send(Response::json({{"terminal_id", id}, {"lines", lines}, {"output", text}}));
            });
          }));

  router.add_async(http::verb::post, "/user-terminal/input",
                   with_caller(callers, [&terminals](const Request& req, const Caller& caller,
                                                     std::shared_ptr<ResponseWriter> writer) {
                     json body = parse_json_object(req);
                     std::string text = required_string(body, "text");
                     bool enter = true;
                     if (auto e = body.find("enter"); e != body.end() && !e->is_null()) {
                       if (!e->is_boolean()) unprocessable("Field 'enter' must be a boolean");
                       enter = e->get<bool>();
                     }
                     if (text.size() > kMaxInputBytes)
                       unprocessable("Field 'text' is longer than " + std::to_string(kMaxInputBytes) + " bytes");
                     if (enter) text += '\r';  // the Enter key: the terminal turns it into a line end
                     exec::TerminalInfo t = attached_terminal(terminals, caller);
                     terminals.type(caller.box, t.id, std::move(text), [writer, id = t.id](bool typed) {
                       writer->send(typed ? Response::json({{"status", "ok"}, {"terminal_id", id}}) : gone_meanwhile());
                     });
                   }));
}

}  // namespace agentbox::api
