// OutputLog: absolute offsets, rotation under a cap, tail lines, reopening after a restart and
// UTF-8 boundaries. No privileges needed: files in a temp directory.
#include "exec/output_log.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>

#include <filesystem>
#include <fstream>

#include "util/error.hpp"

namespace agentbox::exec {
namespace {

namespace fs = std::filesystem;

std::string joined(const LogRead& r) {
  std::string s;
  for (const auto& c : r.chunks) s += c.data;
  return s;
}

// "line 0000\nline 0001\n..." so any byte's offset is known.
std::string numbered_lines(int n) {
  std::string s;
  char buf[32];
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "line %04d\n", i);
    s += buf;
  }
  return s;
}

// While alive, files this process writes cannot grow past `bytes` (RLIMIT_FSIZE: a write past it
// fails with EFBIG, as one on a full volume fails with ENOSPC); lift() gives the room back.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);  // the error, not the signal's default (a core)
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    lift();
    ::signal(SIGXFSZ, old_handler_);
  }
  void lift() { ::setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
  sighandler_t old_handler_ = SIG_DFL;
};

class OutputLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-outlog-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name = "p.log") const { return (dir_ / name).string(); }
  size_t segment_files() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().filename().string().starts_with("p.log.");
    return n;
  }
  uint64_t bytes_on_disk() const {
    uint64_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.file_size();
    return n;
  }

  fs::path dir_;
};

TEST_F(OutputLogTest, ReadsFromAnyOffsetAndContinuesAtNextOffset) {
  auto log = OutputLog::create(path(), 1 << 20);
  log->append(StreamType::output, "hello ");
  log->append(StreamType::output, "world\r\n");
  EXPECT_EQ(log->end_offset(), 13u);

  LogRead all = log->read(0, 1 << 20);
  ASSERT_EQ(all.chunks.size(), 1u) << "adjacent output of one stream is one chunk";
  EXPECT_EQ(all.chunks[0].type, StreamType::output);
  EXPECT_EQ(all.chunks[0].data, "hello world\r\n");
  EXPECT_EQ(all.next_offset, 13u);
  EXPECT_FALSE(all.truncated);

  EXPECT_EQ(joined(log->read(6, 1 << 20)), "world\r\n");
  LogRead none = log->read(13, 1 << 20);
  EXPECT_TRUE(none.chunks.empty());
  EXPECT_EQ(none.next_offset, 13u);

  // max_bytes pages through the output without loss.
  std::string paged;
  uint64_t off = 0;
  for (int i = 0; i < 10 && off < 13; ++i) {
    LogRead r = log->read(off, 5);
    paged += joined(r);
    ASSERT_GT(r.next_offset, off);
    off = r.next_offset;
  }
  EXPECT_EQ(paged, "hello world\r\n");
}

// Pages of a terminal's output ("\r\n" line ends) end after a line when one is near and never
// between '\r' and '\n', and say when more follows: a client that turns each page's "\r\n"
// into "\n" and joins the pages counts every line once.
TEST_F(OutputLogTest, PagesEndAtLineEndsAndNeverInsideACrLf) {
  auto log = OutputLog::create(path(), 16 << 20);
  std::string all;
  for (int i = 1; i <= 200000; ++i) all += std::to_string(i) + "\r\n";
  log->append(StreamType::output, all);
  log->finish();
  std::string joined_lines;
  uint64_t off = 0;
  size_t pages = 0;
  for (; off < all.size() && pages < 100; ++pages) {
    LogRead r = log->read(off, 100000);
    const std::string page = joined(r);
    ASSERT_FALSE(page.empty());
    EXPECT_EQ(page.back(), '\n') << "a page ended inside a line: ..." << page.substr(page.size() - 10);
    EXPECT_EQ(r.more, r.next_offset < all.size());
    std::string lf = page;
    for (size_t p; (p = lf.find("\r\n")) != std::string::npos;) lf.replace(p, 2, "\n");
    joined_lines += lf;
    off = r.next_offset;
  }
  EXPECT_EQ(off, all.size());
  EXPECT_GT(pages, 10u);
  EXPECT_EQ(std::count(joined_lines.begin(), joined_lines.end(), '\n'), 200000);
  // Without a line end near the cut, a page still never ends between '\r' and '\n'.
  auto no_lines = OutputLog::create(path("q.log"), 1 << 20);
  no_lines->append(StreamType::output, std::string(9, 'x') + "\r\n" + std::string(20, 'y'));
  EXPECT_EQ(joined(no_lines->read(0, 10)), std::string(9, 'x'));  // not "xxxxxxxxx\r"
  EXPECT_EQ(joined(no_lines->read(9, 10)).substr(0, 2), "\r\n");
}

