// multipart/form-data parsing for /files/upload: the boundary from the Content-Type, part
// headers as browsers and curl write them, contents delivered in pieces whatever the split of
// the input, and malformed bodies refused with a 400 that says why.
#include "http/multipart.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "http/error.hpp"

namespace agentbox::http {
namespace {

using ::testing::HasSubstr;

struct Part {
  PartHeaders headers;
  std::string data;
  bool ended = false;
};

// Feeds `body` in pieces of `piece` bytes (0: all at once) and records every part.
std::vector<Part> parse(const std::string& boundary, std::string_view body, size_t piece = 0, bool finish = true) {
  std::vector<Part> parts;
  MultipartParser p(boundary, {.on_part =
                                   [&](const PartHeaders& h) {
                                     parts.push_back({h, {}, false});
                                     return true;
                                   },
                               .on_data = [&](std::string_view d) { parts.back().data += d; },
                               .on_part_end = [&] { parts.back().ended = true; }});
  if (piece == 0) piece = body.size() + 1;
  for (size_t i = 0; i < body.size(); i += piece) p.feed(body.substr(i, piece));
  if (finish) p.finish();
  return parts;
}

int status_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const HttpError& e) {
    return static_cast<int>(e.status());
  }
  return 0;
}

const std::string kCurlBody =
    "--------------------------d74496d66958873e\r\n"
    "Content-Disposition: form-data; name=\"note\"\r\n"
    "\r\n"
    "hello\r\n"
    "--------------------------d74496d66958873e\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"report.csv\"\r\n"
    "Content-Type: text/csv\r\n"
    "\r\n"
    "a,b\r\n1,2\r\n"
    "--------------------------d74496d66958873e--\r\n";

TEST(MultipartBoundary, FromContentTypeQuotedOrNot) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data;boundary=\"a b:c\""), "a b:c");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=utf-8; boundary=----WebKitFormBoundaryX"),
            "----WebKitFormBoundaryX");
}

TEST(MultipartBoundary, WrongTypeIs422MissingOrOverlongBoundaryIs400) {
  EXPECT_EQ(status_of([] { multipart_boundary("application/json"); }), 422);
  EXPECT_EQ(status_of([] { multipart_boundary(""); }), 422);
  EXPECT_EQ(status_of([] { multipart_boundary("multipart/form-data"); }), 400);
  EXPECT_EQ(status_of([] { multipart_boundary("multipart/form-data; boundary="); }), 400);
  EXPECT_EQ(status_of([] { multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'x')); }), 400);
}

TEST(MultipartParser, CurlBodyGivesBothPartsWithTheirContents) {
  auto parts = parse("------------------------d74496d66958873e", kCurlBody);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].headers.name, "note");
  EXPECT_FALSE(parts[0].headers.filename);
  EXPECT_EQ(parts[0].data, "hello");
  EXPECT_EQ(parts[1].headers.name, "file");
  EXPECT_EQ(parts[1].headers.filename.value_or(""), "report.csv");
  EXPECT_EQ(parts[1].headers.content_type, "text/csv");
  EXPECT_EQ(parts[1].data, "a,b\r\n1,2");  // the CRLF before the boundary belongs to it
  EXPECT_TRUE(parts[1].ended);
}

TEST(MultipartParser, EverySplitOfTheInputGivesTheSameParts) {
  const std::string boundary = "------------------------d74496d66958873e";
  for (size_t piece = 1; piece <= 70; ++piece) {
    auto parts = parse(boundary, kCurlBody, piece);
    ASSERT_EQ(parts.size(), 2u) << piece;
    EXPECT_EQ(parts[0].data, "hello") << piece;
    EXPECT_EQ(parts[1].data, "a,b\r\n1,2") << piece;
  }
}

TEST(MultipartParser, BinaryContentWithNearBoundariesSurvivesIntact) {
  // Contents full of CR, LF, '-' and prefixes of the delimiter, in random pieces.
  const std::string boundary = "XyZ";
  std::mt19937 rng(7);
  std::string content;
  for (int i = 0; i < 200000; ++i) {
    const char alphabet[] = {'\r', '\n', '-', 'X', 'y', 'Z', '\0', '\xff'};
    content += alphabet[rng() % sizeof alphabet];
  }
  // Make sure no real delimiter is inside.
  for (size_t at; (at = content.find("\r\n--XyZ")) != std::string::npos;) content[at + 4] = 'Q';
  std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.bin\"\r\n\r\n" + content + "\r\n--XyZ--";
  for (size_t piece : {1u, 3u, 7u, 4096u, 65536u}) {
    auto parts = parse(boundary, body, piece);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_TRUE(parts[0].data == content) << "piece " << piece;
  }
}

TEST(MultipartParser, PreambleEpilogueAndTransportPaddingAreIgnored) {
  std::string body =
      "This is a preamble.\r\n--b  \t\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"
      "data\r\n--b-- trailing epilogue --b\r\n";
  auto parts = parse("b", body);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].data, "data");
}

