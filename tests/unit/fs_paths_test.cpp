// The pure parts of fs/: how user paths map into the home, glob patterns, UTF-8 and content
// sniffing, and the Python-style quoting in replace errors. No files touched.
#include <gtest/gtest.h>

#include "fs/content_type.hpp"
#include "fs/file_write.hpp"
#include "fs/fs_error.hpp"
#include "fs/glob_pattern.hpp"
#include "fs/home_path.hpp"
#include "util/utf8.hpp"

namespace agentbox {
namespace {

constexpr const char* kHome = "/home/alice";

HomePath parse(std::string_view p, std::string_view cwd = {}) { return parse_home_path(p, kHome, cwd); }

FsErrorKind error_kind(std::string_view p, std::string_view cwd = {}) {
  try {
    parse(p, cwd);
  } catch (const FsError& e) {
    return e.kind();
  }
  ADD_FAILURE() << p << " was accepted";
  return FsErrorKind::bad_request;
}

TEST(FsHomePath, AcceptsTheThreeFormsAndShowsTheBoxPath) {
  EXPECT_EQ(parse("notes.txt").rel, "notes.txt");
  EXPECT_EQ(parse("notes.txt").shown, "/home/alice/notes.txt");
  EXPECT_EQ(parse("~/a/b").rel, "a/b");
  EXPECT_EQ(parse("~").rel, "");
  EXPECT_EQ(parse("~").shown, "/home/alice");
  EXPECT_EQ(parse("/home/alice/a/b").rel, "a/b");
  EXPECT_EQ(parse("/home/alice").rel, "");
  EXPECT_EQ(parse("//home/./alice//a/./b/").rel, "a/b");
  EXPECT_EQ(parse("").rel, "");
  EXPECT_EQ(parse(".").rel, "");
}

TEST(FsHomePath, RelativePathsStartAtTheSessionCwd) {
  EXPECT_EQ(parse("x.py", "/home/alice/chats/c1").rel, "chats/c1/x.py");
  EXPECT_EQ(parse("x.py", "chats/c1").rel, "chats/c1/x.py");
  EXPECT_EQ(parse("../x.py", "~/chats/c1").rel, "chats/x.py");
  // Home-anchored forms ignore the cwd.
  EXPECT_EQ(parse("~/x.py", "chats/c1").rel, "x.py");
  EXPECT_EQ(parse("/home/alice/x.py", "chats/c1").rel, "x.py");
}

TEST(FsHomePath, DotDotIsLexicalAndCannotClimbOut) {
  EXPECT_EQ(parse("a/../b").rel, "b");
  EXPECT_EQ(parse("/home/bob/../alice/x").rel, "x");
  EXPECT_EQ(error_kind(".."), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("../bob/x"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("a/../../x"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("~/../bob"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("/home/alice/../bob/x"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("../../../x", "chats/c1"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("x", "/etc"), FsErrorKind::forbidden);
}

TEST(FsHomePath, AbsolutePathsElsewhereAreRefused) {
  EXPECT_EQ(error_kind("/etc/passwd"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("/proc/self/root/etc/passwd"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("/home/alicex/notes"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("/home"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind("/"), FsErrorKind::forbidden);
  EXPECT_EQ(error_kind(std::string_view("a\0b", 3)), FsErrorKind::bad_request);
}

TEST(FsHomePath, NameParentChild) {
  HomePath p = parse("a/b/c.txt");
  EXPECT_EQ(p.name(), "c.txt");
  EXPECT_EQ(p.parent(kHome).rel, "a/b");
  EXPECT_EQ(p.parent(kHome).shown, "/home/alice/a/b");
  EXPECT_EQ(parse("top").parent(kHome).shown, "/home/alice");
  EXPECT_EQ(parse("~").child("x").shown, "/home/alice/x");
  EXPECT_EQ(parse("a").child("b/c").rel, "a/b/c");
}

TEST(FsGlobPattern, NameOnlyPatternsMatchAtAnyDepth) {
  GlobPattern py("*.py");
  EXPECT_TRUE(py.matches("a.py"));
  EXPECT_TRUE(py.matches("src/deep/b.py"));
  EXPECT_FALSE(py.matches("src/b.pyc"));
  EXPECT_TRUE(GlobPattern("*").matches(".hidden"));
  EXPECT_TRUE(GlobPattern("file?.[ch]").matches("x/file1.c"));
  EXPECT_FALSE(GlobPattern("file?.[ch]").matches("x/file10.c"));
}

TEST(FsGlobPattern, SlashPatternsMatchFromTheStartWithDoubleStar) {
  GlobPattern p("src/**/*.py");
  EXPECT_TRUE(p.matches("src/a.py"));
  EXPECT_TRUE(p.matches("src/x/y/a.py"));
  EXPECT_FALSE(p.matches("lib/src/a.py"));
  EXPECT_FALSE(p.matches("src/x/a.txt"));
  GlobPattern any("**/*.md");
  EXPECT_TRUE(any.matches("README.md"));
  EXPECT_TRUE(any.matches("docs/a/b/c.md"));
  EXPECT_TRUE(GlobPattern("a/**").matches("a/b/c"));
  EXPECT_TRUE(GlobPattern("a/**").matches("a"));
  EXPECT_FALSE(GlobPattern("a/*").matches("a/b/c"));
  // Many "**" stay cheap (no backtracking blow-up).
  GlobPattern many("**/**/**/**/**/**/**/**/**/**/**/**/z");
  std::string deep;
  for (int i = 0; i < 60; ++i) deep += "d/";
  EXPECT_FALSE(many.matches(deep + "y"));
  EXPECT_TRUE(many.matches(deep + "z"));
}

TEST(FsUtf8, ValidatesCutsAndRepairs) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));              // cut short
  EXPECT_TRUE(is_valid_utf8("ab\xE2\x82", true));   // allowed when the sample is a head
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xFF"));
  EXPECT_EQ(to_valid_utf8("a\xFF"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
  std::string euro = "\xE2\x82\xAC\xE2\x82\xAC";
  EXPECT_EQ(utf8_cut(euro, 4), 3u);
  EXPECT_EQ(utf8_cut(euro, 6), 6u);
  EXPECT_EQ(utf8_prefix_of_chars(euro, 1), 3u);
}

TEST(FsContentType, ExtensionsMagicAndBinary) {
  EXPECT_EQ(content_type_for("a/b/page.HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_for("x.png"), "image/png");
  EXPECT_EQ(content_type_for("x.svg"), "image/svg+xml");
  EXPECT_EQ(content_type_for("Makefile"), "application/octet-stream");
  EXPECT_EQ(content_type_for(".bashrc"), "application/octet-stream");
  EXPECT_EQ(sniff_image(std::string("\x89PNG\r\n\x1a\n....", 12)), "image/png");
  EXPECT_EQ(sniff_image("\xFF\xD8\xFF\xE0"), "image/jpeg");
  EXPECT_EQ(sniff_image("GIF89a.."), "image/gif");
  EXPECT_EQ(sniff_image(std::string("RIFF\x10\x00\x00\x00WEBPVP8 ", 16)), "image/webp");
  EXPECT_EQ(sniff_image("hello"), std::nullopt);
  EXPECT_TRUE(looks_binary(std::string("a\0b", 3), true));
  EXPECT_TRUE(looks_binary("caf\xE9", true));    // Latin-1
  EXPECT_FALSE(looks_binary("caf\xC3", false));  // a head cut inside a character
  EXPECT_FALSE(looks_binary("# title\n", true));
}

TEST(FsPythonRepr, QuotesAsPythonDoes) {
  EXPECT_EQ(python_repr("foo"), "'foo'");
  EXPECT_EQ(python_repr("it's"), "\"it's\"");
  EXPECT_EQ(python_repr("both ' and \""), "'both \\' and \"'");
  EXPECT_EQ(python_repr("a\nb\t\\"), "'a\\nb\\t\\\\'");
  EXPECT_EQ(python_repr("\x01"), "'\\x01'");
  EXPECT_EQ(python_repr("h\xC3\xA9"), "'h\xC3\xA9'");
}

}  // namespace
}  // namespace agentbox