// While a command still writes, a '\r' at the very end waits for what follows it (its '\n', or
// anything else); when the log is finished it is read like any byte.
TEST_F(OutputLogTest, ATrailingCarriageReturnWaitsForItsNextByte) {
  auto log = OutputLog::create(path(), 1 << 20);
  log->append(StreamType::output, "line\r");
  EXPECT_EQ(log->end_offset(), 4u);
  EXPECT_EQ(joined(log->read(0, 1 << 20)), "line");
  EXPECT_EQ(log->read(0, 1 << 20).next_offset, 4u);
  LogRead none = log->read(4, 1 << 20);
  EXPECT_TRUE(none.chunks.empty());
  EXPECT_FALSE(none.more);
  log->append(StreamType::output, "\n50%\r");
  EXPECT_EQ(joined(log->read(4, 1 << 20)), "\r\n50%");
  log->finish();
  EXPECT_EQ(log->end_offset(), 10u);
  EXPECT_EQ(joined(log->read(6, 1 << 20)), "50%\r");
}

TEST_F(OutputLogTest, KeepsStreamsApartAndInOrder) {
  auto log = OutputLog::create(path(), 1 << 20);
  log->append(StreamType::stdout_pipe, "a");
  log->append(StreamType::stdout_pipe, "b");
  log->append(StreamType::stderr_pipe, "E");
  log->append(StreamType::stdout_pipe, "c");
  LogRead r = log->read(0, 100);
  ASSERT_EQ(r.chunks.size(), 3u);
  EXPECT_EQ(r.chunks[0].type, StreamType::stdout_pipe);
  EXPECT_EQ(r.chunks[0].data, "ab");
  EXPECT_EQ(r.chunks[1].type, StreamType::stderr_pipe);
  EXPECT_EQ(r.chunks[1].data, "E");
  EXPECT_EQ(r.chunks[2].type, StreamType::stdout_pipe);
  EXPECT_EQ(r.chunks[2].data, "c");
  // A read starting inside the stderr chunk keeps the types.
  LogRead mid = log->read(2, 100);
  ASSERT_EQ(mid.chunks.size(), 2u);
  EXPECT_EQ(mid.chunks[0].type, StreamType::stderr_pipe);
}

TEST_F(OutputLogTest, CapDropsOldestButOffsetsStayAbsolute) {
  constexpr uint64_t kCap = 1000;
  // A memory tail of 100 bytes makes most reads below go to the segment files.
  auto log = OutputLog::create(path(), kCap, 100);
  const std::string text = numbered_lines(1000);  // 10,000 bytes
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min<size_t>(1 + at % 37, text.size() - at);  // uneven appends
    log->append(StreamType::output, std::string_view(text).substr(at, n));
    at += n;
  }
  ASSERT_EQ(log->end_offset(), text.size());
  EXPECT_EQ(log->begin_offset(), text.size() - kCap) << "exactly the newest cap bytes are kept";
  EXPECT_LE(segment_files(), 3u);
  EXPECT_LE(bytes_on_disk(), kCap * 3 / 2 + 3 * 24 + 5 * 200) << "old segments are deleted";

  // From 0: the oldest kept byte on, flagged truncated.
  LogRead from_zero = log->read(0, 1 << 20);
  EXPECT_TRUE(from_zero.truncated);
  EXPECT_EQ(joined(from_zero), text.substr(text.size() - kCap));
  EXPECT_EQ(from_zero.next_offset, text.size());

  // An absolute offset inside what is kept reads exactly that, from disk, not truncated.
  const uint64_t off = text.size() - 750;
  LogRead r = log->read(off, 300);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(joined(r), text.substr(off, 300));
  EXPECT_EQ(r.next_offset, off + 300);

  log->append(StreamType::output, std::string(5000, 'z'));  // one append far over the cap
  EXPECT_LE(bytes_on_disk(), kCap * 3 / 2 + 3 * 24 + 5 * 200);
  EXPECT_EQ(joined(log->read(0, 1 << 20)), std::string(kCap, 'z'));
}

