// The archive writer of POST /files/archive (fs/zip_archive.*): the input describes files,
// directories and symlinks, one per line ("f NAME=CONTENT", "d NAME", "l NAME=TARGET", and
// "h NAME=A|B|..." for a sparse file: the pieces with holes of 4 KiB to 256 KiB and odd tails
// between and after them, so fs/sparse_deflate.* meets holes of every alignment), made in
// a directory "w" of a home; make_zip_archive zips "w" as the route does, and the archive is
// read back with libzip (names raw, consistency checked). Names are cleaned into paths (no
// empty, "." or ".." parts, at most 8 levels); a line whose name is taken is skipped. Beside the
// home lies a file the archive must never hold. The daemon reads no archive from a user, so
// there is no reader of ours to fuzz.
//
// Checks: the archive opens with ZIP_CHECKCONS; it holds "w/", every directory as "w/NAME/" and
// every file as "w/NAME" with its exact contents, nothing twice; a link appears only as a file
// and only with the contents of one of the home's files, never the one outside; the counts
// and the size reported are the archive's.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fs/confined_dir.hpp"
#include "fs/zip_archive.hpp"
#include "fuzz_check.hpp"
#include "fuzz_scratch.hpp"
#include "util/error.hpp"

namespace {

using namespace agentbox;

constexpr std::string_view kBoxHome = "/home/alice";
constexpr std::string_view kSecret = "agentbox fuzz: outside the home";
constexpr std::size_t kMaxLines = 32;
constexpr std::size_t kMaxDepth = 8;
constexpr std::size_t kMaxComponent = 100;

std::string g_root;  // temporary: home/, outside/secret, tmp/ (the archives' O_TMPFILE home)
constexpr std::size_t kBlock = 4096;
ConfinedDir* g_home;

// NAME as a relative path: '/'-separated parts without empty, "." and ".." ones, NUL made '_'.
std::vector<std::string> clean(std::string_view name) {
  std::vector<std::string> parts;
  while (!name.empty() && parts.size() < kMaxDepth) {
    const std::size_t slash = name.find('/');
    std::string part(name.substr(0, std::min(slash, kMaxComponent)));
    for (char& c : part)
      if (c == '\0') c = '_';
    if (!part.empty() && part != "." && part != "..") parts.push_back(std::move(part));
    if (slash == std::string_view::npos) break;
    name.remove_prefix(slash + 1);
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? "/" : "") + parts[i];
  return out;
}

struct Tree {
  std::set<std::string> dirs;                // relative to w
  std::map<std::string, std::string> files;  // relative to w → contents
  std::set<std::string> links;               // relative to w
  bool taken(const std::string& rel) const { return dirs.count(rel) || files.count(rel) || links.count(rel); }
};

// Makes the parent directories of parts; false when one of them is something else already.
bool make_parents(Tree& tree, const std::string& w, const std::vector<std::string>& parts) {
  for (std::size_t n = 1; n < parts.size(); ++n) {
    const std::string rel = join(parts, n);
    if (tree.dirs.count(rel)) continue;
    if (tree.taken(rel)) return false;
    FUZZ_CHECK(::mkdir((w + "/" + rel).c_str(), 0755) == 0);
    tree.dirs.insert(rel);
  }
  return true;
}

// "h NAME=A|B|C": writes A, skips a hole, writes B, ... and ends in a hole; returns the contents
// the file reads as (holes as zeros).
std::string make_sparse(const std::string& path, std::string_view value) {
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  FUZZ_CHECK(fd >= 0);
  std::string contents;
  std::size_t index = 0;
  for (;;) {
    const std::size_t bar = value.find('|');
    const std::string_view piece = value.substr(0, bar);
    if (index > 0) {  // a hole before every piece but the first: whole blocks and an odd tail
      const std::size_t k = 1 + (index * 31 + piece.size()) % 64;
      contents.append(k * kBlock + (k * 7) % kBlock, '\0');
    }
    FUZZ_CHECK(::pwrite(fd, piece.data(), piece.size(), static_cast<off_t>(contents.size())) ==
               static_cast<ssize_t>(piece.size()));
    contents.append(piece);
    ++index;
    if (bar == std::string_view::npos) break;
    value.remove_prefix(bar + 1);
  }
  contents.append((index % 3) * kBlock + index * 123, '\0');  // a hole at the end, some of it partial
  FUZZ_CHECK(::ftruncate(fd, static_cast<off_t>(contents.size())) == 0);
  ::close(fd);
  return contents;
}

Tree make_tree(std::string_view input, const std::string& w) {
  Tree tree;
  for (std::size_t line = 0; !input.empty() && line < kMaxLines; ++line) {
    const std::size_t nl = input.find('\n');
    std::string_view record = input.substr(0, nl);
    input = nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
    if (record.size() < 2) continue;
    const char kind = record[0];
    record.remove_prefix(2);
    const std::size_t eq = record.find('=');
    const std::vector<std::string> parts = clean(record.substr(0, eq));
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : record.substr(eq + 1);
    if (parts.empty() || !make_parents(tree, w, parts)) continue;
    const std::string rel = join(parts, parts.size());
    if (tree.taken(rel)) continue;
    const std::string path = w + "/" + rel;
    if (kind == 'd') {
      FUZZ_CHECK(::mkdir(path.c_str(), 0755) == 0);
      tree.dirs.insert(rel);
    } else if (kind == 'h') {
      tree.files.emplace(rel, make_sparse(path, value));
    } else if (kind == 'l') {
      const std::string target(value);
      if (target.empty() || target.find('\0') != std::string::npos) continue;
      FUZZ_CHECK(::symlink(target.c_str(), path.c_str()) == 0);
      tree.links.insert(rel);
    } else {
      if (value == kSecret) continue;
      const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      FUZZ_CHECK(fd >= 0);
      FUZZ_CHECK(::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size()));
      ::close(fd);
      tree.files.emplace(rel, std::string(value));
    }
  }
  return tree;
}

