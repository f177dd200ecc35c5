#include "api/agent.hpp"

#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <nlohmann/json.hpp>

#include <sys/random.h>
#include <algorithm>
#include <atomic>
#include <ctime>
#include <map>
#include <mutex>

#include "agent/background_task.hpp"
#include "agent/chat_queue.hpp"
#include "agent/chat_request.hpp"
#include "agent/native_events.hpp"
#include "agent/openai_stream.hpp"
#include "agent/run_end.hpp"
#include "agent/sse_frames.hpp"
#include "agent/stream_json_parser.hpp"
#include "agent/turn.hpp"
#include "api/agent_tasks.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "fs/content_type.hpp"
#include "fs/entry_ops.hpp"
#include "fs/file_write.hpp"
#include "fs/glob_search.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/response_writer.hpp"
#include "util/log.hpp"
#include "util/random_hex.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

using nlohmann::json;
using Writer = std::shared_ptr<ResponseWriter>;

// The chat a request belongs to: Open WebUI's chat id, else the session; "" for a one-shot turn.
std::string chat_of(const Request& req) {
  for (const char* header : {"X-OpenWebUI-Chat-Id", "X-Session-Id"})
    if (auto v = req.header(header); v && !v->empty()) return std::string(*v);
  return {};
}

// The system prompt Claude Code gets on top of its own: where it runs and what becomes of files.
std::string box_prompt(const accounts::Caller& caller, const std::string& chat_dir, const std::string& network) {
  std::string p =
      "You are running inside agentbox: a Linux sandbox of this user's own (their files, their "
      "processes, their network rules). There is no display and no browser window: produce files "
      "instead of showing things.\n"
      "The current directory " +
      chat_dir +
      " belongs to this chat. Files you create or change in it "
      "are delivered to the user as download links after your answer (images are shown inline), so "
      "save results there. The user's home is " +
      caller.box_home + ".";
  if (!network.empty()) p += "\nNetwork: " + network;
  return p;
}

// The approval modes, each a model of /v1/models (its id: the model id plus the suffix): what
// Claude Code may do in the box without asking.
struct ApprovalMode {
  std::string_view suffix;
  std::string_view permission_mode;  // --permission-mode
  std::string_view name;
  std::string_view description;
};
constexpr ApprovalMode kApprovalModes[] = {
    {"", "bypassPermissions", "Claude Code", "Claude Code running in your own agentbox sandbox: every tool runs"},
    {"-edits", "acceptEdits", "Claude Code (edits)",
     "Claude Code in your sandbox: it edits files, other actions that need approval are refused"},
    {"-plan", "plan", "Claude Code (plan)",
     "Claude Code in your sandbox, read-only: it answers with a plan and changes nothing"},
    {"-ask", "default", "Claude Code (ask)",
     "Claude Code in your sandbox: it asks you before each action that needs approval (reply yes, always or no)"},
};

// What the model a request names runs: "claude-code" (or none) the configured model in full mode;
// "claude-code-MODE" a mode of kApprovalModes; "/NAME" after either asks the CLI for NAME;
// anything else is a 404.
struct AskedModel {
  std::string claude_model;  // --model; "": the configured one
  std::string_view permission_mode;
};

AskedModel model_for(const std::string& asked, const AgentRoutesOptions& options) {
  if (asked.empty()) return {options.claude_model, kApprovalModes[0].permission_mode};
  for (const ApprovalMode& mode : kApprovalModes) {
    const std::string id = options.model_id + std::string(mode.suffix);
    if (asked == id) return {options.claude_model, mode.permission_mode};
    if (asked.starts_with(id + "/") && asked.size() > id.size() + 1)
      return {asked.substr(id.size() + 1), mode.permission_mode};
  }
  throw HttpError(http::status::not_found,
                  "Model '" + asked + "' not found; this server offers '" + options.model_id + "', '" +
                      options.model_id + "-edits', '" + options.model_id + "-plan', '" + options.model_id +
                      "-ask' (or any of them + '/MODEL')",
                  "model_not_found");
}

