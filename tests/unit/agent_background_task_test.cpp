// Open WebUI's background tasks told from chat turns, and what answers them without an agent:
// the Messages request, the reply text, the fallback replies and the OpenAI shapes.
#include "agent/background_task.hpp"

#include <gtest/gtest.h>

#include <string>

#include "agent/chat_request.hpp"

namespace agentbox::agent {
namespace {

using nlohmann::json;

// Open WebUI's default title prompt, shortened, with the chat it embeds.
const std::string kTitlePrompt =
    "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n"
    "### Output:\nJSON format: { \"title\": \"your concise title here\" }\n"
    "### Chat History:\n<chat_history>\nUSER: Please plot the quarterly sales report as a chart\n"
    "ASSISTANT: Here is the chart with \"tags\" and \"follow_ups\"\n</chat_history>";
const std::string kTagsPrompt =
    "### Task:\nGenerate 1-3 broad tags categorizing the main themes of the chat history.\n"
    "### Output:\nJSON format: { \"tags\": [\"tag1\", \"tag2\", \"tag3\"] }\n"
    "### Chat History:\n<chat_history>\nUSER: hi\n</chat_history>";
const std::string kFollowUpsPrompt =
    "### Task:\nSuggest 3-5 relevant follow-up questions.\n"
    "### Output:\nJSON format: { \"follow_ups\": [\"Question 1?\", \"Question 2?\"] }\n"
    "### Chat History:\n<chat_history>\nUSER: hi\n</chat_history>";

json request(const std::string& prompt, bool stream = false) {
  return json{{"model", "claude-code"},
              {"stream", stream},
              {"messages", json::array({{{"role", "user"}, {"content", prompt}}})}};
}

TEST(BackgroundTask, OpenWebUIsDefaultTaskShapeIsATaskOfTheKindItsReplyHolds) {
  auto title = background_task(request(kTitlePrompt), std::nullopt);
  ASSERT_TRUE(title);
  EXPECT_EQ(title->kind, TaskKind::title);  // the history's "tags" does not count
  EXPECT_EQ(title->name, "title_generation");
  EXPECT_FALSE(title->stream);
  EXPECT_EQ(background_task(request(kTagsPrompt), std::nullopt)->kind, TaskKind::tags);
  EXPECT_EQ(background_task(request(kFollowUpsPrompt), std::nullopt)->kind, TaskKind::follow_ups);
  // System messages aside; a prompt as text parts counts too.
  json with_system = request(kTitlePrompt);
  with_system["messages"].insert(with_system["messages"].begin(), json{{"role", "system"}, {"content", "be brief"}});
  EXPECT_TRUE(background_task(with_system, std::nullopt));
  json parts = request("");
  parts["messages"][0]["content"] = json::array({{{"type", "text"}, {"text", kTagsPrompt}}});
  EXPECT_EQ(background_task(parts, std::nullopt)->kind, TaskKind::tags);
}

TEST(BackgroundTask, ChatTurnsAreNoTasks) {
  EXPECT_FALSE(background_task(request("write a ### Task: list"), std::nullopt));
  EXPECT_FALSE(background_task(request(kTitlePrompt, /*stream=*/true), std::nullopt));  // a turn streams
  json two = request(kTitlePrompt);
  two["messages"].push_back(json{{"role", "assistant"}, {"content", "ok"}});
  EXPECT_FALSE(background_task(two, std::nullopt));
  json assistant_only = request(kTitlePrompt);
  assistant_only["messages"][0]["role"] = "assistant";
  EXPECT_FALSE(background_task(assistant_only, std::nullopt));
  // The header is empty on chat turns: then only the shape counts.
  EXPECT_FALSE(background_task(request("hello", /*stream=*/true), std::string_view("")));
  EXPECT_TRUE(background_task(request(kTitlePrompt), std::string_view("")));
  EXPECT_FALSE(background_task(json::array(), std::nullopt));
  json bad_stream = request(kTitlePrompt);
  bad_stream["stream"] = "yes";  // not a boolean: not streamed, and no throw
  EXPECT_TRUE(background_task(bad_stream, std::nullopt));
}

TEST(BackgroundTask, TheHeaderAloneMakesATaskStreamedOrNot) {
  auto t = background_task(request("anything at all", /*stream=*/true), std::string_view("tags_generation"));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind, TaskKind::tags);
  EXPECT_EQ(t->name, "tags_generation");
  EXPECT_TRUE(t->stream);
  EXPECT_EQ(background_task(request("x"), std::string_view("title_generation"))->kind, TaskKind::title);
  EXPECT_EQ(background_task(request("x"), std::string_view("follow_up_generation"))->kind, TaskKind::follow_ups);
  EXPECT_EQ(background_task(request(kTagsPrompt), std::string_view("something_new"))->kind, TaskKind::tags);
  EXPECT_EQ(background_task(request("x"), std::string_view("emoji_generation"))->kind, TaskKind::other);
}

TEST(BackgroundTask, TheMessagesRequestHasTheSystemApartAndNoTools) {
  json body = request("");
  body["messages"] = json::array({{{"role", "assistant"}, {"content", "dropped: before any user"}},
                                  {{"role", "system"}, {"content", "one"}},
                                  {{"role", "user"}, {"content", "a"}},
                                  {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "b"}}})}},
                                  {{"role", "assistant"}, {"content", "c"}},
                                  {{"role", "developer"}, {"content", "two"}},
                                  {{"role", "tool"}, {"content", "ignored"}},
                                  {{"role", "user"}, {"content", "d"}}});
  json r = task_messages_request(body, "claude-haiku-4-5", 512);
  EXPECT_EQ(r["model"], "claude-haiku-4-5");
  EXPECT_EQ(r["max_tokens"], 512);
  EXPECT_EQ(r["system"], "one\n\ntwo");
  EXPECT_FALSE(r.contains("tools"));
  EXPECT_FALSE(r.contains("stream"));
  EXPECT_EQ(r["messages"], json::parse(R"([{"role":"user","content":"a\n\nb"},{"role":"assistant","content":"c"},
                                             {"role":"user","content":"d"}])"));
  json none = request("");
  none["messages"] = json::array({{{"role", "system"}, {"content", "only"}}});
  EXPECT_THROW(task_messages_request(none, "m", 1), ChatRequestError);
}

