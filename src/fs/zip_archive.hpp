#pragma once
// POST /files/archive: a zip of files and directories of one home, for download.
//
// Every file goes into the archive through ConfinedDir with the account's fs identity: the walk
// (tree_walk) opens one name at a time and never enters a symlink; a link to a regular file
// inside the home is archived as that file, a link leading out of the home (or to a directory,
// or dangling) is left out. The archive is written to an unnamed O_TMPFILE in a directory of the
// daemon's (never the home), so it counts against no one's quota, needs no cleanup and is gone
// when the descriptor is closed. Each file is deflated by fs/sparse_deflate.hpp: the holes of a
// sparse file are never read, so archiving one costs the daemon its data, not its size.
#include <cstdint>
#include <string>
#include <vector>

#include "fs/confined_dir.hpp"
#include "fs/tree_walk.hpp"

namespace agentbox {

struct ArchiveOptions {
  uint64_t max_input_bytes = 4ull << 30;                      // sum of the archived files' sizes; more: too_large
  WalkLimits limits{.max_entries = 100000, .max_depth = 64};  // a cut walk is too_large too
};

struct ZipArchive {
  UniqueFd fd;         // the archive, read-only use from offset 0 (pread)
  uint64_t size = 0;   // bytes
  std::string name;    // download name: "<basename>.zip" for one path, else "download.zip"
  uint64_t files = 0;  // file entries written
};

// Zips `paths` (each a file or a directory; a directory's entries go under its own name, as
// Open Terminal does). Empty list: bad_request "No paths provided"; a path that does not exist:
// not_found "Path not found: ..."; one leading out of the home: forbidden. `temp_dir` is a
// daemon-owned directory on a filesystem with O_TMPFILE. Two inputs with the same name in the
// archive: the first is kept.
ZipArchive make_zip_archive(const ConfinedDir& home, const std::vector<HomePath>& paths, const std::string& temp_dir,
                            const ArchiveOptions& opt = {});

}  // namespace agentbox
