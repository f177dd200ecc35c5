// make_zip_archive against real files, as root, with the account's uid doing the reading: the
// archive holds exactly the files of the home asked for (read back with libzip), links leading
// out of the home are left out or refused, the account's permissions apply, and the archive
// never appears under any name.
#include "fs/zip_archive.hpp"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <time.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "fs/fs_error.hpp"
#include "fs/sparse_deflate.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;
using ::testing::HasSubstr;

constexpr uid_t kUid = 1999998;
constexpr gid_t kGid = 1999998;

// Entry name → contents ("/"-terminated names are directories, contents empty).
using Entries = std::map<std::string, std::string>;

Entries unzip(int fd) {
  // Read the archive through a copy of the descriptor's bytes: libzip may not share our fd.
  std::string bytes;
  char buf[65536];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    off += n;
  }
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  EXPECT_NE(za, nullptr) << zip_error_strerror(&err);
  Entries out;
  if (!za) {
    zip_source_free(src);
    return out;
  }
  for (zip_int64_t i = 0; i < zip_get_num_entries(za, 0); ++i) {
    std::string name = zip_get_name(za, static_cast<zip_uint64_t>(i), 0);
    std::string data;
    zip_file_t* f = zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0);
    EXPECT_NE(f, nullptr) << name;
    for (zip_int64_t n; f && (n = zip_fread(f, buf, sizeof buf)) > 0;) data.append(buf, static_cast<size_t>(n));
    if (f) zip_fclose(f);
    out[name] = data;
  }
  zip_close(za);
  zip_error_fini(&err);
  return out;
}

class ZipArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-zip-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ASSERT_EQ(::chmod(base_.c_str(), 0755), 0);
    home_ = base_ + "/home";
    spool_ = base_ + "/spool";
    ASSERT_EQ(::mkdir(spool_.c_str(), 0700), 0);
    owned_dir(home_, 0700);
    owned_dir(base_ + "/outside", 0777);
    file(base_ + "/outside/secret", "OUTSIDE SECRET");
    dir_ = std::make_unique<ConfinedDir>(ConfinedDir::open_home(home_, "/home/alice", kUid, kGid));
  }
  void TearDown() override {
    dir_.reset();
    stdfs::remove_all(base_);
  }

  static void owned_dir(const std::string& path, mode_t mode = 0755) {
    ASSERT_EQ(::mkdir(path.c_str(), mode), 0) << path;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), kUid, kGid), 0);
  }
  static void file(const std::string& path, const std::string& data, mode_t mode = 0644) {
    std::ofstream(path, std::ios::binary) << data;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), kUid, kGid), 0);
  }
  void link(const std::string& rel, const std::string& target) {
    ASSERT_EQ(::symlink(target.c_str(), (home_ + "/" + rel).c_str()), 0);
    ASSERT_EQ(::lchown((home_ + "/" + rel).c_str(), kUid, kGid), 0);
  }
  std::vector<HomePath> paths(std::initializer_list<const char*> ps) {
    std::vector<HomePath> out;
    for (const char* p : ps) out.push_back(dir_->path(p));
    return out;
  }
  ZipArchive zip(std::initializer_list<const char*> ps, const ArchiveOptions& opt = {}) {
    return make_zip_archive(*dir_, paths(ps), spool_, opt);
  }
  FsErrorKind error_of(std::initializer_list<const char*> ps, std::string* message = nullptr,
                       const ArchiveOptions& opt = {}) {
    try {
      zip(ps, opt);
    } catch (const FsError& e) {
      if (message) *message = e.what();
      return e.kind();
    }
    ADD_FAILURE() << "no FsError";
    return FsErrorKind::bad_request;
  }

  std::string base_, home_, spool_;
  std::unique_ptr<ConfinedDir> dir_;
};

TEST_F(ZipArchiveTest, DirectoryTreeAndSingleFileRoundTrip) {
  owned_dir(home_ + "/proj");
  owned_dir(home_ + "/proj/src");
  owned_dir(home_ + "/proj/empty");
  file(home_ + "/proj/README.md", "# readme\n");
  file(home_ + "/proj/src/main.c", "int main(void) { return 0; }\n");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  file(home_ + "/proj/src/blob.bin", big);
  file(home_ + "/notes.txt", "note");

  ZipArchive a = zip({"proj", "~/notes.txt"});
  EXPECT_EQ(a.name, "download.zip");
  EXPECT_EQ(a.files, 4u);
  Entries e = unzip(a.fd.get());
  EXPECT_EQ(e, (Entries{{"proj/", ""},
                        {"proj/README.md", "# readme\n"},
                        {"proj/empty/", ""},
                        {"proj/src/", ""},
                        {"proj/src/blob.bin", big},
                        {"proj/src/main.c", "int main(void) { return 0; }\n"},
                        {"notes.txt", "note"}}));

  ZipArchive one = zip({"/home/alice/proj/README.md"});
  EXPECT_EQ(one.name, "README.md.zip");
  EXPECT_EQ(unzip(one.fd.get()), (Entries{{"README.md", "# readme\n"}}));
  struct stat st {};
  ASSERT_EQ(::fstat(one.fd.get(), &st), 0);
  EXPECT_EQ(st.st_nlink, 0u) << "the archive never has a name";
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), one.size);
  EXPECT_TRUE(stdfs::is_empty(spool_));
}

