#pragma once
// read_file, view/serve and display_file: reading one file of the home.
#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

#include "fs/confined_dir.hpp"

namespace agentbox {

struct ReadOptions {
  std::optional<uint64_t> start_line;  // 1-based, inclusive; default: first line
  // 1-based byte position in start_line to begin at: how a line longer than the budget is read
  // on from where the previous answer cut it (its next_column).
  std::optional<uint64_t> start_column;
  std::optional<uint64_t> end_line;        // 1-based, inclusive; default: last line
  size_t byte_budget = 256 << 10;          // most content bytes returned; whole lines when possible
  uint64_t max_text_bytes = 64ull << 20;   // larger text files are too_large (counting lines
                                           // means reading all of it)
  uint64_t max_image_bytes = 10ull << 20;  // larger images are too_large
};

struct ReadResult {
  enum class Kind { text, image };
  Kind kind = Kind::text;
  std::string path;  // as the box sees it
  // Text (valid UTF-8; invalid bytes past the sniffed head become U+FFFD):
  uint64_t total_lines = 0;        // as Python's splitlines: a last line without '\n' counts
  std::string content;             // the requested lines, '\n' kept
  bool truncated = false;          // the budget cut the requested range short
  uint64_t next_line = 0;          // when truncated: the start_line to continue from
  uint64_t next_column = 0;        // when truncated inside a line: the start_column to continue from
  std::string encoding = "utf-8";  // what the file was decoded from: "utf-8" or "windows-1252"
  // Image (PNG, JPEG, GIF, WebP, BMP recognised by their first bytes):
  std::string mime;
  std::string bytes;
};

// Reads `p`. Text comes back as lines, as UTF-8: a file not in UTF-8 is decoded as Windows-1252
// (fs/text_encoding.hpp). A file whose first 8 KiB hold a NUL or many control characters is
// binary: an image comes back as bytes, anything else is FsError unsupported_media
// "Unsupported binary file type: MIME (N bytes)". Missing or not a regular file: not_found
// "File not found: ...". SVG is text (its XML is what a model can use). A line longer than the
// budget comes back in pieces: next_line and next_column say where the next piece starts, so
// nothing is ever out of reach.
ReadResult read_text(const ConfinedDir& home, const HomePath& p, const ReadOptions& opt = {});

// An open regular file for /files/view and /files/serve: the server streams it, honouring Range.
struct FileStream {
  std::string path;  // as the box sees it
  UniqueFd fd;       // O_RDONLY, offset 0
  uint64_t size = 0;
  double modified = 0;       // mtime, Unix seconds
  std::string content_type;  // from the name's extension (content_type.hpp)
};
FileStream open_for_read(const ConfinedDir& home, const HomePath& p);

// True when `p` resolves (inside the home) to a regular file: display_file's "exists".
bool is_regular_file(const ConfinedDir& home, const HomePath& p);

// Shared with replace_in_file: opens `p` as a regular file for reading (missing, or not a
// regular file: not_found "File not found: ..."; a FIFO cannot block it), filling `st`.
UniqueFd open_regular_file(const ConfinedDir& home, const HomePath& p, struct stat& st);
// Appends from `fd` to `out` until it holds `want` bytes or the file ends.
void read_up_to(int fd, std::string& out, size_t want, std::string_view shown);
// Open Terminal's 415: "Unsupported binary file type: MIME (N bytes)".
[[noreturn]] void throw_unsupported_binary(const HomePath& p, uint64_t size);

}  // namespace agentbox
