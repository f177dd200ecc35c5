#include "fs/zip_archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <set>

#include "fs/dir_entries.hpp"
#include "fs/file_read.hpp"
#include "fs/fs_error.hpp"
#include "fs/sparse_deflate.hpp"

namespace agentbox {
namespace {

// What goes into the archive, decided before any byte is written.
struct Item {
  std::string arc_name;  // name in the archive; directories end in '/'
  HomePath path;         // files: reopened through ConfinedDir when libzip reads them
  uint64_t size = 0;
  time_t mtime = 0;
  bool is_dir = false;
};

// ---------------------------------------------------------------- planning (as the account)

struct Planner {
  const ConfinedDir& home;
  const ArchiveOptions& opt;
  std::vector<Item> items;
  std::set<std::string> names;
  uint64_t input_bytes = 0;

  void add(Item item) {
    if (!names.insert(item.arc_name).second) return;  // same name twice: the first stays
    if (!item.is_dir) {
      input_bytes += item.size;
      if (input_bytes > opt.max_input_bytes)
        throw FsError(FsErrorKind::too_large, "Archive input is more than " + std::to_string(opt.max_input_bytes) +
                                                  " bytes, the most one archive takes (holes of sparse files "
                                                  "count by their size): archive fewer or smaller files");
    }
    items.push_back(std::move(item));
  }

  void add_file(std::string arc_name, const HomePath& p, const struct stat& st) {
    add({std::move(arc_name), p, static_cast<uint64_t>(st.st_size), st.st_mtim.tv_sec, false});
  }

  void add_path(const HomePath& p) {
    UniqueFd fd = when_missing(FsErrorKind::not_found, "Path not found", p.shown, [&] { return home.open(p, O_PATH); });
    struct stat st;
    fs_check(::fstat(fd.get(), &st), p.shown);
    std::string base = p.shown.substr(p.shown.rfind('/') + 1);  // the home: its user name
    if (S_ISREG(st.st_mode)) return add_file(base, p, st);
    if (!S_ISDIR(st.st_mode)) return;  // FIFOs, sockets, devices hold nothing to archive
    add({base + "/", p, 0, st.st_mtim.tv_sec, true});
    bool complete = walk_tree(fd.get(), p.shown, opt.limits, [&](const WalkEntry& e) {
      HomePath child{p.is_home() ? std::string(e.rel) : p.rel + "/" + std::string(e.rel),
                     p.shown + "/" + std::string(e.rel)};
      std::string arc_name = base + "/" + std::string(e.rel);
      struct stat est;
      if (e.type == DT_DIR) {
        if (::fstatat(e.dirfd, e.entry.name.c_str(), &est, AT_SYMLINK_NOFOLLOW) == 0)
          add({arc_name + "/", child, 0, est.st_mtim.tv_sec, true});
      } else if (e.type == DT_REG) {
        if (::fstatat(e.dirfd, e.entry.name.c_str(), &est, AT_SYMLINK_NOFOLLOW) == 0) add_file(arc_name, child, est);
      } else if (e.type == DT_LNK) {
        add_link(arc_name, child);
      }
      return Visit::next;
    });
    if (!complete)
      throw FsError(FsErrorKind::too_large, "Too many entries to archive under " + p.shown + " (limit " +
                                                std::to_string(opt.limits.max_entries) + " entries, " +
                                                std::to_string(opt.limits.max_depth) + " levels)");
  }

  // A symlink met in a walk: archived as the regular file it names when that is inside the
  // home (ConfinedDir resolves it); links out, dangling ones and links to directories are left
  // out (never entered: no cycles, no escape).
  void add_link(const std::string& arc_name, const HomePath& p) {
    try {
      UniqueFd fd = home.open(p, O_PATH);
      struct stat st;
      if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)) add_file(arc_name, p, st);
    } catch (const FsError& e) {
      if (e.kind() == FsErrorKind::too_large) throw;
    }
  }
};

// ---------------------------------------------------------------- libzip sources

// Shared by the sources of one archive: the first error a callback met, to rethrow as it was.
struct ZipRun {
  std::exception_ptr error;
};

// One file's contents, opened only when libzip reads it (so an archive of many files never
// holds many descriptors), with the account's fs identity for the open, and read no further
// than the size planned (a file growing meanwhile cannot grow the archive past the limit).
// The source deflates the file itself (fs/sparse_deflate.hpp: holes are never read) and tells
// libzip its data is deflated already, so libzip copies it as it comes; the CRC and size it
// asks for once the data is copied are the deflater's.
struct FileSource {
  const ConfinedDir& home;
  Item item;
  ZipRun& run;
  UniqueFd fd;
  std::unique_ptr<SparseDeflater> deflater;
  bool done = false;  // the whole stream was read: crc and size below are the entry's
  uint32_t crc = 0;
  uint64_t size = 0;
  zip_error_t error;

