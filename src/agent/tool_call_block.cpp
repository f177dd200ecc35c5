#include "agent/tool_call_block.hpp"

#include <nlohmann/json.hpp>

namespace agentbox::agent {

namespace {

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string html_attribute_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#x27;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string tool_call_block(std::string_view id, std::string_view name, const nlohmann::json& input,
                            std::string_view result) {
  std::string out = "<details type=\"tool_calls\" done=\"true\" id=\"";
  out += html_attribute_escape(id);
  out += "\" name=\"";
  out += html_attribute_escape(name);
  out += "\" arguments=\"";
  out += html_attribute_escape(dump(input.is_null() ? nlohmann::json::object() : input));
  out += "\" result=\"";
  out += html_attribute_escape(dump(nlohmann::json(std::string(result))));
  out += "\" files=\"\" embeds=\"\">\n<summary>Tool Executed</summary>\n</details>\n";
  return out;
}

}  // namespace agentbox::agent
