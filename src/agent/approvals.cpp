#include "agent/approvals.hpp"

#include <sys/stat.h>

#include <ctime>
#include <sstream>

#include "agent/markdown_text.hpp"
#include "fs/file_read.hpp"
#include "fs/file_write.hpp"

namespace agentbox::agent {

using nlohmann::json;

namespace {

constexpr size_t kDiffLines = 20;               // of each side of an Edit, of a Write's content
constexpr size_t kMaxApprovalsBytes = 1 << 20;  // an approvals file read at most

std::string string_at(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Each line of text with prefix, at most kDiffLines (then how many more).
std::string prefixed_lines(const std::string& text, std::string_view prefix) {
  std::istringstream in(text);
  std::string out, line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (++n > kDiffLines) continue;
    out.append(prefix).append(line).append("\n");
  }
  if (n > kDiffLines) out += "... (" + std::to_string(n - kDiffLines) + " more lines)\n";
  return out;
}

std::string iso_time(std::time_t t) {
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string approval_question(const ClaudeExit::Question& question) {
  const json input = json::parse(question.input, nullptr, /*allow_exceptions=*/false);
  const std::string file = input.is_object() ? string_at(input, "file_path") : "";
  std::string what;
  if (question.tool == "Bash" && input.is_object()) {
    what = "Claude Code wants to run this command:\n\n" + fenced_block(string_at(input, "command"), "sh");
  } else if (question.tool == "Edit" && !file.empty()) {
    what = "Claude Code wants to edit `" + file + "`:\n\n" +
           fenced_block(prefixed_lines(string_at(input, "old_string"), "- ") +
                            prefixed_lines(string_at(input, "new_string"), "+ "),
                        "diff");
  } else if (question.tool == "Write" && !file.empty()) {
    what = "Claude Code wants to write `" + file + "`:\n\n" +
           fenced_block(prefixed_lines(string_at(input, "content"), "+ "), "diff");
  } else {
    what = "Claude Code wants to use " + question.tool + " with:\n\n" +
           fenced_block(input.is_null() ? question.input : input.dump(2, ' ', false, json::error_handler_t::replace),
                        "json");
  }
  return "**Approval needed.** " + what + "\nReply **yes** to allow it once, **always** to allow " + question.tool +
         " for the rest of this chat, or **no** (with the reason, which Claude Code is told) to refuse it.";
}

std::string approvals_path(const std::string& transcript_rel) {
  std::string rel = transcript_rel;
  if (rel.ends_with(".jsonl")) rel.resize(rel.size() - std::string_view(".jsonl").size());
  return rel + ".approvals.ndjson";
}

void record_approval(const accounts::Caller& caller, const std::string& rel, const ApprovalDecision& d) {
  const HomePath path = caller.home->path(rel, caller.box_home);
  std::string text;
  try {
    struct stat st {};
    UniqueFd fd = open_regular_file(*caller.home, path, st);
    read_up_to(fd.get(), text, kMaxApprovalsBytes, rel);
  } catch (const std::exception&) {
    text.clear();  // none yet
  }
  json input = json::parse(d.input, nullptr, false);
  if (input.is_discarded()) input = d.input;
  const json line = {{"tool", d.tool},
                     {"input", input},
                     {"decision", d.decision},
                     {"reason", d.reason},
                     {"time", iso_time(std::time(nullptr))}};
  text += line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  write_atomic(*caller.home, path, text, /*create_parents=*/true);
}

json read_approvals(const accounts::Caller& caller, const std::string& rel) {
  json out = json::array();
  std::string text;
  try {
    struct stat st {};
    UniqueFd fd = open_regular_file(*caller.home, caller.home->path(rel, caller.box_home), st);
    read_up_to(fd.get(), text, kMaxApprovalsBytes, rel);
  } catch (const std::exception&) {
    return out;
  }
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    json o = json::parse(line, nullptr, false);
    if (o.is_object()) out.push_back(std::move(o));
  }
  return out;
}

}  // namespace agentbox::agent