  static zip_int64_t callback(void* user, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
    auto* self = static_cast<FileSource*>(user);
    switch (cmd) {
      case ZIP_SOURCE_OPEN: return self->open();
      case ZIP_SOURCE_READ: return self->read(data, len);
      case ZIP_SOURCE_CLOSE:
        self->deflater.reset();
        self->fd.reset();
        return 0;
      case ZIP_SOURCE_STAT: {
        auto* st = static_cast<zip_stat_t*>(data);
        zip_stat_init(st);
        st->comp_method = ZIP_CM_DEFLATE;
        st->size = self->done ? self->size : self->item.size;
        st->mtime = self->item.mtime;
        st->valid |= ZIP_STAT_COMP_METHOD | ZIP_STAT_SIZE | ZIP_STAT_MTIME;
        if (self->done) {
          st->crc = self->crc;
          st->valid |= ZIP_STAT_CRC;
        }
        return sizeof(zip_stat_t);
      }
      case ZIP_SOURCE_ERROR: return zip_error_to_data(&self->error, data, len);
      case ZIP_SOURCE_FREE:
        zip_error_fini(&self->error);
        delete self;
        return 0;
      case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                              ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
      default: zip_error_set(&self->error, ZIP_ER_OPNOTSUPP, 0); return -1;
    }
  }

  zip_int64_t open() {
    try {
      {
        auto as_user = home.as_user();
        struct stat st;
        fd = open_regular_file(home, item.path, st);
      }
      deflater = std::make_unique<SparseDeflater>(fd.get(), item.size);
      done = false;
      return 0;
    } catch (...) {
      // Changed since it was planned (gone, or now a link out): fail the archive, not skip.
      if (!run.error) run.error = std::current_exception();
      zip_error_set(&error, ZIP_ER_OPEN, 0);
      return -1;
    }
  }

  zip_int64_t read(void* data, zip_uint64_t len) {
    try {
      const std::size_t n = deflater->read(static_cast<char*>(data), static_cast<std::size_t>(len));
      if (n == 0) {
        done = true;
        crc = deflater->crc();
        size = deflater->bytes_in();
      }
      return static_cast<zip_int64_t>(n);
    } catch (const Error& e) {
      zip_error_set(&error, ZIP_ER_READ, e.code());
      return -1;
    }
  }
};

// The archive itself as a libzip source writing to a descriptor it does not own. It starts
// as "no such file" so libzip makes a new archive, and has nothing to roll back to.
struct ArchiveSink {
  int fd;
  uint64_t pos = 0;
  uint64_t end = 0;
  bool written = false;
  zip_error_t error;

  static zip_int64_t callback(void* user, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
    auto* self = static_cast<ArchiveSink*>(user);
    switch (cmd) {
      case ZIP_SOURCE_STAT:
        if (!self->written) {  // what libzip takes for "the archive does not exist yet"
          zip_error_set(&self->error, ZIP_ER_READ, ENOENT);
          return -1;
        } else {
          auto* st = static_cast<zip_stat_t*>(data);
          zip_stat_init(st);
          st->size = self->end;
          st->valid |= ZIP_STAT_SIZE;
          return sizeof(zip_stat_t);
        }
      case ZIP_SOURCE_BEGIN_WRITE: self->pos = self->end = 0; return self->truncate();
      case ZIP_SOURCE_WRITE: return self->write(data, len);
      case ZIP_SOURCE_SEEK_WRITE: {
        zip_int64_t at = zip_source_seek_compute_offset(self->pos, self->end, data, len, &self->error);
        if (at < 0) return -1;
        self->pos = static_cast<uint64_t>(at);
        return 0;
      }
      case ZIP_SOURCE_TELL_WRITE: return static_cast<zip_int64_t>(self->pos);
      case ZIP_SOURCE_COMMIT_WRITE: self->written = true; return 0;
      case ZIP_SOURCE_ROLLBACK_WRITE: self->pos = self->end = 0; return self->truncate();
      case ZIP_SOURCE_REMOVE:  // no entries at all: an empty archive is still an archive
        self->written = true;
        return self->write_empty_archive();
      case ZIP_SOURCE_ERROR: return zip_error_to_data(&self->error, data, len);
      case ZIP_SOURCE_FREE: zip_error_fini(&self->error); return 0;  // owned by the caller
      case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                              ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL,
                                              ZIP_SOURCE_SUPPORTS, ZIP_SOURCE_BEGIN_WRITE, ZIP_SOURCE_WRITE,
                                              ZIP_SOURCE_COMMIT_WRITE, ZIP_SOURCE_ROLLBACK_WRITE, ZIP_SOURCE_SEEK_WRITE,
                                              ZIP_SOURCE_TELL_WRITE, ZIP_SOURCE_REMOVE, -1);
      default:  // reading back an archive it never had
        zip_error_set(&self->error, ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
  }

  zip_int64_t truncate() {
    if (::ftruncate(fd, 0) == 0) return 0;
    zip_error_set(&error, ZIP_ER_WRITE, errno);
    return -1;
  }

  zip_int64_t write(const void* data, zip_uint64_t len) {
    const char* p = static_cast<const char*>(data);
    zip_uint64_t done = 0;
    while (done < len) {
      ssize_t n = ::pwrite(fd, p + done, len - done, static_cast<off_t>(pos));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        zip_error_set(&error, ZIP_ER_WRITE, n < 0 ? errno : ENOSPC);
        return -1;
      }
      done += static_cast<zip_uint64_t>(n);
      pos += static_cast<uint64_t>(n);
    }
    end = std::max(end, pos);
    return static_cast<zip_int64_t>(len);
  }

