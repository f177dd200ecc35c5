#include "mcp/mcp_routes.hpp"

#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "accounts/user_id.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "mcp/dispatch.hpp"
#include "mcp/jsonrpc.hpp"
#include "mcp/revisions.hpp"
#include "mcp/sessions.hpp"

namespace agentbox::mcp {

namespace {

using nlohmann::json;
using Writer = std::shared_ptr<http::ResponseWriter>;

std::string session_header(const http::Request& req) { return std::string(req.header("Mcp-Session-Id").value_or("")); }

// The answer goes back as JSON or, when the client accepts it and notifications come first (a
// tool call with progress), as an SSE stream.
Exchange exchange_of(const http::Request& req, const Writer& writer) {
  auto streaming = std::make_shared<bool>(false);
  Exchange e;
  e.caller = context_of(req);
  e.open_stream = [writer, streaming, sse = answer_as_sse(req, true)] {
    if (!sse) return false;
    http::Response head;
    head.headers.set(http::field::content_type, "text/event-stream");
    head.headers.set(http::field::cache_control, "no-cache");
    writer->begin_chunked(std::move(head));
    *streaming = true;
    return true;
  };
  e.notify = [writer](json message) { return writer->write_chunk(sse_event(message)); };
  e.reply = [writer, streaming, accept = std::string(req.header("Accept").value_or(""))](json message) {
    if (*streaming) {
      writer->write_chunk(sse_event(message));
      writer->end_chunked();
      return;
    }
    http::Request shape;  // answer() reads only the Accept
    shape.headers.set(http::field::accept, accept);
    writer->send(answer(shape, message));
  };
  return e;
}

// The modern era (2026-07-28): no session; the revision in every request's _meta, matching its
// header when both are sent. A notification or a response: 202, no answer.
void post_modern(const std::shared_ptr<McpServer>& server, const http::Request& req, const RequestRevision& revision,
                 const Message& msg, const Writer& writer) {
  if (!msg.request()) {
    writer->send(http::Response::empty(http::status::accepted));
    return;
  }
  if (!revision.header.empty() && !revision.meta.empty() && revision.header != revision.meta) {
    writer->send(answer(req,
                        error_message(msg.id, kHeaderMismatch,
                                      "MCP-Protocol-Version (" + revision.header + ") and _meta's " + kVersionMetaKey +
                                          " (" + revision.meta + ") disagree"),
                        http::status::bad_request));
    return;
  }
  answer_modern(server, msg, revision, exchange_of(req, writer));
}

void post_mcp(const std::shared_ptr<McpServer>& server, Sessions& sessions, const http::Request& req,
              const Writer& writer) {
  const std::string user = accounts::user_id_of(req);  // 400 without a user, as the REST API
  std::variant<Message, json> parsed = parse_message(req.body);
  if (const json* error = std::get_if<json>(&parsed)) {
    writer->send(answer(req, *error, http::status::bad_request));
    return;
  }
  const Message& msg = std::get<Message>(parsed);
  const RequestRevision revision = revision_of(req, msg.params);
  if (revision.modern() || msg.method == "server/discover") {
    post_modern(server, req, revision, msg, writer);
    return;
  }

  if (msg.method == "initialize") {
    if (!msg.has_id) {
      writer->send(answer(req, error_message(nullptr, kInvalidRequest, "initialize is a request: it needs an id"),
                          http::status::bad_request));
      return;
    }
    // Answered as over any transport, with the session it opens in a header.
    std::string session = sessions.open(user);
    Exchange e = exchange_of(req, writer);
    e.reply = [writer, session, accept = std::string(req.header("Accept").value_or(""))](json message) {
      http::Request shape;  // answer() reads only the Accept
      shape.headers.set(http::field::accept, accept);
      http::Response r = answer(shape, message);
      r.headers.set("Mcp-Session-Id", session);
      writer->send(std::move(r));
    };
    answer_legacy(server, msg, std::move(e));
    return;
  }
  // Every other message belongs to a session of this user's (404 as the spec has it: the client
  // starts a new one; a session of another user's is not found either).
  const std::string session = session_header(req);
  if (session.empty())
    throw http::HttpError(http::status::bad_request, "Missing Mcp-Session-Id header: initialize first");
  if (!sessions.belongs(session, user)) throw http::HttpError(http::status::not_found, "Session not found");

  if (!msg.request()) {  // a notification or a response: nothing to answer
    writer->send(http::Response::empty(http::status::accepted));
    return;
  }
  answer_legacy(server, msg, exchange_of(req, writer));
}

}  // namespace

void add_mcp_routes(http::Router& router, const api::Services& services) {
  std::shared_ptr<McpServer> server = make_mcp_server(services);
  auto sessions = std::make_shared<Sessions>();

  router.shape_errors("/mcp", shape_jsonrpc_error);
  router.add_async(
      http::verb::post, "/mcp",
      [server, sessions](const http::Request& req, Writer writer) { post_mcp(server, *sessions, req, writer); },
      {.body_limit = kMessageLimit});
  router.add(http::verb::delete_, "/mcp", [sessions](const http::Request& req) {
    const std::string user = accounts::user_id_of(req);
    if (!sessions->close(session_header(req), user))
      throw http::HttpError(http::status::not_found, "Session not found");
    return http::Response::empty();
  });
}

}  // namespace agentbox::mcp
