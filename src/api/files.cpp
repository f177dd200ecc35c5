#include "api/files.hpp"

#include <sys/stat.h>

#include <climits>

#include "api/file_preview.hpp"
#include "api/file_transfer.hpp"
#include "api/services.hpp"
#include "api/storage_full.hpp"
#include "fs/dir_list.hpp"
#include "fs/entry_ops.hpp"
#include "fs/file_write.hpp"
#include "fs/fs_error.hpp"
#include "fs/glob_search.hpp"
#include "fs/grep_search.hpp"
#include "fs/trash.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/query_params.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

using nlohmann::json;

// What every handler of the table needs (from Services). Held by the route handlers and by the
// jobs they queue, so it must not hold the pool (see http/offload.hpp).
struct FileContext {
  accounts::AccountDirectory& callers;
  FileRoutesOptions options;
  PreviewContext preview;  // preview=true on an office document (api/file_preview.hpp)

  // The caller of a handler that only reads: one with no volume yet gets none made.
  accounts::Caller reader(const Request& req) const { return callers.resolve(req, false, accounts::HomeUse::read); }
  // The caller of a handler that may write: its volume is made and attached.
  accounts::Caller writer(const Request& req) const { return callers.resolve(req); }
};

// ---------------------------------------------------------------- inputs

// A user path in any accepted form, relative to the session's cwd.
HomePath path_of(const accounts::Caller& caller, std::string_view user_path) {
  return caller.home->path(user_path, caller.cwd);
}

// Repeated parameters, also in the PHP-style "name[]" spelling some clients use.
std::vector<std::string> query_list(const Request& req, std::string_view name) {
  auto values = req.query_params(name);
  for (auto& v : req.query_params(std::string(name) + "[]")) values.push_back(std::move(v));
  return values;
}

int max_results_of(const Request& req) {
  return static_cast<int>(query_int(req, "max_results", 1, kMaxSearchResults).value_or(50));
}

std::optional<uint64_t> optional_line(const json& item, const char* field) {
  auto it = item.find(field);
  if (it == item.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<int64_t>() < 1)
    unprocessable(std::string("Field '") + field + "' must be an integer of at least 1");
  return it->get<uint64_t>();
}