// name → contents of every entry (directories: "" and a name ending in '/').
std::map<std::string, std::string> read_back(const ZipArchive& archive) {
  std::string bytes(archive.size, '\0');
  FUZZ_CHECK(::pread(archive.fd.get(), bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  FUZZ_CHECK(src);
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!za) std::fprintf(stderr, "zip_open: %s\n", zip_error_strerror(&err));
  FUZZ_CHECK(za);
  std::map<std::string, std::string> entries;
  const zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    const char* name = zip_get_name(za, index, ZIP_FL_ENC_RAW);
    FUZZ_CHECK(name);
    zip_stat_t st;
    FUZZ_CHECK(zip_stat_index(za, index, 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE));
    std::string contents(st.size, '\0');
    zip_file_t* f = zip_fopen_index(za, index, 0);
    FUZZ_CHECK(f);
    FUZZ_CHECK(zip_fread(f, contents.data(), contents.size()) == static_cast<zip_int64_t>(contents.size()));
    zip_fclose(f);
    FUZZ_CHECK(entries.emplace(name, std::move(contents)).second);  // nothing twice
  }
  zip_discard(za);  // frees src too
  zip_error_fini(&err);
  return entries;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_root = fuzz_scratch_dir("zip");
  for (const char* dir : {"home", "outside", "tmp"})
    if (::mkdir((g_root + "/" + dir).c_str(), 0755) != 0) std::abort();
  const int fd = ::open((g_root + "/outside/secret").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, kSecret.data(), kSecret.size()) != static_cast<ssize_t>(kSecret.size())) std::abort();
  ::close(fd);
  g_home = new ConfinedDir(ConfinedDir::open_home(g_root + "/home", kBoxHome, ::getuid(), ::getgid()));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string w = g_root + "/home/w";
  std::filesystem::remove_all(w);
  FUZZ_CHECK(::mkdir(w.c_str(), 0755) == 0);
  const Tree tree = make_tree(std::string_view(reinterpret_cast<const char*>(data), size), w);

  const ZipArchive archive = make_zip_archive(*g_home, {HomePath{"w", std::string(kBoxHome) + "/w"}}, g_root + "/tmp");
  struct stat st;
  FUZZ_CHECK(::fstat(archive.fd.get(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == archive.size);
  FUZZ_CHECK(archive.name == "w.zip");
  std::map<std::string, std::string> entries = read_back(archive);

  std::set<std::string> contents_in_home;
  for (const auto& [rel, contents] : tree.files) contents_in_home.insert(contents);
  std::uint64_t files = 0;
  for (const auto& [name, contents] : entries) {
    FUZZ_CHECK(name.starts_with("w/"));
    const std::string rel = name.substr(2);
    if (rel.empty()) continue;  // "w/" itself
    if (rel.ends_with('/')) {
      FUZZ_CHECK(tree.dirs.count(rel.substr(0, rel.size() - 1)));
      continue;
    }
    ++files;
    if (auto it = tree.files.find(rel); it != tree.files.end()) {
      FUZZ_CHECK(contents == it->second);
      continue;
    }
    FUZZ_CHECK(tree.links.count(rel));
    FUZZ_CHECK(contents != kSecret);
    FUZZ_CHECK(contents_in_home.count(contents));
  }
  FUZZ_CHECK(entries.count("w/"));
  for (const std::string& dir : tree.dirs) FUZZ_CHECK(entries.count("w/" + dir + "/"));
  for (const auto& [rel, contents] : tree.files) FUZZ_CHECK(entries.count("w/" + rel));
  FUZZ_CHECK(files == archive.files);
  return 0;
}