TEST_F(ZipArchiveTest, WholeHomeIsArchivedUnderTheUserName) {
  file(home_ + "/a.txt", "A");
  ZipArchive a = zip({"~"});
  EXPECT_EQ(a.name, "alice.zip");
  EXPECT_EQ(unzip(a.fd.get()), (Entries{{"alice/", ""}, {"alice/a.txt", "A"}}));
}

TEST_F(ZipArchiveTest, LinksInsideAreFilesLinksOutAreLeftOut) {
  owned_dir(home_ + "/d");
  file(home_ + "/d/real.txt", "real");
  link("d/inside", "real.txt");
  link("d/inside_abs", "/home/alice/d/real.txt");
  link("d/out_abs", (base_ + "/outside/secret").c_str());
  link("d/out_rel", "../../outside/secret");
  link("d/out_dir", (base_ + "/outside").c_str());
  link("d/proc_root", "/proc/self/root/etc/passwd");
  link("d/loop", ".");
  link("d/dangling", "nowhere");
  ZipArchive a = zip({"d"});
  Entries e = unzip(a.fd.get());
  EXPECT_EQ(e, (Entries{{"d/", ""}, {"d/inside", "real"}, {"d/inside_abs", "real"}, {"d/real.txt", "real"}}));
  for (const auto& [name, data] : e) EXPECT_THAT(data, ::testing::Not(HasSubstr("SECRET")));
}

TEST_F(ZipArchiveTest, AskingForWhatIsOutsideIsRefused) {
  link("out", (base_ + "/outside").c_str());
  link("secret", (base_ + "/outside/secret").c_str());
  EXPECT_EQ(error_of({"secret"}), FsErrorKind::forbidden);
  EXPECT_EQ(error_of({"out"}), FsErrorKind::forbidden);
  EXPECT_THROW(dir_->path("/home/bob/x"), FsError);
  EXPECT_THROW(dir_->path("../outside/secret"), FsError);
  EXPECT_THROW(dir_->path("/proc/self/root/etc/passwd"), FsError);
}

TEST_F(ZipArchiveTest, EmptyListMissingPathAndLimits) {
  std::string msg;
  EXPECT_EQ(error_of({}, &msg), FsErrorKind::bad_request);
  EXPECT_EQ(msg, "No paths provided");
  EXPECT_EQ(error_of({"nope"}, &msg), FsErrorKind::not_found);
  EXPECT_EQ(msg, "Path not found: /home/alice/nope");

  owned_dir(home_ + "/many");
  for (int i = 0; i < 20; ++i) file(home_ + "/many/f" + std::to_string(i), std::string(1000, 'x'));
  ArchiveOptions small;
  small.max_input_bytes = 10000;
  EXPECT_EQ(error_of({"many"}, &msg, small), FsErrorKind::too_large);
  EXPECT_THAT(msg, HasSubstr("more than 10000 bytes, the most one archive takes"));
  ArchiveOptions few;
  few.limits.max_entries = 5;
  EXPECT_EQ(error_of({"many"}, &msg, few), FsErrorKind::too_large);
  EXPECT_THAT(msg, HasSubstr("Too many entries"));
  EXPECT_TRUE(stdfs::is_empty(spool_));
}

TEST_F(ZipArchiveTest, TheAccountsPermissionsApply) {
  owned_dir(home_ + "/d");
  file(home_ + "/d/mine.txt", "mine");
  // A file in the home the account cannot read (root's, 0600): the daemon could, the user not.
  std::ofstream(home_ + "/d/roots.txt") << "root only";
  ASSERT_EQ(::chmod((home_ + "/d/roots.txt").c_str(), 0600), 0);
  EXPECT_EQ(error_of({"d/roots.txt"}), FsErrorKind::forbidden);
  // In a tree, libzip opens it as the account when it gets there: the archive fails as a whole.
  std::string msg;
  EXPECT_EQ(error_of({"d"}, &msg), FsErrorKind::forbidden);
  EXPECT_TRUE(stdfs::is_empty(spool_));
}

TEST_F(ZipArchiveTest, NothingToArchiveGivesAValidEmptyZip) {
  ASSERT_EQ(::mkfifo((home_ + "/pipe").c_str(), 0644), 0);  // would block a reader forever
  ZipArchive z = zip({"pipe"});
  EXPECT_EQ(z.files, 0u);
  EXPECT_EQ(z.size, 22u);
  EXPECT_TRUE(unzip(z.fd.get()).empty());
}

