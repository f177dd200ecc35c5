// The <details type="tool_calls"> block Open WebUI shows for a tool call and its result.
#include "agent/tool_call_block.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace agentbox::agent {
namespace {

using nlohmann::json;

TEST(ToolCallBlock, WritesOpenWebUisAttributeSet) {
  EXPECT_EQ(tool_call_block("toolu_1", "Read", json{{"file_path", "/home/u/a.txt"}}, "hello"),
            "<details type=\"tool_calls\" done=\"true\" id=\"toolu_1\" name=\"Read\" "
            "arguments=\"{&quot;file_path&quot;:&quot;/home/u/a.txt&quot;}\" result=\"&quot;hello&quot;\" "
            "files=\"\" embeds=\"\">\n<summary>Tool Executed</summary>\n</details>\n");
}

TEST(ToolCallBlock, EscapesEverythingThatCouldEndTheAttributeOrTheTag) {
  EXPECT_EQ(html_attribute_escape("a&b<c>d\"e'f\ng\rh"), "a&amp;b&lt;c&gt;d&quot;e&#x27;f&#10;g&#13;h");
  // A hostile tool name and id, and a result that tries to close the block.
  std::string block = tool_call_block("x\" onclick=\"y", "<script>\n", json::object(), "</details><img src=x>");
  std::string tag = block.substr(0, block.find('>') + 1);
  EXPECT_EQ(tag.find('<', 1), std::string::npos);
  EXPECT_EQ(tag.find('\n'), std::string::npos);
  EXPECT_NE(tag.find("id=\"x&quot; onclick=&quot;y\""), std::string::npos);
  EXPECT_NE(tag.find("name=\"&lt;script&gt;&#10;\""), std::string::npos);
  EXPECT_NE(tag.find("result=\"&quot;&lt;/details&gt;&lt;img src=x&gt;&quot;\""), std::string::npos);
  EXPECT_EQ(block.substr(tag.size()), "\n<summary>Tool Executed</summary>\n</details>\n");
}

TEST(ToolCallBlock, KeepsNonAsciiTextAndReplacesInvalidUtf8) {
  std::string block = tool_call_block("t", "Bash", json{{"command", "echo \xc3\xa9"}}, "\xc3\xa9t\xc3\xa9 \xff");
  EXPECT_NE(block.find("echo \xc3\xa9"), std::string::npos);                               // not \u00e9
  EXPECT_NE(block.find("&quot;\xc3\xa9t\xc3\xa9 \xef\xbf\xbd&quot;"), std::string::npos);  // U+FFFD
}

TEST(ToolCallBlock, WritesAnEmptyObjectForAMissingInput) {
  std::string block = tool_call_block("t", "Bash", json(), "");
  EXPECT_NE(block.find("arguments=\"{}\" result=\"&quot;&quot;\""), std::string::npos);
}

}  // namespace
}  // namespace agentbox::agent