std::vector<Replacement> replacements_of(const json& body) {
  auto it = body.find("replacements");
  if (it == body.end() || !it->is_array()) unprocessable("Field 'replacements' is required and must be a list");
  std::vector<Replacement> out;
  for (const json& item : *it) {
    if (!item.is_object()) unprocessable("Each replacement must be an object");
    Replacement r;
    r.target = required_string(item, "target");
    r.replacement = required_string(item, "replacement");
    r.start_line = optional_line(item, "start_line");
    r.end_line = optional_line(item, "end_line");
    if (auto m = item.find("allow_multiple"); m != item.end() && !m->is_null()) {
      if (!m->is_boolean()) unprocessable("Field 'allow_multiple' must be a boolean");
      r.allow_multiple = m->get<bool>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

json write_json(const WriteResult& r) { return {{"path", r.path}, {"size", r.size}}; }

// ---------------------------------------------------------------- handlers answering JSON

Response get_cwd(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.reader(req);
  // root: the top of what the file navigator may browse, as Open Terminal 0.12 names it.
  return Response::json(
      {{"cwd", caller.cwd}, {"home", caller.box_home}, {"root", {{"path", caller.box_home}, {"label", "Home"}}}});
}

Response post_cwd(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.writer(req);
  json body = parse_json_object(req);
  return Response::json({{"cwd", ctx.callers.set_cwd(caller, required_string(body, "path"))}});
}

Response list_files(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.reader(req);
  std::string dir = req.query_param("directory").value_or(req.query_param("path").value_or("."));
  ListResult r = list_dir(*caller.home, path_of(caller, dir));
  json entries = json::array();
  for (const ListEntry& e : r.entries)
    entries.push_back({{"name", e.name},
                       {"type", e.info.type},
                       {"size", e.info.size},
                       {"modified", e.info.modified},
                       {"writable", e.info.writable}});
  return Response::json({{"dir", r.dir}, {"entries", std::move(entries)}});
}

Response read_file(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.reader(req);
  HomePath p = path_of(caller, required_query(req, "path"));
  ReadOptions opt = ctx.options.read;
  if (auto v = query_int(req, "start_line", 1, INT64_MAX)) opt.start_line = static_cast<uint64_t>(*v);
  if (auto v = query_int(req, "start_column", 1, INT64_MAX)) opt.start_column = static_cast<uint64_t>(*v);
  if (auto v = query_int(req, "end_line", 1, INT64_MAX)) opt.end_line = static_cast<uint64_t>(*v);
  ReadResult r = read_text(*caller.home, p, opt);
  if (r.kind == ReadResult::Kind::image) {
    Response out;
    out.headers.set(http::field::content_type, r.mime);
    out.body = std::move(r.bytes);
    return out;
  }
  json out = {
      {"path", r.path}, {"total_lines", r.total_lines}, {"content", std::move(r.content)}, {"truncated", r.truncated}};
  if (r.truncated) out["next_start_line"] = r.next_line;
  if (r.next_column) out["next_start_column"] = r.next_column;  // a line cut inside: go on from there
  if (r.encoding != "utf-8") out["encoding"] = r.encoding;
  return Response::json(out);
}

Response display_file(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.reader(req);
  HomePath p = path_of(caller, required_query(req, "path"));
  return Response::json({{"path", p.shown}, {"exists", is_regular_file(*caller.home, p)}});
}

Response write_file(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.writer(req);
  json body = parse_json_object(req);
  HomePath p = path_of(caller, required_string(body, "path"));
  std::string content = required_string(body, "content");
  return Response::json(write_json(write_atomic(*caller.home, p, content)));
}

Response replace_file(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.writer(req);
  json body = parse_json_object(req);
  HomePath p = path_of(caller, required_string(body, "path"));
  return Response::json(write_json(replace_in_file(*caller.home, p, replacements_of(body))));
}

Response make_directory(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.writer(req);
  json body = parse_json_object(req);
  return Response::json({{"path", make_dir(*caller.home, path_of(caller, required_string(body, "path")))}});
}

// Into the account's trash (fs/trash.hpp), not gone: `trash` is the item's id (null when the
// volume was too full even for that and the entry was deleted outright).
// Open WebUI deletes ~/chat_attachments/CHAT with each chat, whether or not the chat ever had
// one: that delete answers 200 when the folder is not there (idempotent).
bool is_chat_attachments(const HomePath& p) {
  std::vector<std::string_view> parts = split_path(p.rel);
  return parts.size() == 2 && parts[0] == "chat_attachments";
}

Response delete_entry(const FileContext& ctx, const Request& req) {
  // Resolved as a read: deleting from an account with no volume finds nothing, and makes none.
  accounts::Caller caller = ctx.reader(req);
  HomePath p = path_of(caller, required_query(req, "path"));
  std::optional<TrashPut> put;
  try {
    if (!caller.volume) {  // the home is empty: not_found (or bad_request for the home itself)
      struct stat st {};
      caller.home->existing_entry(p, st);
    }
    Trash trash(ctx.callers.volume_of(caller.account).trash, *caller.home);
    put = trash.put(p);
  } catch (const FsError& e) {
    if (e.kind() != FsErrorKind::not_found || !is_chat_attachments(p)) throw;
    return Response::json({{"path", p.shown}, {"type", "directory"}, {"trash", nullptr}});
  }
  TrashPut& r = *put;
  return Response::json(
      {{"path", r.item.path}, {"type", r.item.type}, {"trash", r.trashed ? json(r.item.id) : json(nullptr)}});
}

Response move_file(const FileContext& ctx, const Request& req) {
  json body = parse_json_object(req);
  // Resolved as a read first: an account with no volume has nothing to move, and gets no volume
  // to say so; a source that is there (the home itself: refused by move_entry) needs the disk.
  accounts::Caller caller = ctx.reader(req);
  if (!caller.volume) {
    struct stat st {};
    caller.home->existing_entry(path_of(caller, required_string(body, "source")), st);
    caller = ctx.writer(req);
  }
  HomePath source = path_of(caller, required_string(body, "source"));
  HomePath destination = path_of(caller, required_string(body, "destination"));
  MoveResult r = move_entry(*caller.home, source, destination);
  return Response::json({{"source", r.source}, {"destination", r.destination}});
}

Response grep_search(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.reader(req);
  GrepOptions opt;
  opt.query = required_query(req, "query");
  opt.regex = query_bool(req, "regex").value_or(true);
  opt.case_insensitive = query_bool(req, "case_insensitive").value_or(false);
  opt.include = query_list(req, "include");
  opt.match_per_line = query_bool(req, "match_per_line").value_or(true);
  opt.max_results = max_results_of(req);
  GrepResult r = grep_files(*caller.home, path_of(caller, req.query_param("path").value_or(".")), opt);
  json matches = json::array();
  for (const GrepMatch& m : r.matches) {
    if (opt.match_per_line)
      matches.push_back({{"file", m.file}, {"line", m.line}, {"content", m.content}});
    else
      matches.push_back({{"file", m.file}});
  }
  return Response::json(
      {{"query", r.query}, {"path", r.path}, {"matches", std::move(matches)}, {"truncated", r.truncated}});
}

Response glob_search(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.reader(req);
  GlobOptions opt;
  opt.pattern = required_query(req, "pattern");
  opt.exclude = query_list(req, "exclude");
  std::string type = req.query_param("type").value_or("any");
  if (type == "any")
    opt.type = GlobType::any;
  else if (type == "file")
    opt.type = GlobType::file;
  else if (type == "directory")
    opt.type = GlobType::directory;
  else
    unprocessable("Query parameter 'type' must be one of any, file, directory");
  opt.max_results = max_results_of(req);
  GlobResult r = glob_files(*caller.home, path_of(caller, req.query_param("path").value_or(".")), opt);
  json matches = json::array();
  for (const GlobMatch& m : r.matches)
    matches.push_back({{"path", m.path}, {"type", m.type}, {"size", m.size}, {"modified", m.modified}});
  return Response::json(
      {{"pattern", r.pattern}, {"path", r.path}, {"matches", std::move(matches)}, {"truncated", r.truncated}});
}

Response upload_file(const FileContext& ctx, const Request& req) {
  accounts::Caller caller = ctx.writer(req);
  HomePath dir = path_of(caller, required_query(req, "directory"));
  return Response::json(write_json(receive_upload(caller, dir, req, ctx.options.upload_max_bytes)));
}

// ---------------------------------------------------------------- handlers answering bytes

using Writer = std::shared_ptr<ResponseWriter>;

void view_file(const FileContext& ctx, const Request& req, const Writer& writer) {
  accounts::Caller caller = ctx.reader(req);
  HomePath p = path_of(caller, required_query(req, "path"));
  // A preview needs the box; an account with no volume has no file to preview (404 below).
  if (query_bool(req, "preview").value_or(false) && previewable(p) && ctx.preview.processes && caller.volume)
    return send_preview(ctx.preview, caller, p, req, writer);
  send_file_bytes(caller, p, req, writer);
}

void serve_file(const FileContext& ctx, const Request& req, const Writer& writer) {
  accounts::Caller caller = ctx.reader(req);
  // /files/serve/home/NAME/site/index.html: the rest of the URL is an absolute box path, so
  // relative links inside an HTML preview resolve to its neighbours.
  send_file_bytes(caller, path_of(caller, "/" + req.param("path")), req, writer);
}

void archive_files(const FileContext& ctx, const Request& req, const Writer& writer) {
  accounts::Caller caller = ctx.writer(req);
  json body = parse_json_object(req);
  auto it = body.find("paths");
  if (it == body.end() || !it->is_array()) unprocessable("Field 'paths' is required and must be a list of paths");
  std::vector<HomePath> paths;
  for (const json& p : *it) {
    if (!p.is_string()) unprocessable("Field 'paths' must be a list of strings");
    paths.push_back(path_of(caller, p.get<std::string>()));
  }
  // Built in the account's own volume: an archive is charged to the account like its files.
  send_archive(caller, paths, ctx.callers.volume_of(caller.account).daemon, ctx.options.archive, writer);
}

// ---------------------------------------------------------------- the table

using JsonHandler = Response (*)(const FileContext&, const Request&);
using BytesHandler = void (*)(const FileContext&, const Request&, const Writer&);

struct JsonRoute {
  http::verb method;
  const char* pattern;
  JsonHandler handler;
};

struct BytesRoute {
  http::verb method;
  const char* pattern;
  BytesHandler handler;
};

constexpr JsonRoute kJsonRoutes[] = {
    {http::verb::get, "/files/cwd", get_cwd},
    {http::verb::post, "/files/cwd", post_cwd},
    {http::verb::get, "/files/list", list_files},
    {http::verb::get, "/files/read", read_file},
    {http::verb::get, "/files/display", display_file},
    {http::verb::post, "/files/write", write_file},
    {http::verb::post, "/files/replace", replace_file},
    {http::verb::post, "/files/mkdir", make_directory},
    {http::verb::delete_, "/files/delete", delete_entry},
    {http::verb::post, "/files/move", move_file},
    {http::verb::get, "/files/grep", grep_search},
    {http::verb::get, "/files/glob", glob_search},
};

constexpr BytesRoute kBytesRoutes[] = {
    {http::verb::get, "/files/view", view_file},
    {http::verb::get, "/files/serve/{path:path}", serve_file},
    {http::verb::post, "/files/archive", archive_files},
};

}  // namespace

void add_file_routes(Router& router, const Services& s) {
  const std::shared_ptr<FairPool>& pool = s.file_pool;
  const FileRoutesOptions& options = s.file_options;
  auto ctx = std::make_shared<FileContext>(
      FileContext{*s.callers, options, PreviewContext{s.boxes, s.processes, pool, options.preview_timeout}});

  // A full volume first gives up the oldest trash, then answers 507 (api/storage_full.hpp).
  auto json_work = [ctx](JsonHandler handler) {
    return Handler([ctx, handler](const Request& req) {
      return with_room(ctx->callers, req, [&] { return handler(*ctx, req); });
    });
  };
  for (const JsonRoute& r : kJsonRoutes) router.add_async(r.method, r.pattern, offload(pool, json_work(r.handler)));
  for (const BytesRoute& r : kBytesRoutes)
    router.add_async(r.method, r.pattern,
                     offload(pool, BlockingWork([ctx, handler = r.handler](const Request& req, const Writer& writer) {
                               with_room(ctx->callers, req, [&] { handler(*ctx, req, writer); });
                             })),
                     // The agent's download links (http/signed_links.hpp) open one file each.
                     {.signed_link = r.handler == view_file});
  router.add_async(http::verb::post, "/files/upload", offload(pool, json_work(upload_file)),
                   {.body_limit = options.upload_max_bytes + kMultipartOverheadBytes, .spool_body = true});
}

}  // namespace agentbox::api