// What a turn asks, read and checked from the request before it waits for its chat (a bad request
// is answered at once): everything of the turn but what the disk and the chat's session give.
struct AskedTurn {
  agent::TurnSetup setup;
  std::vector<agent::ChatAttachment> attachments;
  std::string system;  // the request's system messages
};

AskedTurn read_turn(const Request& req, const json& body, agent::TurnMode mode, accounts::AccountDirectory& callers,
                    exec::AccountBoxes& boxes, const AgentRoutesOptions& options) {
  AskedTurn asked;
  agent::TurnSetup& s = asked.setup;
  s.mode = mode;
  s.caller = callers.resolve(req);
  agent::ChatRequest chat;
  try {
    if (mode == agent::TurnMode::native) {
      // POST /agent/runs {"prompt", "system"?, "model"?}: the same turn without OpenAI's envelope.
      auto prompt = body.find("prompt");
      if (prompt == body.end() || !prompt->is_string() || prompt->get<std::string>().empty())
        throw HttpError(http::status::unprocessable_entity,
                        "Field 'prompt' is required and must be a non-empty string");
      chat.prompt = prompt->get<std::string>();
      chat.system = body.value("system", "");
      chat.model = body.value("model", "");
    } else {
      chat = agent::parse_chat_request(body, options.max_attachment_bytes);
      s.mode = chat.stream ? agent::TurnMode::openai_stream : agent::TurnMode::openai_whole;
    }
  } catch (const nlohmann::json::exception& e) {  // a ChatRequestError goes on: the error map makes it a 400
    throw HttpError(http::status::bad_request, std::string("Malformed request: ") + e.what());
  }
  const AskedModel model = model_for(chat.model, options);
  s.model_name = chat.model.empty() ? options.model_id : chat.model;
  s.chat = chat_of(req);
  // A "### Task:" prompt that is no background task (one asked as a stream without the task
  // header): a one-shot turn, so the chat's own session never sees it.
  if (chat.prompt.starts_with("### Task:")) s.chat.clear();
  s.box = boxes.spec_for(s.caller.account);

  // Never from a header: whoever sends the request (or sits between it and us) would choose
  // where the user's browser takes the signed link. Without public_url, the address this
  // request reached: the listen address, or with a wildcard listen address the one dialled.
  s.base_url = !options.public_url.empty()  ? options.public_url
               : !req.local_address.empty() ? "http://" + req.local_address
                                            : "http://127.0.0.1";

  agent::ClaudeTurn& t = s.claude;
  t.box = s.box;
  t.prompt = std::move(chat.prompt);
  t.model = model.claude_model;
  t.permission_mode = std::string(model.permission_mode);
  // Ask mode's questions are answered by the chat's next message, to the CLI that asked: a CLI
  // that stays between turns (a warm one), of a chat.
  if (t.permission_mode == "default") {
    if (!options.warm)
      throw HttpError(http::status::bad_request,
                      "the ask model needs warm Claude Code sessions, which this server has turned off "
                      "([agent] warm_per_account = 0 or warm_idle = 0)",
                      "model_not_available");
    if (s.mode == agent::TurnMode::native)  // its events have no place for the question
      throw HttpError(http::status::bad_request, "the ask model answers on /v1/chat/completions only");
    if (s.chat.empty())
      throw HttpError(http::status::bad_request,
                      "the ask model needs a chat (X-OpenWebUI-Chat-Id) to ask its questions in", "chat_required");
  }
  t.max_turns = options.max_turns;
  t.allowed_tools = options.allowed_tools;
  // agentbox's own fields of the request narrow what the configuration allows, never widen it.
  if (auto it = body.find("max_turns"); it != body.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1000)
      throw HttpError(http::status::bad_request, "max_turns must be an integer from 1 to 1000");
    const int want = static_cast<int>(it->get<int64_t>());
    t.max_turns = t.max_turns > 0 ? std::min(t.max_turns, want) : want;
  }
  if (auto it = body.find("allowed_tools"); it != body.end()) {
    if (!it->is_array()) throw HttpError(http::status::bad_request, "allowed_tools must be a list of tool names");
    std::vector<std::string> want;
    for (const json& tool : *it) {
      if (!tool.is_string() || tool.get<std::string>().empty())
        throw HttpError(http::status::bad_request, "allowed_tools must be a list of tool names");
      const std::string name = tool.get<std::string>();
      if (t.allowed_tools.empty() ||
          std::find(t.allowed_tools.begin(), t.allowed_tools.end(), name) != t.allowed_tools.end())
        want.push_back(name);
    }
    if (want.empty()) throw HttpError(http::status::bad_request, "allowed_tools names no tool this server allows");
    t.allowed_tools = std::move(want);
  }
  t.extra_args = options.extra_args;
  if (options.max_retries) t.env["CLAUDE_CODE_MAX_RETRIES"] = std::to_string(*options.max_retries);
  asked.attachments = std::move(chat.attachments);
  asked.system = std::move(chat.system);
  return asked;
}

