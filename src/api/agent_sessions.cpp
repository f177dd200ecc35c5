#include "api/agent_sessions.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/approvals.hpp"
#include "agent/transcript.hpp"
#include "agent/transcript_markdown.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "fs/file_read.hpp"
#include "fs/fs_error.hpp"
#include "fs/glob_search.hpp"
#include "http/error.hpp"
#include "util/utf8.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

using nlohmann::json;

constexpr const char* kProjects = ".claude/projects";
constexpr int kMaxSessions = 500;
constexpr size_t kHeadBytes = 64 << 10;           // of each transcript, for its title and directory
constexpr size_t kMaxTranscriptBytes = 32 << 20;  // one transcript answered at most
constexpr size_t kMaxTitle = 200;

// Transcripts under ~/.claude/projects matching pattern ("*/*.jsonl", "*/ID.jsonl"); none when
// the user has never run the CLI.
std::vector<GlobMatch> transcripts(const accounts::Caller& caller, const std::string& pattern, int max_results) {
  GlobOptions opt;
  opt.pattern = pattern;
  opt.type = GlobType::file;
  opt.max_results = max_results;
  try {
    return glob_files(*caller.home, caller.home->path(kProjects, caller.box_home), opt).matches;
  } catch (const FsError& e) {
    if (e.kind() == FsErrorKind::not_found) return {};
    throw;
  }
}

std::string read_head(const accounts::Caller& caller, const std::string& rel, size_t bytes) {
  struct stat st {};
  HomePath p = caller.home->path(std::string(kProjects) + "/" + rel, caller.box_home);
  UniqueFd fd = open_regular_file(*caller.home, p, st);
  std::string out;
  read_up_to(fd.get(), out, bytes, p.shown);
  return out;
}

std::string stem(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  return name.substr(0, name.size() - std::string_view(".jsonl").size());
}

// The chat a session belongs to, when it ran in ~/chats/<chat>.
json chat_of(const accounts::Caller& caller, const std::string& cwd) {
  const std::string prefix = caller.box_home + "/chats/";
  if (!cwd.starts_with(prefix) || cwd.size() == prefix.size()) return nullptr;
  std::string chat = cwd.substr(prefix.size());
  return chat.find('/') == std::string::npos ? json(chat) : json(nullptr);
}

Response list_sessions(accounts::AccountDirectory& callers, const Request& req) {
  accounts::Caller caller = callers.resolve(req, false, accounts::HomeUse::read);  // only reads
  std::vector<GlobMatch> found = transcripts(caller, "*/*.jsonl", kMaxSessions);
  std::sort(found.begin(), found.end(), [](const GlobMatch& a, const GlobMatch& b) { return a.modified > b.modified; });
  json sessions = json::array();
  for (const auto& m : found) {
    const std::string id = stem(m.path);
    if (!agent::is_session_id(id)) continue;
    agent::Transcript head;
    try {
      head = agent::parse_transcript(read_head(caller, m.path, kHeadBytes));
    } catch (const FsError&) {
      continue;  // removed meanwhile
    }
    std::string title = head.first_prompt;
    if (title.size() > kMaxTitle) title = title.substr(0, kMaxTitle) + "…";
    sessions.push_back({{"id", id},
                        {"cwd", head.cwd},
                        {"chat", chat_of(caller, head.cwd)},
                        {"title", title},
                        {"modified", m.modified},
                        {"size", m.size}});
  }
  return Response::json({{"sessions", sessions}});
}

enum class Format { json, markdown };

// ?format=: json (the default) or markdown; anything else is refused before any file is read.
Format format_of(const Request& req) {
  const std::optional<std::string> format = req.query_param("format");
  if (!format || *format == "json") return Format::json;
  if (*format == "markdown") return Format::markdown;
  const std::string shown = format->substr(0, utf8_cut(*format, 40));
  throw HttpError(http::status::unprocessable_entity,
                  "Unknown format '" + shown + "': use format=json (the default) or format=markdown");
}

Response get_session(accounts::AccountDirectory& callers, const Request& req) {
  const Format format = format_of(req);
  accounts::Caller caller = callers.resolve(req, false, accounts::HomeUse::read);  // only reads
  const std::string& id = req.param("id");
  if (!agent::is_session_id(id)) throw HttpError(http::status::not_found, "Session not found");
  std::vector<GlobMatch> found = transcripts(caller, "*/" + id + ".jsonl", 1);
  if (found.empty()) throw HttpError(http::status::not_found, "Session not found");
  std::string text = read_head(caller, found.front().path, kMaxTranscriptBytes + 1);
  const bool truncated = text.size() > kMaxTranscriptBytes;
  if (truncated) text.resize(kMaxTranscriptBytes);
  agent::Transcript t = agent::parse_transcript(text);
  json approvals =
      agent::read_approvals(caller, std::string(kProjects) + "/" + agent::approvals_path(found.front().path));
  if (format == Format::markdown) {
    const json chat = chat_of(caller, t.cwd);
    agent::TranscriptAbout about{id, chat.is_string() ? chat.get<std::string>() : std::string(), truncated,
                                 std::move(approvals)};
    return Response::text(agent::transcript_markdown(t, about), http::status::ok, "text/markdown; charset=utf-8");
  }
  json messages = json::array();
  for (auto& m : t.messages)
    messages.push_back(
        {{"role", m.role}, {"content", std::move(m.content)}, {"timestamp", m.timestamp}, {"uuid", m.uuid}});
  return Response::json({{"id", id},
                         {"cwd", t.cwd},
                         {"chat", chat_of(caller, t.cwd)},
                         {"messages", messages},
                         {"truncated", truncated},
                         {"approvals", std::move(approvals)}});
}

}  // namespace

void add_agent_session_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  const std::shared_ptr<FairPool>& pool = s.file_pool;
  router.add_async(http::verb::get, "/agent/sessions",
                   offload(pool, Handler([&callers](const Request& req) { return list_sessions(callers, req); })));
  router.add_async(http::verb::get, "/agent/sessions/{id}",
                   offload(pool, Handler([&callers](const Request& req) { return get_session(callers, req); })));
}

}  // namespace agentbox::api
