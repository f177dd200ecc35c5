#pragma once
// Office previews: GET /files/view?path=…&preview=true on a .docx/.pptx/.xlsx/.odt/.odp/.ods
// answers it rendered as PDF (Open Terminal 0.12.3), so a file viewer can show it.
//
// LibreOffice headless converts it IN THE CALLER'S BOX, as the caller, with its box's limits, as
// an ordinary command of the account (exec/process_table.hpp; it shows in GET /execute) stopped
// at [files] preview_timeout. The PDF is kept by the SHA-256 of the file's content in the
// caller's own home (~/.cache/agentbox/previews/HASH.pdf): counted against the caller's quota,
// reused while the content is the same, and deleted like any of the user's files.
#include <chrono>
#include <memory>

#include "accounts/directory.hpp"
#include "fs/home_path.hpp"
#include "http/request.hpp"
#include "util/fair_pool.hpp"

namespace agentbox::http {
class ResponseWriter;
}
namespace agentbox::exec {
class AccountBoxes;
class ProcessTable;
}  // namespace agentbox::exec

namespace agentbox::api {

struct PreviewContext {
  exec::AccountBoxes* boxes = nullptr;
  exec::ProcessTable* processes = nullptr;
  std::weak_ptr<FairPool> pool;  // where the PDF is opened once converted (weak: see http/offload.hpp)
  std::chrono::seconds timeout{60};
};

// Whether `p` is of a type preview=true converts (by its extension, case-insensitive).
bool previewable(const HomePath& p);

// Answers through writer with p's PDF: from the cache, else converted in the caller's box.
// 504 when the conversion ran past the timeout, 422 when LibreOffice could not convert it.
// Runs on a file pool thread; the conversion waits on the box loop, holding no thread.
void send_preview(const PreviewContext& ctx, const accounts::Caller& caller, const HomePath& p,
                  const http::Request& req, const std::shared_ptr<http::ResponseWriter>& writer);

}  // namespace agentbox::api
