#include "api/notebooks.hpp"

#include <sys/stat.h>

#include "accounts/caller_routes.hpp"
#include "accounts/user_id.hpp"
#include "api/services.hpp"
#include "exec/account_boxes.hpp"
#include "exec/notebook_kernels.hpp"
#include "fs/file_read.hpp"
#include "http/error.hpp"
#include "http/json_body.hpp"
#include "http/offload.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
using nlohmann::json;
using Writer = std::shared_ptr<ResponseWriter>;

namespace {

constexpr uint64_t kMaxNotebookBytes = 64ull << 20;  // an .ipynb larger than this is not opened

[[noreturn]] void notebook_not_found() { throw HttpError(http::status::not_found, "Notebook not found"); }

// A cell's source as nbformat stores it: one string, or a list of lines.
std::string source_of(const json& cell) {
  auto it = cell.find("source");
  if (it == cell.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  std::string out;
  if (it->is_array())
    for (const json& line : *it)
      if (line.is_string()) out += line.get<std::string>();
  return out;
}

// The .ipynb at `p`, read through the caller's home: its cells' sources. 400 when it is not a
// notebook, 404 when it is not there.
std::vector<std::string> read_cells(const accounts::Caller& caller, const HomePath& p) {
  struct stat st {};
  UniqueFd fd = open_regular_file(*caller.home, p, st);
  if (static_cast<uint64_t>(st.st_size) > kMaxNotebookBytes)
    throw HttpError(http::status::payload_too_large, "Notebook is larger than 64 MiB: " + p.shown);
  std::string text;
  read_up_to(fd.get(), text, static_cast<size_t>(st.st_size), p.shown);
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("cells") || !doc["cells"].is_array())
    throw HttpError(http::status::bad_request, "Not a Jupyter notebook (no list of cells): " + p.shown);
  std::vector<std::string> cells;
  for (const json& cell : doc["cells"]) cells.push_back(cell.is_object() ? source_of(cell) : std::string());
  return cells;
}

json info_json(const exec::NotebookInfo& info) {
  return {{"id", info.id}, {"path", info.path}, {"kernel", info.kernel}, {"status", info.busy ? "busy" : "ready"}};
}

http::status status_of(exec::NotebookFailure failure) {
  switch (failure) {
    case exec::NotebookFailure::cap: return http::status::too_many_requests;
    case exec::NotebookFailure::start_failed: return http::status::service_unavailable;
    case exec::NotebookFailure::not_found: return http::status::not_found;
    case exec::NotebookFailure::ended:
    case exec::NotebookFailure::none: break;
  }
  return http::status::conflict;  // the kernel ended while the request waited for it
}

// POST /notebooks/{id}/execute: which cell, and optionally its source as the editor holds it.
struct ExecuteCheck {
  std::string id;
  std::optional<size_t> cell_index;
  std::optional<std::string> source;
};
ExecuteCheck check_execute(const Request& req) {
  json body = parse_json_object(req);
  ExecuteCheck c{req.param("id"), std::nullopt, optional_string(body, "source")};
  if (auto it = body.find("cell_index"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      unprocessable("Field 'cell_index' must be an integer of at least 0");
    c.cell_index = it->get<size_t>();
  }
  if (!c.cell_index && !c.source) unprocessable("Field 'cell_index' is required and must be an integer");
  return c;
}

}  // namespace

void add_notebook_routes(Router& router, const Services& s) {
  exec::NotebookKernels* kernels = s.notebooks;
  if (!kernels) return;
  accounts::AccountDirectory& callers = *s.callers;
  exec::AccountBoxes* boxes = s.boxes;

  router.add_async(
      http::verb::post, "/notebooks",
      offload(s.file_pool, BlockingWork([&callers, boxes, kernels](const Request& req, const Writer& writer) {
                accounts::user_id_of(req);  // the 400 of a request naming no user comes first
                std::string path = required_string(parse_json_object(req), "path");
                accounts::Caller caller = callers.resolve(req);
                HomePath p = caller.home->path(path, caller.cwd);
                std::vector<std::string> cells = read_cells(caller, p);
                kernels->open(boxes->spec_for(caller.account, caller.place()), p.shown, std::move(cells),
                              [writer](exec::NotebookOpened opened) {
                                if (!opened.info) {
                                  writer->send(error_response(status_of(opened.failure), opened.detail));
                                  return;
                                }
                                json out = info_json(*opened.info);
                                out["status"] = "ready";
                                writer->send(Response::json(out));
                              });
              })));

  router.add_async(http::verb::post, "/notebooks/{id}/execute", [&callers, kernels](const Request& req, Writer writer) {
    accounts::user_id_of(req);
    auto checked = std::make_shared<ExecuteCheck>(check_execute(req));
    auto act = [kernels, checked](const Request&, const accounts::Caller& caller, Writer w) {
      const std::string& account = caller.box;
      auto info = kernels->get(account, checked->id);
      if (!info) notebook_not_found();
      std::string code;
      if (checked->source) {
        code = *checked->source;
      } else if (auto cell = kernels->cell(account, checked->id, *checked->cell_index)) {
        code = std::move(*cell);
      } else {
        throw HttpError(http::status::bad_request, "cell_index " + std::to_string(*checked->cell_index) +
                                                       " is out of range: the notebook has " +
                                                       std::to_string(info->cells) + " cells");
      }
      kernels->execute(account, checked->id, std::move(code), [w, checked](exec::CellAnswer answer) {
        if (!answer.result) {
          w->send(error_response(status_of(answer.failure), answer.detail));
          return;
        }
        json out = std::move(*answer.result);
        if (checked->cell_index) out["cell_index"] = *checked->cell_index;
        w->send(Response::json(out));
      });
    };
    accounts::with_caller(callers, accounts::CallerAsyncHandler(act))(req, std::move(writer));
  });

  router.add_async(http::verb::get, "/notebooks/{id}",
                   accounts::with_reader(callers, [kernels](const Request& req, const accounts::Caller& caller) {
                     auto info = kernels->get(caller.box, req.param("id"));
                     if (!info) notebook_not_found();
                     return Response::json(info_json(*info));
                   }));

  router.add_async(http::verb::delete_, "/notebooks/{id}",
                   accounts::with_reader(callers, [kernels](const Request& req, const accounts::Caller& caller) {
                     if (!kernels->close(caller.box, req.param("id"))) notebook_not_found();
                     return Response::json({{"status", "stopped"}});
                   }));
}

}  // namespace agentbox::api