TEST_F(OutputLogTest, TailLinesGivesTheLastLines) {
  auto log = OutputLog::create(path(), 1 << 20);
  log->append(StreamType::output, "a\nb\nc\n");

  LogRead two = log->read(0, 1 << 20, 2);
  EXPECT_EQ(joined(two), "b\nc\n");
  EXPECT_TRUE(two.truncated) << "line a was cut";
  EXPECT_EQ(two.next_offset, 6u);

  LogRead many = log->read(0, 1 << 20, 10);
  EXPECT_EQ(joined(many), "a\nb\nc\n");
  EXPECT_FALSE(many.truncated);

  EXPECT_EQ(joined(log->read(0, 1 << 20, 0)), "");
  // Only what lies past offset counts.
  EXPECT_EQ(joined(log->read(4, 1 << 20, 5)), "c\n");

  log->append(StreamType::output, "partial");  // a last line without newline is a line
  EXPECT_EQ(joined(log->read(0, 1 << 20, 1)), "partial");
  EXPECT_EQ(joined(log->read(0, 1 << 20, 2)), "c\npartial");
}

TEST_F(OutputLogTest, TailLinesReachesBackIntoTheFiles) {
  auto log = OutputLog::create(path(), 1 << 20, 64);
  const std::string text = numbered_lines(20000);  // 200,000 bytes: several index blocks
  log->append(StreamType::output, text);
  LogRead r = log->read(0, 1 << 20, 3);
  EXPECT_EQ(joined(r), "line 19997\nline 19998\nline 19999\n");
  // 7,000 lines back crosses many 64 KiB windows.
  LogRead far = log->read(0, 1 << 20, 7000);
  EXPECT_EQ(joined(far), text.substr(text.find("line 13000\n")));
  EXPECT_TRUE(far.truncated);
  // tail with a byte budget keeps the newest bytes.
  LogRead budget = log->read(0, 25, 7000);
  EXPECT_EQ(joined(budget), text.substr(text.size() - 25));
  EXPECT_TRUE(budget.truncated);
}

TEST_F(OutputLogTest, LargeAppendIsReadBackWhole) {
  auto log = OutputLog::create(path(), 16 << 20);
  std::string big;
  for (int i = 0; i < 300000; ++i) big += static_cast<char>('a' + i % 26);
  log->append(StreamType::stdout_pipe, big);
  LogRead r = log->read(0, 1 << 20);
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0].data, big);
  EXPECT_EQ(joined(log->read(12345, 1000)), big.substr(12345, 1000));
}

TEST_F(OutputLogTest, ReopensFromDiskWithTheSameOffsets) {
  const std::string text = numbered_lines(500);  // 5,000 bytes over a 1,000 byte cap
  {
    auto log = OutputLog::create(path(), 1000);
    log->append(StreamType::stdout_pipe, text.substr(0, 4600));
    log->append(StreamType::stderr_pipe, "oops\n");
    log->append(StreamType::stdout_pipe, text.substr(4600));
    log->finish();
  }
  auto log = OutputLog::open(path());
  const uint64_t end = text.size() + 5;
  EXPECT_EQ(log->end_offset(), end);
  EXPECT_EQ(log->begin_offset(), end - 1000);
  LogRead r = log->read(4500, 1 << 20);
  EXPECT_FALSE(r.truncated);
  ASSERT_EQ(r.chunks.size(), 3u);
  EXPECT_EQ(r.chunks[0].data, text.substr(4500, 100));
  EXPECT_EQ(r.chunks[1].type, StreamType::stderr_pipe);
  EXPECT_EQ(r.chunks[1].data, "oops\n");
  EXPECT_EQ(r.chunks[2].data, text.substr(4600));
  EXPECT_EQ(r.next_offset, end);
  EXPECT_TRUE(log->read(0, 100).truncated);
  // Read-only: appends after reopening change nothing.
  log->append(StreamType::output, "x");
  EXPECT_EQ(log->end_offset(), end);
}

