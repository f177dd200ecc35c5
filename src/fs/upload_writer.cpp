#include "fs/upload_writer.hpp"

#include "fs/fs_error.hpp"

namespace agentbox {
namespace {

std::string_view last_component(std::string_view name) {
  size_t slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name.empty() || name == "." || name == "..")
    throw FsError(FsErrorKind::bad_request, "Invalid file name for upload");
  return name;
}

}  // namespace

UploadWriter::UploadWriter(const ConfinedDir& home, const HomePath& directory, std::string_view file_name,
                           uint64_t max_bytes)
    : home_(home), path_(directory.child(last_component(file_name))), max_bytes_(max_bytes) {
  auto as_user = home_.as_user();
  home_.make_dirs(directory);
  file_ = std::make_unique<AtomicFile>(home_.write_target(path_), path_.shown);
}

UploadWriter::~UploadWriter() {
  try {
    abort();
  } catch (const Error&) {  // the identity was refused: drop the file as the daemon
    file_.reset();
  }
}

void UploadWriter::append(std::string_view chunk) {
  if (!file_) throw FsError(FsErrorKind::bad_request, "Upload already finished");
  if (file_->size() + chunk.size() > max_bytes_) {
    abort();
    throw FsError(FsErrorKind::too_large, "Upload larger than " + std::to_string(max_bytes_) + " bytes");
  }
  file_->write(chunk);  // a plain write(2) on our descriptor: no identity needed
}

WriteResult UploadWriter::commit() {
  if (!file_) throw FsError(FsErrorKind::bad_request, "Upload already finished");
  auto as_user = home_.as_user();
  file_->commit();
  WriteResult out{path_.shown, file_->size()};
  file_.reset();
  return out;
}

void UploadWriter::abort() {
  if (!file_) return;
  auto as_user = home_.as_user();  // a named temporary file is unlinked as the account
  file_.reset();
}

}  // namespace agentbox
