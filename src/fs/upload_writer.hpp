#pragma once
// UploadWriter: /files/upload streamed to disk. The body arrives in chunks; the file appears
// under its name only on commit(), complete, replacing any file of that name; abort() or
// destruction without commit() leaves nothing behind (AtomicFile).
//
// Each call may come from a different thread: every step that needs the account's fs identity
// takes it itself, for the duration of the call.
#include <cstdint>
#include <memory>
#include <string_view>

#include "fs/atomic_file.hpp"
#include "fs/confined_dir.hpp"
#include "fs/file_write.hpp"

namespace agentbox {

class UploadWriter {
 public:
  // Creates `directory` (and parents) if missing and starts the file `file_name` in it. Only the
  // last '/'-separated component of file_name is used, as Open Terminal does; an empty name,
  // "." or "..": bad_request. Over max_bytes, append() throws too_large (and the upload is
  // dropped).
  UploadWriter(const ConfinedDir& home, const HomePath& directory, std::string_view file_name, uint64_t max_bytes);
  ~UploadWriter();
  UploadWriter(const UploadWriter&) = delete;
  UploadWriter& operator=(const UploadWriter&) = delete;

  void append(std::string_view chunk);
  WriteResult commit();
  void abort();

 private:
  const ConfinedDir& home_;
  HomePath path_;
  uint64_t max_bytes_;
  std::unique_ptr<AtomicFile> file_;  // null once committed or aborted
};

}  // namespace agentbox
