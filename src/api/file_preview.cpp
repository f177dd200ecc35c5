#include "api/file_preview.hpp"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>

#include "api/file_transfer.hpp"
#include "box/box_env.hpp"
#include "exec/account_boxes.hpp"
#include "exec/process_table.hpp"
#include "fs/file_read.hpp"
#include "http/error.hpp"
#include "http/offload.hpp"
#include "http/response_writer.hpp"
#include "util/error.hpp"
#include "util/random_hex.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
using Writer = std::shared_ptr<ResponseWriter>;

namespace {

constexpr std::array<std::string_view, 6> kOfficeTypes = {".docx", ".pptx", ".xlsx", ".odt", ".odp", ".ods"};
constexpr uint64_t kMaxPreviewInput = 256ull << 20;            // a larger document is not converted
constexpr const char* kCacheDir = ".cache/agentbox/previews";  // in the home
constexpr size_t kOutputTail = 2048;                           // of LibreOffice's output, in a 422
constexpr size_t kHashPiece = 1 << 20;                         // bytes read at a time to hash

// Runs in the box: converts $2 into $1/$3.pdf through a private temporary directory (its own
// LibreOffice profile too, so two conversions never share one), which goes whatever happens.
constexpr const char* kConvertScript =
    "set -e; d=\"$1\"; mkdir -p \"$d\"; t=$(mktemp -d \"$d/.convert.XXXXXX\"); "
    "trap 'rm -rf \"$t\"' EXIT; trap 'exit 143' TERM INT; "
    "soffice \"-env:UserInstallation=file://$t/profile\" --headless --norestore --nologo "
    "--convert-to pdf --outdir \"$t\" \"$2\" </dev/null 2>&1; "
    "set -- \"$t\"/*.pdf \"$1\" \"$3\"; [ -f \"$1\" ] || { echo 'LibreOffice wrote no PDF'; exit 1; }; "
    "mv \"$1\" \"$2/$3.pdf\"";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// SHA-256 of the file's bytes, read a piece at a time (a document may be large).
std::string content_hash(const accounts::Caller& caller, const HomePath& p) {
  struct stat st {};
  UniqueFd fd = open_regular_file(*caller.home, p, st);
  if (static_cast<uint64_t>(st.st_size) > kMaxPreviewInput)
    throw HttpError(http::status::payload_too_large, "File is too large to preview (over 256 MiB): " + p.shown);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("EVP_DigestInit(sha256) failed");
  std::string piece;
  do {
    piece.clear();
    read_up_to(fd.get(), piece, kHashPiece, p.shown);
    if (EVP_DigestUpdate(ctx.get(), piece.data(), piece.size()) != 1) throw Error("EVP_DigestUpdate failed");
  } while (piece.size() == kHashPiece);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) throw Error("EVP_DigestFinal(sha256) failed");
  return hex_of(digest, len);
}

// The converted PDF, sent from a pool thread (opening it is file I/O).
void send_cached(const accounts::Caller& caller, const HomePath& pdf, const Request& req, const Writer& writer) {
  send_file_bytes(caller, pdf, req, writer);
}

}  // namespace

bool previewable(const HomePath& p) {
  std::string name = lower(p.shown);
  return std::any_of(kOfficeTypes.begin(), kOfficeTypes.end(),
                     [&](std::string_view ext) { return name.ends_with(ext); });
}

void send_preview(const PreviewContext& ctx, const accounts::Caller& caller, const HomePath& p, const Request& req,
                  const Writer& writer) {
  std::string hash = content_hash(caller, p);
  std::string cache_dir = caller.box_home + "/" + kCacheDir;
  HomePath pdf = caller.home->path(cache_dir + "/" + hash + ".pdf", caller.cwd);
  if (is_regular_file(*caller.home, pdf)) return send_cached(caller, pdf, req, writer);

  exec::StartRequest start;
  start.box = ctx.boxes->spec_for(caller.account, caller.place());
  start.command = "office preview: " + p.shown;
  auto env = base_env(start.box, /*tty=*/false);
  env["PWD"] = caller.box_home;
  start.spawn.argv = {"/bin/sh", "-c", kConvertScript, "sh", cache_dir, p.shown, hash};
  start.spawn.env = env_strings(env);
  start.spawn.cwd = caller.box_home;
  start.spawn.tty = false;
  start.stdin_data = "";
  start.timeout = ctx.timeout;
  exec::ProcessTable* table = ctx.processes;
  auto owned = std::make_shared<Request>(copy_request(req));
  auto timeout = ctx.timeout;
  auto pool = ctx.pool;
  std::string account = caller.box;
  table->start(std::move(start), [=](exec::StartOutcome started) {
    if (started.error) {
      writer->send(error_response(http::status::service_unavailable, "The preview could not start in the box"));
      return;
    }
    exec::ReadSpec read;
    read.tail_lines = 20;
    // The table stops it at the timeout; the wait ends a little later to see it stopped.
    auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(15);
    auto handle = table->wait(
        account, started.id, read, /*until_output=*/false, deadline, [=](std::optional<exec::ProcessView> view) {
          if (!view || view->status == ProcessStatus::running || view->status == ProcessStatus::killed) {
            writer->send(error_response(http::status::gateway_timeout,
                                        "The preview took longer than " + std::to_string(timeout.count()) +
                                            " s ([files] preview_timeout) and was stopped: " + p.shown));
            return;
          }
          if (view->exit_code != 0) {
            std::string said;
            for (const auto& chunk : view->output) said += chunk.data;
            if (said.size() > kOutputTail) said.erase(0, said.size() - kOutputTail);
            writer->send(error_response(http::status::unprocessable_entity,
                                        "LibreOffice could not convert " + p.shown + ": " + said));
            return;
          }
          auto live = pool.lock();
          if (!live) {
            writer->send(error_response(http::status::service_unavailable, "Shutting down"));
            return;
          }
          live->post(account, [caller, pdf, owned, writer] {
            try {
              send_cached(caller, pdf, *owned, writer);
            } catch (...) {
              writer->fail(std::current_exception());
            }
          });
        });
    writer->on_close([handle] { handle->cancel(); });
  });
}

}  // namespace agentbox::api