TEST_F(ZipArchiveTest, DuplicateNamesKeepTheFirst) {
  owned_dir(home_ + "/a");
  owned_dir(home_ + "/b");
  file(home_ + "/a/x.txt", "from a");
  file(home_ + "/b/x.txt", "from b");
  ZipArchive z = zip({"a/x.txt", "b/x.txt"});
  EXPECT_EQ(unzip(z.fd.get()), (Entries{{"x.txt", "from a"}}));
}

// ---------------------------------------------------------------- sparse files

constexpr uint64_t kMiB = 1ull << 20;

// A file of `size` bytes holding `pieces` (offset → bytes) and holes everywhere else.
using Pieces = std::map<uint64_t, std::string>;

void make_sparse(const std::string& path, uint64_t size, const Pieces& pieces) {
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd) << path;
  for (const auto& [offset, bytes] : pieces)
    ASSERT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  ASSERT_EQ(::fchown(fd.get(), kUid, kGid), 0);
}

// Bytes [offset, offset + n) of such a file.
std::string expected_range(const Pieces& pieces, uint64_t offset, size_t n) {
  std::string out(n, '\0');
  for (const auto& [at, bytes] : pieces) {
    const uint64_t from = std::max(at, offset), to = std::min(at + bytes.size(), offset + n);
    if (from < to) out.replace(from - offset, to - from, bytes, from - at, to - from);
  }
  return out;
}

std::string noise(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(gen());
  return out;
}

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The whole stream of a SparseDeflater, and what inflating it gives back.
struct Deflated {
  std::string stream;
  std::string inflated;
  uint32_t crc = 0;
  uint64_t bytes_in = 0, bytes_read = 0, bytes_stored = 0;
};

Deflated deflate_file(const std::string& path, uint64_t length) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_TRUE(fd) << path;
  SparseDeflater d(fd.get(), length);
  Deflated out;
  char buf[8192];  // libzip's own piece size
  for (size_t n; (n = d.read(buf, sizeof buf)) > 0;) out.stream.append(buf, n);
  out.crc = d.crc();
  out.bytes_in = d.bytes_in();
  out.bytes_read = d.bytes_read();
  out.bytes_stored = d.bytes_stored();
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, -15), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(out.stream.data());
  zs.avail_in = static_cast<uInt>(out.stream.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    char piece[65536];
    zs.next_out = reinterpret_cast<Bytef*>(piece);
    zs.avail_out = sizeof piece;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.inflated.append(piece, sizeof piece - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END) << path << ": " << (zs.msg ? zs.msg : "");
  EXPECT_EQ(zs.avail_in, 0u) << "bytes after the end of the stream";
  inflateEnd(&zs);
  return out;
}

