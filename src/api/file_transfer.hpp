#pragma once
// The /files routes that move whole files as bytes rather than JSON: view/serve (streamed from
// the descriptor, with Range), upload (a spooled multipart body streamed into the home) and
// archive (a zip streamed from an unnamed temporary file). Each runs on a file pool thread (http/offload.hpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "accounts/directory.hpp"
#include "fs/file_write.hpp"
#include "fs/zip_archive.hpp"
#include "http/request.hpp"
#include "http/response_writer.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

// GET /files/view, GET /files/serve/{path}: the bytes of the regular file `p` with a
// Content-Type from its name; a single Range is 206 with Content-Range, one past the end 416.
// The body is sent from the descriptor in pieces, never read whole.
void send_file_bytes(const accounts::Caller& caller, const HomePath& p, const Request& req,
                     const std::shared_ptr<ResponseWriter>& writer);

// POST /files/upload: the multipart field `file` of req's body (spooled to req.body_file, or in
// req.body) becomes DIRECTORY/<its file name>, replacing atomically. No such field: 422.
WriteResult receive_upload(const accounts::Caller& caller, const HomePath& directory, const Request& req,
                           uint64_t max_bytes);

// POST /files/archive: a zip of `paths` as an application/zip attachment.
void send_archive(const accounts::Caller& caller, const std::vector<HomePath>& paths, const std::string& temp_dir,
                  const ArchiveOptions& options, const std::shared_ptr<ResponseWriter>& writer);

// Content-Disposition for a download name: an ASCII fallback plus RFC 6266 filename*.
std::string attachment_disposition(std::string_view file_name);

}  // namespace agentbox::api