// The rest of the turn, once it may run (its chat's turn before it is over; on a pool thread):
// the chat directory with the attachments in it and what it held before, and the chat's
// session as the turn before left it.
agent::TurnSetup prepare(AskedTurn asked, ChatSessions& chats, const AgentRoutesOptions& options) {
  agent::TurnSetup s = std::move(asked.setup);
  const std::string dir_name = s.chat.empty() ? "once-" + random_hex(8) : agent::chat_dir_name(s.chat);
  s.dir = s.caller.home->path("chats/" + dir_name, s.caller.box_home);
  make_dir(*s.caller.home, s.dir);
  for (const auto& a : asked.attachments)
    write_atomic(*s.caller.home, s.dir.child(a.name), a.bytes, /*create_parents=*/false);
  s.before = agent::snapshot(s.caller, s.dir);

  agent::ClaudeTurn& t = s.claude;
  t.cwd = s.dir.shown;
  if (!s.chat.empty()) {
    t.resume = chats.find(s.box.name, s.chat);
    t.warm_key = s.box.name + '\n' + s.chat;  // its CLI may stay for the chat's next turn
  }
  const std::string network =
      options.network_of ? options.network_of(s.caller.account.external_id, s.caller.profile) : options.network;
  t.append_system_prompt = box_prompt(s.caller, s.dir.shown, network);
  if (!asked.system.empty()) t.append_system_prompt += "\n\n" + asked.system;
  return s;
}

// What a turn needs to run, shared by every turn of the routes.
struct TurnContext {
  agent::ClaudeRunner& runner;
  ChatSessions& chats;
  std::shared_ptr<const SignedLinks> links;
  std::shared_ptr<FairPool> pool;
  std::shared_ptr<const AgentRoutesOptions> opts;
  std::shared_ptr<agent::ChatQueue> queue;
};

// What a waiting turn does when its time comes: the rest goes on the pool (disk and SQLite),
// never on the thread that ended the turn before.
agent::ChatQueue::Start on_its_turn(std::shared_ptr<TurnContext> ctx, std::shared_ptr<AskedTurn> asked, Writer writer) {
  return [ctx, asked, writer](std::shared_ptr<agent::ChatQueue::Hold> hold) {
    const std::string account = asked->setup.box.name;
    ctx->pool->post(account, [ctx, asked, writer, hold = std::move(hold)]() mutable {
      if (!writer->is_open()) return;  // its client left: the chat goes on to its next turn
      try {
        agent::TurnSetup setup = prepare(std::move(*asked), ctx->chats, *ctx->opts);
        agent::start_turn(std::move(setup), ctx->runner, ctx->chats, ctx->links, ctx->pool, *ctx->opts, writer,
                          std::move(hold));
      } catch (...) {
        writer->fail(std::current_exception());
      }
    });
  };
}