  zip_int64_t write_empty_archive() {
    // End of central directory record with zero entries (APPNOTE 4.3.16).
    static const unsigned char kEmpty[22] = {'P', 'K', 5, 6};
    pos = end = 0;
    if (truncate() < 0) return -1;
    return write(kEmpty, sizeof kEmpty) < 0 ? -1 : 0;
  }
};

[[noreturn]] void throw_zip(std::string_view what, zip_error_t* error) {
  // The archive is built in the account's volume: a full one is its quota's doing (507).
  if (const int err = zip_error_code_system(error); err == ENOSPC || err == EDQUOT)
    throw FsError(FsErrorKind::insufficient_storage,
                  std::string("Disk quota exceeded: the archive does not fit in your storage: ") + std::strerror(err),
                  err);
  throw Error("libzip " + std::string(what) + ": " + zip_error_strerror(error), zip_error_code_system(error));
}

std::string download_name(const std::vector<HomePath>& paths) {
  if (paths.size() != 1) return "download.zip";
  const std::string& shown = paths[0].shown;
  std::string base = shown.substr(shown.rfind('/') + 1);
  return (base.empty() ? "archive" : base) + ".zip";
}

}  // namespace

ZipArchive make_zip_archive(const ConfinedDir& home, const std::vector<HomePath>& paths, const std::string& temp_dir,
                            const ArchiveOptions& opt) {
  if (paths.empty()) throw FsError(FsErrorKind::bad_request, "No paths provided");

  // As the daemon: the temporary file lives outside every home.
  UniqueFd out(::open(temp_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!out && (errno == ENOSPC || errno == EDQUOT))  // no inode left in the account's volume
    throw FsError(
        FsErrorKind::insufficient_storage,
        std::string("Disk quota exceeded: no room in your storage to build the archive: ") + std::strerror(errno),
        errno);
  if (!out) throw sys_error("open(O_TMPFILE in " + temp_dir + ")");

  Planner plan{home, opt, {}, {}, 0};
  {
    auto as_user = home.as_user();
    for (const HomePath& p : paths) plan.add_path(p);
  }

  ZipRun run;  // outlives every source that reports into it
  ArchiveSink sink{out.get()};
  zip_error_init(&sink.error);
  zip_error_t error;
  zip_error_init(&error);
  std::unique_ptr<zip_error_t, void (*)(zip_error_t*)> error_guard(&error, zip_error_fini);
  zip_source_t* src = zip_source_function_create(&ArchiveSink::callback, &sink, &error);
  if (!src) {
    zip_error_fini(&sink.error);
    throw_zip("source", &error);
  }
  zip_t* za = zip_open_from_source(src, ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (!za) {
    zip_source_free(src);  // runs ZIP_SOURCE_FREE
    throw_zip("open", &error);
  }
  std::unique_ptr<zip_t, void (*)(zip_t*)> archive(za, zip_discard);  // until zip_close succeeds

  ZipArchive result;
  for (const Item& item : plan.items) {
    if (item.is_dir) {
      zip_int64_t index = zip_dir_add(za, item.arc_name.c_str(), ZIP_FL_ENC_GUESS);
      if (index < 0) throw_zip("add " + item.arc_name, zip_get_error(za));
      zip_file_set_mtime(za, static_cast<zip_uint64_t>(index), item.mtime, 0);
      continue;
    }
    auto* file = new FileSource{home, item, run, {}, nullptr, false, 0, 0, {}};
    zip_error_init(&file->error);
    zip_source_t* fsrc = zip_source_function_create(&FileSource::callback, file, &error);
    if (!fsrc) {
      zip_error_fini(&file->error);
      delete file;
      throw_zip("source", &error);
    }
    if (zip_file_add(za, item.arc_name.c_str(), fsrc, ZIP_FL_ENC_GUESS) < 0) {
      zip_source_free(fsrc);
      throw_zip("add " + item.arc_name, zip_get_error(za));
    }
    ++result.files;
  }
  if (zip_close(za) < 0) {
    if (run.error) std::rethrow_exception(run.error);
    throw_zip("close", zip_get_error(za));
  }
  archive.release();  // zip_close freed it

  struct stat st;
  check(::fstat(out.get(), &st), "fstat(archive)");
  result.fd = std::move(out);
  result.size = static_cast<uint64_t>(st.st_size);
  result.name = download_name(paths);
  return result;
}

}  // namespace agentbox