TEST(MultipartParser, EmptyFileAndPartsNotWantedAreSkipped) {
  std::string body =
      "--b\r\nContent-Disposition: form-data; name=\"skip\"\r\n\r\nlots of data\r\n"
      "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"empty.txt\"\r\n\r\n"
      "\r\n--b--\r\n";
  std::vector<std::string> seen;
  std::string data;
  int ends = 0;
  MultipartParser p("b", {.on_part =
                              [&](const PartHeaders& h) {
                                seen.push_back(h.name);
                                return h.name == "file";
                              },
                          .on_data = [&](std::string_view d) { data += d; },
                          .on_part_end = [&] { ++ends; }});
  p.feed(body);
  p.finish();
  EXPECT_EQ(seen, (std::vector<std::string>{"skip", "file"}));
  EXPECT_EQ(data, "");
  EXPECT_EQ(ends, 1);
}

TEST(MultipartParser, FileNamesAsBrowsersAndRfc5987WriteThem) {
  auto h = parse_part_headers("content-disposition: form-data; name=\"file\"; filename=\"C:\\dir\\a \\\"q\\\".txt\"");
  EXPECT_EQ(h.filename.value_or(""), "C:\\dir\\a \"q\".txt");
  h = parse_part_headers(
      "Content-Disposition: form-data; name=file; filename=\"fallback.txt\"; "
      "filename*=UTF-8''na%C3%AFve%20r%C3%A9sum%C3%A9.txt");
  EXPECT_EQ(h.name, "file");
  EXPECT_EQ(h.filename.value_or(""), "na\xC3\xAFve r\xC3\xA9sum\xC3\xA9.txt");
  h = parse_part_headers("Content-Disposition: form-data; name=\"a;b\"; filename=\"x;y=z\"");
  EXPECT_EQ(h.name, "a;b");
  EXPECT_EQ(h.filename.value_or(""), "x;y=z");
}

TEST(MultipartParser, MalformedBodiesAre400WithAReason) {
  auto reason = [](const std::string& boundary, const std::string& body) -> std::string {
    try {
      parse(boundary, body);
    } catch (const HttpError& e) {
      EXPECT_EQ(static_cast<int>(e.status()), 400);
      return std::string(e.detail());
    }
    return "accepted";
  };
  EXPECT_THAT(reason("b", "no boundary anywhere"), HasSubstr("closing boundary"));
  EXPECT_THAT(reason("b", "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nunterminated"),
              HasSubstr("closing boundary"));
  EXPECT_THAT(reason("b", "--bX\r\n"), HasSubstr("line break"));
  EXPECT_THAT(reason("b", "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--"), HasSubstr("Content-Disposition"));
  EXPECT_THAT(reason("b", "--b\r\nContent-Disposition: attachment; name=\"f\"\r\n\r\nx\r\n--b--"),
              HasSubstr("form-data"));
  EXPECT_THAT(reason("b", "--b\r\nContent-Disposition: form-data; filename=\"a\"\r\n\r\nx\r\n--b--"),
              HasSubstr("field name"));
  EXPECT_THAT(reason("b", "--b\r\nContent-Disposition: form-data; name=\"f\r\n\r\nx\r\n--b--"), HasSubstr("quoted"));
  EXPECT_THAT(reason("b", "--b\r\nno colon here\r\n\r\nx\r\n--b--"), HasSubstr("header"));
  EXPECT_THAT(reason("b", "--b\r\nX-Long: " + std::string(20000, 'a') + "\r\n\r\nx\r\n--b--"), HasSubstr("too long"));
}

TEST(MultipartParser, LargeContentPassesThroughASmallBuffer) {
  // 64 MiB of contents in 256 KiB feeds: the parser keeps only a delimiter's worth between feeds,
  // so what it hands out arrives while feeding, not at the end.
  const std::string boundary = "----boundary";
  MultipartParser::Callbacks cb;
  uint64_t received = 0;
  size_t largest_piece = 0;
  cb.on_part = [](const PartHeaders&) { return true; };
  cb.on_data = [&](std::string_view d) {
    received += d.size();
    largest_piece = std::max(largest_piece, d.size());
  };
  MultipartParser p(boundary, cb);
  p.feed("------boundary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big\"\r\n\r\n");
  const std::string chunk(256 << 10, 'z');
  for (int i = 0; i < 256; ++i) {
    p.feed(chunk);
    EXPECT_GE(received + 64, static_cast<uint64_t>(i + 1) * chunk.size());
  }
  p.feed("\r\n------boundary--\r\n");
  p.finish();
  EXPECT_EQ(received, 64ull << 20);
  EXPECT_LE(largest_piece, chunk.size() + 64);
}

}  // namespace
}  // namespace agentbox::http