TEST_F(OutputLogTest, ReopenIgnoresAFrameCutShortByACrash) {
  {
    auto log = OutputLog::create(path(), 1 << 20);
    log->append(StreamType::output, "complete\n");
    // No finish(): the daemon died.
  }
  {
    std::ofstream f(path() + ".0", std::ios::app | std::ios::binary);
    f.write("\x00\x40\x00\x00\x00half", 9);  // a header announcing 64 bytes, then 4
  }
  auto log = OutputLog::open(path());
  EXPECT_EQ(log->end_offset(), 9u);
  EXPECT_EQ(joined(log->read(0, 100)), "complete\n");
}

TEST_F(OutputLogTest, CreateRefusesAnExistingLogAndRemoveDeletesIt) {
  auto log = OutputLog::create(path(), 1000);
  log->append(StreamType::output, numbered_lines(300));  // rotates: several files
  try {
    OutputLog::create(path(), 1000);
    FAIL() << "a second log under the same path was created";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), EEXIST);
  }
  ASSERT_GT(segment_files(), 1u);
  OutputLog::remove(path());
  EXPECT_EQ(segment_files(), 0u);
  EXPECT_THROW(OutputLog::open(path()), Error);
}

// A command that prints while its volume is full: its output goes on in memory, and once the disk
// takes writes again it is written (by the next append or by write_missed after the end), so a
// restart finds all of it. Control: while the disk refuses, the files hold none of it.
TEST_F(OutputLogTest, OutputTheDiskRefusedIsWrittenOnceItHasRoom) {
  const std::string text = numbered_lines(50), more = numbered_lines(3);
  FileSizeLimit full(100);
  auto log = OutputLog::create(path(), 1 << 20);
  log->append(StreamType::output, text);
  EXPECT_EQ(joined(log->read(0, 1 << 20)), text);  // served from memory meanwhile
  EXPECT_TRUE(log->finish());                      // still missing on disk
  EXPECT_TRUE(log->write_missed());                // the disk still refuses
  EXPECT_EQ(OutputLog::open(path())->end_offset(), 0u) << "the refused output reached the file";

  full.lift();
  EXPECT_FALSE(log->write_missed());  // all written now
  EXPECT_EQ(joined(OutputLog::open(path())->read(0, 1 << 20)), text);

  // The same while the command still runs: its next output after the disk has room writes both.
  auto running_path = path("q.log");
  FileSizeLimit again(100);
  auto running = OutputLog::create(running_path, 1 << 20);
  running->append(StreamType::stdout_pipe, text);
  again.lift();
  running->append(StreamType::stderr_pipe, more);
  EXPECT_FALSE(running->finish());
  LogRead r = OutputLog::open(running_path)->read(0, 1 << 20);
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[0].data, text);
  EXPECT_EQ(r.chunks[1].type, StreamType::stderr_pipe);
  EXPECT_EQ(r.chunks[1].data, more);
}

// Output written again after the disk refused it may fill the newest segment and start the next:
// that one starts where the disk's bytes ended, so a reopened log reads every byte at its offset.
TEST_F(OutputLogTest, RefusedOutputWrittenLaterAcrossASegmentEndKeepsItsOffsets) {
  const std::string text = numbered_lines(18);  // 180 bytes: a 200 byte cap, segments of 100
  auto log = OutputLog::create(path(), 200);
  log->append(StreamType::output, text.substr(0, 50));
  {
    FileSizeLimit full(fs::file_size(path() + ".0"));
    log->append(StreamType::output, text.substr(50, 120));  // refused: in memory only
    full.lift();
    log->append(StreamType::output, text.substr(170));  // takes the disk back: 50..180 written
  }
  EXPECT_FALSE(log->finish());
  EXPECT_EQ(segment_files(), 2u);
  auto reopened = OutputLog::open(path());
  EXPECT_EQ(reopened->begin_offset(), 0u);
  EXPECT_EQ(reopened->end_offset(), text.size());
  EXPECT_EQ(joined(reopened->read(0, 1 << 20)), text);
  EXPECT_EQ(joined(reopened->read(120, 30)), text.substr(120, 30));
}