TEST(BackgroundTask, TheAnswersTextIsItsTextBlocks) {
  EXPECT_EQ(messages_answer_text(json::parse(
                R"({"type":"message","content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"{\"title\":"},
                    {"type":"text","text":" \"T\"}"}]})")),
            "{\"title\": \"T\"}");
  EXPECT_FALSE(messages_answer_text(json::parse(R"({"type":"error","error":{"message":"no"}})")));
  EXPECT_FALSE(messages_answer_text(json()));
}

TEST(BackgroundTask, WithoutAModelTheReplyHasTheShapeTheTaskAsksFor) {
  const json title =
      json::parse(fallback_reply(*background_task(request(kTitlePrompt), std::nullopt), request(kTitlePrompt)));
  EXPECT_EQ(title, json({{"title", "Please plot the quarterly sales report"}}));
  auto reply = [](TaskKind kind) { return json::parse(fallback_reply(BackgroundTask{kind, "", false}, request("x"))); };
  EXPECT_EQ(reply(TaskKind::tags), json({{"tags", json::array()}}));
  EXPECT_EQ(reply(TaskKind::follow_ups), json({{"follow_ups", json::array()}}));
  EXPECT_EQ(reply(TaskKind::queries), json({{"queries", json::array()}}));
  EXPECT_EQ(reply(TaskKind::autocomplete), json({{"text", ""}}));
  // A header-only task: the title is the request's own first words.
  EXPECT_EQ(reply(TaskKind::title), json({{"title", "x"}}));
  EXPECT_EQ(json::parse(fallback_reply(BackgroundTask{TaskKind::title, "", false}, request("   "))),
            json({{"title", "New chat"}}));
}

TEST(BackgroundTask, TheReplyIsAnOpenAICompletionOrItsChunks) {
  const json usage = {{"input_tokens", 20}, {"output_tokens", 5}, {"cache_read_input_tokens", 2}};
  json c = task_completion("claude-code", "chatcmpl-1", 7, "{\"tags\": []}", usage);
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["model"], "claude-code");
  EXPECT_EQ(c["choices"][0]["message"], json({{"role", "assistant"}, {"content", "{\"tags\": []}"}}));
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"], json({{"prompt_tokens", 22}, {"completion_tokens", 5}, {"total_tokens", 27}}));
  json chunks = task_chunks("claude-code", "chatcmpl-1", 7, "hi", nullptr);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["content"], "hi");
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[1]["usage"]["total_tokens"], 0);
}

}  // namespace
}  // namespace agentbox::agent