// Runs a checked turn now (one-shot), or when its chat's turn before it is over. A turn whose
// client left while it waited never starts; one too many waiting is a 429.
void run_in_turn(AskedTurn asked, const std::shared_ptr<TurnContext>& ctx, const Writer& writer) {
  if (asked.setup.chat.empty()) {
    agent::TurnSetup setup = prepare(std::move(asked), ctx->chats, *ctx->opts);
    return agent::start_turn(std::move(setup), ctx->runner, ctx->chats, ctx->links, ctx->pool, *ctx->opts, writer);
  }
  const std::string account = asked.setup.box.name;
  const std::string chat = asked.setup.chat;
  auto ticket = ctx->queue->ticket(account + '\n' + chat,
                                   on_its_turn(ctx, std::make_shared<AskedTurn>(std::move(asked)), writer));
  // Wired before the ticket can start, so that the turn's own on_close (set when it starts)
  // replaces this one and never the other way round.
  writer->on_close([queue = ctx->queue, weak = std::weak_ptr(ticket), account, chat] {
    if (auto t = weak.lock(); t && queue->leave(t))
      log::info("agent", "agent: chat {} of {}: a waiting turn's client left; it will not run", chat, account);
  });
  const agent::ChatQueue::Entry entry = ctx->queue->enter(ticket);
  if (entry.how == agent::ChatQueue::Entered::full)
    throw HttpError(http::status::too_many_requests,
                    "This chat already has a turn running and " + std::to_string(entry.waiting) + " waiting (at most " +
                        std::to_string(ctx->queue->max_waiting()) +
                        "); send this message once the answers before it are done",
                    "chat_busy");
  if (entry.how == agent::ChatQueue::Entered::waiting)
    log::info("agent", "agent: chat {} of {}: a turn waits for the one running ({} waiting)", chat, account,
              entry.waiting);
}

}  // namespace

void add_agent_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  exec::AccountBoxes& boxes = *s.boxes;
  agent::ClaudeRunner& runner = *s.claude;
  ChatSessions& chats = *s.chats;
  const std::shared_ptr<const SignedLinks>& links = s.links;
  const std::shared_ptr<FairPool>& pool = s.file_pool;
  auto opts = std::make_shared<const AgentRoutesOptions>(s.agent_options);
  auto turns = std::make_shared<TurnContext>(
      TurnContext{runner, chats, links, pool, opts, std::make_shared<agent::ChatQueue>(opts->queued_turns_per_chat)});

  router.add(http::verb::get, "/v1/models", [opts](const Request&) {
    json models = json::array();
    for (const ApprovalMode& mode : kApprovalModes)
      models.push_back({{"id", opts->model_id + std::string(mode.suffix)},
                        {"object", "model"},
                        {"created", 1767225600},
                        {"owned_by", "agentbox"},
                        {"name", mode.name},
                        {"description", mode.description}});
    return Response::json({{"object", "list"}, {"data", models}});
  });

  net::InferenceGateway* gateway = s.gateway;
  auto turn_route = [&callers, &boxes, pool, opts, gateway, turns](agent::TurnMode mode) {
    return offload(
        pool, BlockingWork([&callers, &boxes, opts, gateway, turns, mode](const Request& req, const Writer& writer) {
          const json body = parse_json_object(req);
          // Open WebUI's background tasks need no agent (and no CLI): answered first.
          if (mode != agent::TurnMode::native)
            if (auto task = agent::background_task(body, req.header("X-OpenWebUI-Task"))) {
              const auto named = body.find("model");
              const std::string model = named != body.end() && named->is_string() ? named->get<std::string>() : "";
              model_for(model, *opts);  // an unknown model is a 404 here too
              return answer_task(req, body, *task, model.empty() ? opts->model_id : model, callers, gateway, *opts,
                                 writer);
            }
          if (!opts->unavailable.empty()) throw HttpError(http::status::service_unavailable, opts->unavailable);
          run_in_turn(read_turn(req, body, mode, callers, boxes, *opts), turns, writer);
        }));
  };
  router.add_async(http::verb::post, "/v1/chat/completions", turn_route(agent::TurnMode::openai_whole));
  router.add_async(http::verb::post, "/agent/runs", turn_route(agent::TurnMode::native));
}

}  // namespace agentbox::api