// What the disk refused and the memory tail has dropped too is gone: nothing is written with a
// hole in it, and the log says so (its reads start truncated). A log whose record is purged is
// abandoned: its files are not made again.
TEST_F(OutputLogTest, RefusedOutputBeyondTheMemoryTailIsNotWrittenWithAHole) {
  const std::string text = numbered_lines(50);
  FileSizeLimit full(100);
  auto log = OutputLog::create(path(), 1 << 20, /*memory_tail=*/64);
  log->append(StreamType::output, text);
  full.lift();
  EXPECT_FALSE(log->finish());  // nothing a later call could write
  EXPECT_TRUE(log->read(0, 1 << 20).truncated);
  EXPECT_EQ(OutputLog::open(path())->end_offset(), 0u);

  auto purged = OutputLog::create(path("r.log"), 1 << 20);
  FileSizeLimit again(100);
  purged->append(StreamType::output, text);
  purged->abandon();
  OutputLog::remove(path("r.log"));
  again.lift();
  EXPECT_FALSE(purged->write_missed());
  EXPECT_FALSE(fs::exists(path("r.log") + ".0"));
}

// Most commands of an agent print little and many print nothing: those cost no file.
TEST_F(OutputLogTest, AFileIsMadeWithTheFirstOutputOnly) {
  {
    auto quiet = OutputLog::create(path(), 1000);
    quiet->finish();
    EXPECT_EQ(segment_files(), 0u);
    EXPECT_EQ(quiet->read(0, 100).next_offset, 0u);
    try {
      OutputLog::open(path());
      FAIL() << "a log that never had output opened";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ENOENT);
    }
  }
  auto log = OutputLog::create(path(), 1000);
  EXPECT_EQ(segment_files(), 0u);
  log->append(StreamType::output, "first\n");
  EXPECT_EQ(segment_files(), 1u);
  log->finish();
  EXPECT_EQ(joined(OutputLog::open(path())->read(0, 100)), "first\n");
}

TEST_F(OutputLogTest, DoesNotSplitUtf8Characters) {
  auto log = OutputLog::create(path(), 1 << 20);
  // "é" = C3 A9 arrives in two reads: the first byte waits for the second.
  log->append(StreamType::output, "h\xC3");
  EXPECT_EQ(log->end_offset(), 1u);
  EXPECT_EQ(joined(log->read(0, 100)), "h");
  log->append(StreamType::output, "\xA9llo ");
  EXPECT_EQ(joined(log->read(0, 100)), "h\xC3\xA9llo ");

  // A byte budget ending inside "€" (E2 82 AC) stops before it.
  log->append(StreamType::output, "\xE2\x82\xAC\xE2\x82\xAC");
  const uint64_t euro = 7;
  LogRead r = log->read(euro, 4);
  EXPECT_EQ(joined(r), "\xE2\x82\xAC");
  EXPECT_EQ(r.next_offset, euro + 3);
  EXPECT_EQ(joined(log->read(r.next_offset, 4)), "\xE2\x82\xAC");

  // finish() writes bytes that never got their continuation.
  log->append(StreamType::output, "\xF0\x9F");
  EXPECT_EQ(log->end_offset(), 13u);
  log->finish();
  EXPECT_EQ(log->end_offset(), 15u);
  EXPECT_EQ(joined(log->read(13, 10)), "\xF0\x9F");
}

TEST_F(OutputLogTest, TruncatedStartSkipsTheRestOfACutCharacter) {
  constexpr uint64_t kCap = 100;
  auto log = OutputLog::create(path(), kCap, 16);
  std::string text;
  for (int i = 0; i < 200; ++i) text += "\xE2\x82\xAC";  // 600 bytes of "€"
  log->append(StreamType::output, text);
  // begin = 500: not a multiple of 3, so the oldest byte kept is inside a character.
  ASSERT_EQ(log->begin_offset(), 500u);
  LogRead r = log->read(0, 1 << 20);
  EXPECT_TRUE(r.truncated);
  const std::string got = joined(r);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(static_cast<unsigned char>(got[0]), 0xE2) << "starts on a character";
  EXPECT_EQ(got.size() % 3, 0u);
}

}  // namespace
}  // namespace agentbox::exec
