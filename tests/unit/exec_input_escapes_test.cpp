// The small parsers in front of /execute: input escapes as a model writes them, and typed
// query parameters with their 422s.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/input_escapes.hpp"
#include "http/error.hpp"
#include "http/query_params.hpp"

namespace agentbox {
namespace {

using exec::decode_input_escapes;

TEST(InputEscapes, ControlKeysAsModelsWriteThem) {
  EXPECT_EQ(decode_input_escapes("ls\\n"), "ls\n");
  EXPECT_EQ(decode_input_escapes("\\x03"), "\x03");
  EXPECT_EQ(decode_input_escapes("\\u001b[A"), "\x1b[A");
  EXPECT_EQ(decode_input_escapes("a\\tb\\r\\n"), "a\tb\r\n");
  EXPECT_EQ(decode_input_escapes("\\\\n"), "\\n") << "an escaped backslash stays one backslash";
  EXPECT_EQ(decode_input_escapes("\\0"), std::string(1, '\0'));
  EXPECT_EQ(decode_input_escapes("\\101"), "A");
  EXPECT_EQ(decode_input_escapes("\\u00e9"), "\xc3\xa9") << "a code point is written as UTF-8";
  EXPECT_EQ(decode_input_escapes("\\U0001F600"), "\xf0\x9f\x98\x80");
}

TEST(InputEscapes, UnknownOrCutEscapesAreKeptAsWritten) {
  EXPECT_EQ(decode_input_escapes("C:\\path"), "C:\\path");
  EXPECT_EQ(decode_input_escapes("\\x4"), "\\x4");
  EXPECT_EQ(decode_input_escapes("end\\"), "end\\");
  EXPECT_EQ(decode_input_escapes("héllo\n"), "héllo\n") << "plain UTF-8 passes unchanged";
}

http::Request with_query(std::string name, std::string value) {
  http::Request req;
  req.query.emplace_back(std::move(name), std::move(value));
  return req;
}

TEST(QueryParams, ParsesInRangeValues) {
  EXPECT_EQ(http::query_int(with_query("tail", "20"), "tail", 1, 100), 20);
  EXPECT_DOUBLE_EQ(*http::query_number(with_query("wait", "2.5"), "wait", 0, 300), 2.5);
  EXPECT_EQ(http::query_bool(with_query("force", "True"), "force"), true);
  EXPECT_EQ(http::query_bool(with_query("force", "0"), "force"), false);
  EXPECT_EQ(http::query_int(http::Request{}, "tail", 1, 100), std::nullopt);
}

TEST(QueryParams, BadValuesAre422NamingTheParameter) {
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{{"tail", "0"},
                                                                             {"tail", "abc"},
                                                                             {"tail", "5x"},
                                                                             {"wait", "301"},
                                                                             {"wait", "nan"},
                                                                             {"wait", "-1"},
                                                                             {"force", "maybe"}}) {
    auto req = with_query(name, value);
    try {
      if (name == "tail") http::query_int(req, name, 1, 100);
      if (name == "wait") http::query_number(req, name, 0, 300);
      if (name == "force") http::query_bool(req, name);
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const http::HttpError& e) {
      EXPECT_EQ(e.status(), http::status::unprocessable_entity);
      EXPECT_THAT(std::string(e.detail()), ::testing::HasSubstr(name));
    }
  }
}

}  // namespace
}  // namespace agentbox
