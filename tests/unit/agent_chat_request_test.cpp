// An OpenAI chat request as Open WebUI sends it, turned into one Claude Code turn.
#include "agent/chat_request.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace agentbox::agent {
namespace {

using nlohmann::json;

TEST(ChatRequest, TheLastUserMessageIsThePromptAndSystemMessagesAreJoined) {
  json body = {{"model", "claude-code"},
               {"stream", true},
               {"messages",
                {{{"role", "system"}, {"content", "Be brief."}},
                 {{"role", "user"}, {"content", "first question"}},
                 {{"role", "assistant"}, {"content", "first answer"}},
                 {{"role", "system"}, {"content", {{{"type", "text"}, {"text", "Answer in French."}}}}},
                 {{"role", "user"}, {"content", "second question"}}}}};
  ChatRequest r = parse_chat_request(body, 1 << 20);
  EXPECT_EQ(r.model, "claude-code");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.prompt, "second question");
  EXPECT_EQ(r.system, "Be brief.\n\nAnswer in French.");
  EXPECT_TRUE(r.attachments.empty());
}

TEST(ChatRequest, ImagesAsDataUrisBecomeNamedAttachments) {
  json body = {{"messages",
                {{{"role", "user"},
                  {"content",
                   {{{"type", "text"}, {"text", "What is in the picture?"}},
                    {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,iVBORw0KGgo="}}}}}}}}}};
  ChatRequest r = parse_chat_request(body, 1 << 20);
  ASSERT_EQ(r.attachments.size(), 1u);
  EXPECT_EQ(r.attachments[0].name, "attachment-1.png");
  EXPECT_EQ(r.attachments[0].bytes, std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_NE(r.prompt.find("What is in the picture?"), std::string::npos);
  EXPECT_NE(r.prompt.find("attachment-1.png"), std::string::npos);
  EXPECT_FALSE(r.stream);
}

TEST(ChatRequest, FilePartsBecomeNumberedPlainNamedAttachments) {
  json file = {{"type", "file"},
               {"file", {{"filename", "../../etc/My Report.csv"}, {"file_data", "data:text/csv;base64,YSxiCg=="}}}};
  json same = {{"type", "file"}, {"file", {{"filename", "My Report.csv"}, {"file_data", "data:text/csv;base64,Yw=="}}}};
  json nameless = {{"type", "file"}, {"file", {{"file_data", "data:application/pdf;base64,JVBERg=="}}}};
  json elsewhere = {{"type", "file"},
                    {"file", {{"file_id", "file-abc"}}}};  // another service's upload: nothing to write
  json body = {
      {"messages",
       {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "sum it"}}, file, same, nameless, elsewhere}}}}}};
  ChatRequest r = parse_chat_request(body, 1 << 20);
  ASSERT_EQ(r.attachments.size(), 3u);
  EXPECT_EQ(r.attachments[0].name, "1-My_Report.csv");
  EXPECT_EQ(r.attachments[0].bytes, "a,b\n");
  EXPECT_EQ(r.attachments[1].name, "2-My_Report.csv");  // the same name twice: two files
  EXPECT_EQ(r.attachments[2].name, "attachment-3.bin");
  for (const auto& a : r.attachments) EXPECT_NE(r.prompt.find(a.name), std::string::npos) << a.name;
}

TEST(ChatRequest, WhatCannotBeRunIsAnErrorThatSaysWhy) {
  auto fails = [](const json& body) {
    try {
      parse_chat_request(body, 16);
    } catch (const ChatRequestError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(fails(json::array()), "");
  EXPECT_NE(fails({{"messages", json::array()}}), "");
  EXPECT_NE(fails({{"messages", {{{"role", "system"}, {"content", "x"}}}}}), "");
  EXPECT_NE(fails({{"messages", {{{"role", "user"}, {"content", ""}}}}}), "");
  json remote = {{"messages",
                  {{{"role", "user"},
                    {"content", {{{"type", "image_url"}, {"image_url", {{"url", "http://example.com/a.png"}}}}}}}}}};
  EXPECT_NE(fails(remote).find("data:"), std::string::npos);
  json big = {
      {"messages",
       {{{"role", "user"},
         {"content",
          {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + std::string(400, 'A')}}}}}}}}}};
  EXPECT_NE(fails(big).find("larger"), std::string::npos);
  json broken = {{"messages",
                  {{{"role", "user"},
                    {"content", {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,@@@@"}}}}}}}}}};
  EXPECT_NE(fails(broken).find("base64"), std::string::npos);
}

TEST(ChatDirName, PlainIdsStayAndOthersCannotLeaveOrCollide) {
  EXPECT_EQ(chat_dir_name("3f2a-chat_1.x"), "3f2a-chat_1.x");
  const std::string up = chat_dir_name("../../etc");
  EXPECT_EQ(up.find('/'), std::string::npos);
  EXPECT_NE(up.front(), '.');
  EXPECT_NE(chat_dir_name("a/b"), chat_dir_name("a_b"));
  EXPECT_NE(chat_dir_name("a/b"), chat_dir_name("a?b"));
  EXPECT_EQ(chat_dir_name("a/b"), chat_dir_name("a/b"));  // the same chat finds its directory again
  EXPECT_LE(chat_dir_name(std::string(500, 'x')).size(), 64u);
  EXPECT_NE(chat_dir_name(".hidden"), ".hidden");
}

TEST(Base64, DecodesWithAndWithoutPadding) {
  EXPECT_EQ(decode_base64("aGVsbG8="), "hello");
  EXPECT_EQ(decode_base64("aGVsbG8"), "hello");
  EXPECT_EQ(decode_base64(""), "");
  EXPECT_THROW(decode_base64("a"), ChatRequestError);
}

}  // namespace
}  // namespace agentbox::agent
