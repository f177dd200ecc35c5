#include "api/file_transfer.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>

#include "fs/file_read.hpp"
#include "fs/upload_writer.hpp"
#include "http/byte_range.hpp"
#include "http/error.hpp"
#include "http/multipart.hpp"
#include "http/response_writer.hpp"
#include "util/error.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

constexpr size_t kUploadReadBytes = 256 * 1024;  // spool file → parser, per read

// Feeds the whole request body to the parser: from the spool file in pieces, or from memory.
void feed_body(const Request& req, MultipartParser& parser) {
  if (!req.body_file) {
    parser.feed(req.body);
    return;
  }
  std::string buf(kUploadReadBytes, '\0');
  for (off_t off = 0;;) {
    ssize_t n = ::pread(req.body_file.get(), buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sys_error("pread(upload spool file)");
    if (n == 0) break;
    parser.feed(std::string_view(buf.data(), static_cast<size_t>(n)));
    off += n;
  }
}

}  // namespace

void send_file_bytes(const accounts::Caller& caller, const HomePath& p, const Request& req,
                     const std::shared_ptr<ResponseWriter>& writer) {
  FileStream file = open_for_read(*caller.home, p);
  ByteRange range = parse_byte_range(req.header("Range"), file.size);
  if (range.kind == ByteRange::Kind::unsatisfiable) {
    Response r = error_response(http::status::range_not_satisfiable,
                                "Range not satisfiable: the file has " + std::to_string(file.size) + " bytes");
    r.headers.set(http::field::content_range, range.content_range(file.size));
    writer->send(std::move(r));
    return;
  }
  Response head;
  head.headers.set(http::field::content_type, file.content_type);
  head.headers.set(http::field::accept_ranges, "bytes");
  // The bytes are the user's (or a model's): a browser must not guess another type from them,
  // and an HTML preview runs in an opaque origin, so its scripts cannot read what the API's
  // own origin holds (a UI's stored token, say).
  head.headers.set("X-Content-Type-Options", "nosniff");
  head.headers.set("Content-Security-Policy",
                   "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads");
  uint64_t offset = 0;
  uint64_t length = file.size;
  if (range.kind == ByteRange::Kind::partial) {
    head.status = http::status::partial_content;
    head.headers.set(http::field::content_range, range.content_range(file.size));
    offset = range.offset;
    length = range.length;
  }
  writer->send_file(std::move(head), std::move(file.fd), offset, length);
}

WriteResult receive_upload(const accounts::Caller& caller, const HomePath& directory, const Request& req,
                           uint64_t max_bytes) {
  std::string boundary = multipart_boundary(req.header("Content-Type").value_or(""));
  std::unique_ptr<UploadWriter> upload;
  bool file_seen = false;
  bool file_complete = false;
  MultipartParser parser(boundary, {.on_part =
                                        [&](const PartHeaders& h) {
                                          if (h.name != "file" || file_seen) return false;  // other fields, later files
                                          file_seen = true;
                                          // A NUL would cut the name short at the kernel (".." + NUL + "x" is "..").
                                          if (h.filename && h.filename->find('\0') != std::string::npos)
                                            throw HttpError(http::status::bad_request, "File name contains a NUL byte");
                                          // A part without a file name is still the file, named as Open Terminal does.
                                          upload = std::make_unique<UploadWriter>(
                                              *caller.home, directory, h.filename.value_or("upload"), max_bytes);
                                          return true;
                                        },
                                    .on_data = [&](std::string_view data) { upload->append(data); },
                                    .on_part_end = [&] { file_complete = true; }});
  feed_body(req, parser);
  parser.finish();
  if (!file_complete) throw HttpError(http::status::unprocessable_entity, "Missing multipart field 'file'");
  return upload->commit();
}

std::string attachment_disposition(std::string_view file_name) {
  std::string ascii;
  std::string encoded;
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : file_name) {
    bool plain = c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '%' && c != ';';
    ascii += plain ? static_cast<char>(c) : '_';
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_') {
      encoded += static_cast<char>(c);
    } else {
      encoded += '%';
      encoded += kHex[c >> 4];
      encoded += kHex[c & 15];
    }
  }
  return "attachment; filename=\"" + ascii + "\"; filename*=UTF-8''" + encoded;
}

void send_archive(const accounts::Caller& caller, const std::vector<HomePath>& paths, const std::string& temp_dir,
                  const ArchiveOptions& options, const std::shared_ptr<ResponseWriter>& writer) {
  ZipArchive zip = make_zip_archive(*caller.home, paths, temp_dir, options);
  Response head;
  head.headers.set(http::field::content_type, "application/zip");
  head.headers.set(http::field::content_disposition, attachment_disposition(zip.name));
  writer->send_file(std::move(head), std::move(zip.fd), 0, zip.size);
}

}  // namespace agentbox::api
