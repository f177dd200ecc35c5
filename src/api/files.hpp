#pragma once
// Every Open Terminal /files/* route (API.md Part A): cwd, list, read, display, view, serve,
// write, replace, mkdir, delete, move, grep, glob, upload, archive. Each resolves the caller
// first and reaches files only through the caller's ConfinedDir (fs/), on a file pool thread (http/offload.hpp),
// never on an io thread. Paths are relative to the session cwd, "~/...", or absolute as the
// box sees them ("/home/NAME/..."); anything else is 403 (fs/home_path.hpp).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "accounts/directory.hpp"
#include "fs/file_read.hpp"
#include "fs/zip_archive.hpp"
#include "http/offload.hpp"
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct FileRoutesOptions {
  uint64_t upload_max_bytes = 1ull << 30;    // bytes of one uploaded file
  ReadOptions read;                          // read_file's byte budget and size limits
  ArchiveOptions archive;                    // archive input and entry limits
  std::chrono::seconds preview_timeout{60};  // a LibreOffice conversion (preview=true) at most
};

struct Services;
// The work runs on services.file_pool; services.callers must outlive the router (and the
// server it goes into).
void add_file_routes(Router& router, const Services& services);

// Room a multipart body needs beyond the file itself (boundaries, part headers, other fields).
inline constexpr uint64_t kMultipartOverheadBytes = 1 << 20;

}  // namespace agentbox::api
