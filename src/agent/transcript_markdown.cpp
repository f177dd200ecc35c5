#include "agent/transcript_markdown.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/markdown_text.hpp"
#include "util/utf8.hpp"

namespace agentbox::agent {

namespace {

using nlohmann::json;

std::string str(const json& o, const char* key) {
  if (!o.is_object()) return {};
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "2026-12-06T14:43:24.797Z" as "2026-12-06 14:43:24 UTC" (or its time alone); "" for anything
// else, which is then not shown: a timestamp is the CLI's, but the file is the user's.
std::string when(std::string_view ts, bool with_date) {
  if (ts.size() < 20 || ts[4] != '-' || ts[7] != '-' || ts[10] != 'T' || ts[13] != ':' || ts[16] != ':' ||
      ts.back() != 'Z')
    return {};
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if (!std::isdigit(static_cast<unsigned char>(ts[i]))) return {};
  std::string time(ts.substr(11, 8));
  return with_date ? std::string(ts.substr(0, 10)) + " " + time + " UTC" : time;
}

// A user message's text blocks (or its string), and whether it has anything but tool results.
std::string text_of(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array())
    for (const json& b : content)
      if (str(b, "type") == "text") text += str(b, "text");
  return text;
}

// Lines the CLI writes for the model rather than from anyone: isMeta, and the records of slash
// commands and their local output.
bool bookkeeping(const TranscriptMessage& m) {
  if (m.meta) return true;
  if (m.role != "user") return false;
  const std::string text = text_of(m.content);
  return text.starts_with("<command-name>") || text.starts_with("<command-message>") ||
         text.starts_with("<local-command-");
}

// A tool result's content as text: a string, or its text blocks (an image named, not shown).
std::string result_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return content.is_null() ? std::string() : content.dump(2);
  std::string text;
  for (const json& b : content) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    const std::string type = str(b, "type");
    if (type == "text")
      text += str(b, "text");
    else
      text += "[" + (type.empty() ? std::string("block") : type) + "]";
  }
  return text;
}

// What names a call in its summary: the first of these its input has, as tools name them.
constexpr const char* kSummaryKeys[] = {"command", "file_path", "notebook_path", "path",  "pattern",
                                        "url",     "query",     "description",   "skill", "prompt"};

class Renderer {
 public:
  Renderer(const Transcript& t, const MarkdownLimits& limits) : t_(t), limits_(limits) {
    for (const auto& m : t_.messages)
      if (m.content.is_array())
        for (const json& b : m.content) {
          const std::string type = str(b, "type");
          if (type == "tool_use") called_.insert(str(b, "id"));
          if (type == "tool_result") results_.emplace(str(b, "tool_use_id"), &b);
        }
  }

  std::string run(const TranscriptAbout& about) {
    header(about);
    for (const auto& m : t_.messages)
      if (!bookkeeping(m)) message(m);
    approvals(about.approvals);
    return std::move(out_);
  }

 private:
  // Ask mode's decisions, in the order they were made: tool, decision, the reason when denied.
  void approvals(const nlohmann::json& list) {
    if (!list.is_array() || list.empty()) return;
    out_ += "\n## Approvals\n\n";
    for (const auto& a : list) {
      if (!a.is_object()) continue;
      auto str = [&](const char* k) { return a.contains(k) && a[k].is_string() ? a[k].get<std::string>() : ""; };
      const nlohmann::json input = a.contains("input") ? a["input"] : nlohmann::json();
      std::string what = input.is_object() && input.contains("command") && input["command"].is_string()
                             ? input["command"].get<std::string>()
                         : input.is_object() && input.contains("file_path") && input["file_path"].is_string()
                             ? input["file_path"].get<std::string>()
                             : input.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      out_ += "- " + str("time") + " " + str("tool") + " " + inline_code(what) + ": **" + str("decision") + "**";
      if (!str("reason").empty()) out_ += " (" + str("reason") + ")";
      out_ += "\n";
    }
  }

  void header(const TranscriptAbout& about) {
    out_ += "# Claude Code session " + inline_code(about.id) + "\n\n";
    if (!about.chat.empty()) out_ += "- Chat: " + inline_code(about.chat) + "\n";
    if (!t_.cwd.empty()) out_ += "- Directory: " + inline_code(t_.cwd) + "\n";
    std::vector<std::string> models;
    for (const auto& m : t_.messages)
      if (!m.model.empty() && m.model != "<synthetic>" &&
          std::find(models.begin(), models.end(), m.model) == models.end())
        models.push_back(m.model);
    if (!models.empty()) {
      out_ += "- Model: ";
      for (size_t i = 0; i < models.size(); ++i) out_ += (i ? ", " : "") + inline_code(models[i]);
      out_ += "\n";
    }
    std::string first, last;
    for (const auto& m : t_.messages)
      if (std::string w = when(m.timestamp, true); !w.empty()) {
        if (first.empty()) first = w;
        last = w;
      }
    if (!first.empty()) out_ += "- Started " + first + ", last message " + last + "\n";
    if (about.truncated)
      out_ += "\n> Only the beginning of this session is shown: its file is longer than agentbox reads.\n";
    out_ += "\n---\n";
  }