uint32_t crc_of(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

// Every layout of holes and data inflates back to the file's bytes with the file's CRC, and only
// the data is read.
TEST_F(ZipArchiveTest, SparseDeflaterGivesTheFileBackAndReadsOnlyItsData) {
  struct Layout {
    const char* name;
    uint64_t size;
    Pieces pieces;
  };
  Pieces alternating;
  for (uint64_t i = 0; i < 64; ++i) alternating[i * 8192] = noise(4096, static_cast<unsigned>(i));
  const std::vector<Layout> layouts = {
      {"empty", 0, {}},
      {"dense", 100, {{0, std::string(100, 'd')}}},
      {"all hole, odd size", 9 * kMiB + 3, {}},
      {"data, holes, data, hole to an odd end",
       20 * kMiB + 17,
       {{0, noise(5000, 1)}, {10 * kMiB + 1234, "x"}, {12 * kMiB, std::string(70000, 'r')}}},
      {"alternating 4 KiB data and 4 KiB holes", 64 * 8192, alternating},
      {"incompressible around a hole", 3 * kMiB, {{0, noise(300000, 2)}, {2 * kMiB, noise(300000, 3)}}},
      {"data at the very end", 5 * kMiB + 4096 + 5, {{5 * kMiB + 4096, "tail!"}}},
  };
  for (const Layout& l : layouts) {
    const std::string path = base_ + "/sparse";
    make_sparse(path, l.size, l.pieces);
    const std::string want = expected_range(l.pieces, 0, l.size);
    Deflated d = deflate_file(path, l.size);
    EXPECT_TRUE(d.inflated == want) << l.name << ": " << d.inflated.size() << " bytes back of " << want.size();
    EXPECT_EQ(d.crc, crc_of(want)) << l.name;
    EXPECT_EQ(d.bytes_in, l.size) << l.name;
    uint64_t data = 0;
    for (const auto& [at, bytes] : l.pieces) data += bytes.size();
    // The filesystem reads in blocks: data extents round up to them, holes are never read.
    EXPECT_LE(d.bytes_read, data + l.pieces.size() * 2 * 4096) << l.name;
    // Only part of a file: up to a length that cuts a hole and one that cuts data.
    for (uint64_t length : {l.size / 3, l.size / 2 + 1}) {
      Deflated part = deflate_file(path, length);
      EXPECT_TRUE(part.inflated == want.substr(0, length)) << l.name << " up to " << length;
      EXPECT_EQ(part.crc, crc_of(want.substr(0, length))) << l.name << " up to " << length;
    }
  }
}

// The finding: a 1 GiB file of nothing cost 5.9 s of the daemon's CPU. Its holes now cost
// nothing to read and next to nothing to deflate; what libzip reads back, CRC checked, is the file.
TEST_F(ZipArchiveTest, ASparseFileIsArchivedWithoutReadingItsHoles) {
  const uint64_t size = 1024 * kMiB;
  const Pieces pieces = {{0, "head"}, {300 * kMiB + 12345, noise(200000, 4)}, {size - 5, "tail!"}};
  make_sparse(home_ + "/big.img", size, pieces);
  const double cpu_before = thread_cpu_seconds();
  ZipArchive a = zip({"big.img"});
  const double cpu = thread_cpu_seconds() - cpu_before;
  EXPECT_LT(cpu, 0.5) << "seconds of CPU to archive a 1 GiB sparse file";
  EXPECT_LT(a.size, 2 * kMiB) << "the holes' runs of zeros are about 1 KiB per MiB";

  std::string bytes(a.size, '\0');
  ASSERT_EQ(::pread(a.fd.get(), bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  ASSERT_NE(za, nullptr) << zip_error_strerror(&err);
  zip_stat_t st;
  ASSERT_EQ(zip_stat_index(za, 0, 0, &st), 0);
  EXPECT_STREQ(st.name, "big.img");
  EXPECT_EQ(st.size, size);
  EXPECT_EQ(st.comp_method, ZIP_CM_DEFLATE);
  zip_file_t* f = zip_fopen_index(za, 0, 0);
  ASSERT_NE(f, nullptr);
  std::string piece(4 * kMiB, '\0');
  uint64_t offset = 0;
  bool same = true;
  for (zip_int64_t n; (n = zip_fread(f, piece.data(), piece.size())) > 0; offset += static_cast<uint64_t>(n))
    same =
        same && piece.compare(0, static_cast<size_t>(n), expected_range(pieces, offset, static_cast<size_t>(n))) == 0;
  // libzip checks the CRC at the end of the entry: a wrong one is a read error here.
  EXPECT_EQ(zip_error_code_zip(zip_file_get_error(f)), ZIP_ER_OK) << zip_strerror(za);
  EXPECT_EQ(offset, size);
  EXPECT_TRUE(same) << "the archived bytes differ from the file's";
  zip_fclose(f);
  zip_close(za);
  zip_error_fini(&err);
}

// Random bytes cost zlib ~20 s of a core per GiB at any level and gain nothing: after a MiB of
// them the deflater stores the next 16 MiB, then tries again; text after them is compressed.
TEST_F(ZipArchiveTest, IncompressibleDataIsStoredAndCompressibleDataStillCompressed) {
  const std::string random = noise(40 * kMiB, 5);
  std::string text;
  for (int i = 0; text.size() < 20 * kMiB; ++i) text += "line " + std::to_string(i) + " of some text\n";
  const Pieces pieces = {{0, random}, {random.size(), text}};
  const uint64_t size = random.size() + text.size();
  make_sparse(base_ + "/mixed", size, pieces);
  Deflated d = deflate_file(base_ + "/mixed", size);
  EXPECT_TRUE(d.inflated == random + text);
  EXPECT_EQ(d.crc, crc_of(random + text));
  EXPECT_GE(d.bytes_stored, 32 * kMiB) << "most of the random bytes were stored";
  EXPECT_LE(d.bytes_stored, 40 * kMiB) << "the text was not";
  EXPECT_LT(d.stream.size(), random.size() + text.size() / 3) << "the text was compressed";
}

// Holes count by their size against the archive limit: a sparse file is as big as it extracts.
TEST_F(ZipArchiveTest, HolesCountAgainstTheInputLimit) {
  make_sparse(home_ + "/hollow", 64 * kMiB, {});
  ArchiveOptions small;
  small.max_input_bytes = 32 * kMiB;
  std::string msg;
  EXPECT_EQ(error_of({"hollow"}, &msg, small), FsErrorKind::too_large);
  EXPECT_THAT(msg, HasSubstr(std::to_string(32 * kMiB) + " bytes"));
}

}  // namespace
}  // namespace agentbox