  void heading(const TranscriptMessage& m) {
    if (role_ == m.role) return;
    role_ = m.role;
    const std::string time = when(m.timestamp, false);
    out_ +=
        "\n## " + std::string(m.role == "user" ? "User" : "Assistant") + (time.empty() ? "" : " · " + time) + "\n\n";
  }

  void message(const TranscriptMessage& m) {
    if (m.role != "user" && m.role != "assistant") return;
    if (m.content.is_string()) {
      heading(m);
      text(m.content.get<std::string>(), m.api_error);
      return;
    }
    if (!m.content.is_array()) return;
    for (const json& b : m.content) {
      const std::string type = str(b, "type");
      if (type == "tool_result") {
        if (!called_.contains(str(b, "tool_use_id"))) tool_call("", "Tool result", json(), &b);  // shown with its call
        continue;
      }
      heading(m);
      if (type == "text")
        text(str(b, "text"), m.api_error);
      else if (type == "thinking")
        thinking(str(b, "thinking"));
      else if (type == "redacted_thinking")
        out_ += "> **Thinking** (redacted)\n\n";
      else if (type == "tool_use")
        tool_call(str(b, "id"), str(b, "name"), b.value("input", json()), result_of(str(b, "id")));
      else if (!type.empty())
        out_ += "*[" + html_text(type) + "]*\n\n";
    }
  }

  void text(const std::string& said, bool api_error) {
    if (said.find_first_not_of(" \t\r\n") == std::string::npos) return;
    out_ += api_error ? blockquote("**Error:** " + said) : close_open_blocks(said);
    if (out_.back() != '\n') out_ += '\n';
    out_ += '\n';
  }

  // A blockquote: Markdown still reads well there, and any HTML the text opens ends with it.
  void thinking(const std::string& thought) {
    if (thought.find_first_not_of(" \t\r\n") == std::string::npos) return;
    out_ += "> **Thinking**\n>\n" + blockquote(close_open_blocks(thought)) + "\n";
  }

  const json* result_of(const std::string& id) const {
    auto it = results_.find(id);
    return it == results_.end() ? nullptr : it->second;
  }

  void tool_call(const std::string& id, const std::string& name, const json& input, const json* result) {
    const bool error = result && result->contains("is_error") && (*result)["is_error"] == true;
    std::string summary = html_text(name.empty() ? std::string("Tool") : name);
    for (const char* key : kSummaryKeys)
      if (std::string v = str(input, key); !v.empty()) {
        const size_t keep = utf8_prefix_of_chars(v, limits_.summary_chars);
        summary += ": " + html_text(v.substr(0, keep)) + (keep < v.size() ? "…" : "");
        break;
      }
    if (error) summary += " (error)";
    out_ += "<details>\n<summary>" + summary + "</summary>\n\n";
    if (!id.empty()) input_block(name, input);
    if (!result) {
      out_ += "*No result recorded.*\n\n";
    } else {
      out_ += error ? "Error:\n\n" : "Output:\n\n";
      block(result_text(result->value("content", json())), "text");
    }
    out_ += "</details>\n\n";
  }

  // Bash as its command, Edit as a diff, Write as the file's text, any other tool as its JSON.
  void input_block(const std::string& name, const json& input) {
    const std::string command = str(input, "command");
    const std::string old_text = str(input, "old_string"), new_text = str(input, "new_string");
    const std::string content = str(input, "content");
    if (name == "Bash" && !command.empty()) return block(command, "sh");
    if (name == "Edit" && (!old_text.empty() || !new_text.empty()))
      return block(prefixed(old_text, '-') + prefixed(new_text, '+'), "diff");
    if (name == "Write" && input.contains("content")) return block(content, "");
    block(input.is_null() ? std::string("{}") : input.dump(2, ' ', false, json::error_handler_t::replace), "json");
  }

  static std::string prefixed(const std::string& text, char mark) {
    std::string out;
    for (size_t start = 0; start < text.size();) {
      const size_t nl = text.find('\n', start);
      const size_t end = nl == std::string::npos ? text.size() : nl;
      out += mark;
      out.append(text, start, end - start);
      out += '\n';
      start = end + 1;
    }
    return out;
  }

  void block(const std::string& text, std::string_view info) {
    const CutText cut = cut_text(text, limits_.block_bytes, limits_.block_lines);
    out_ += fenced_block(cut.kept, info);
    if (cut.cut_bytes)
      out_ += "\n*… " + std::to_string(cut.cut_bytes) + " more bytes cut (the session's JSON form has them all).*\n";
    out_ += '\n';
  }

  const Transcript& t_;
  const MarkdownLimits& limits_;
  std::unordered_set<std::string> called_;                // ids of the tool calls made
  std::unordered_map<std::string, const json*> results_;  // tool_use_id → its (first) result
  std::string role_;                                      // whose heading is in effect
  std::string out_;
};

}  // namespace

std::string transcript_markdown(const Transcript& t, const TranscriptAbout& about, const MarkdownLimits& limits) {
  return Renderer(t, limits).run(about);
}

}  // namespace agentbox::agent
