#include "exec/plain_command.hpp"

#include <algorithm>
#include <array>

namespace agentbox::exec {
namespace {

// bash 5.2's `compgen -b` and `compgen -k`: words whose meaning is the shell's, not a program's.
constexpr std::array<std::string_view, 80> kShellWords = {
    ".",       ":",       "[",         "alias",    "bg",       "bind",     "break",   "builtin", "caller",  "cd",
    "command", "compgen", "complete",  "compopt",  "continue", "declare",  "dirs",    "disown",  "echo",    "enable",
    "eval",    "exec",    "exit",      "export",   "false",    "fc",       "fg",      "getopts", "hash",    "help",
    "history", "jobs",    "kill",      "let",      "local",    "logout",   "mapfile", "popd",    "printf",  "pushd",
    "pwd",     "read",    "readarray", "readonly", "return",   "set",      "shift",   "shopt",   "source",  "suspend",
    "test",    "times",   "trap",      "true",     "type",     "typeset",  "ulimit",  "umask",   "unalias", "unset",
    "wait",    "if",      "then",      "else",     "elif",     "fi",       "case",    "esac",    "for",     "select",
    "while",   "until",   "do",        "done",     "in",       "function", "time",    "{",       "}",       "!"};

bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_./,:+@%=-").find(c) != std::string_view::npos;
}

bool blank(char c) { return c == ' ' || c == '\t'; }

bool env_changes_shell(const std::map<std::string, std::string>& env) {
  for (const auto& [name, value] : env)
    if (name == "BASH_ENV" || name == "SHELLOPTS" || name == "BASHOPTS" || name.rfind("BASH_FUNC_", 0) == 0)
      return true;
  return false;
}

}  // namespace

std::optional<std::vector<std::string>> plain_command_words(std::string_view command,
                                                            const std::map<std::string, std::string>& env) {
  if (env_changes_shell(env)) return std::nullopt;
  std::vector<std::string> words;
  for (size_t i = 0; i < command.size();) {
    if (blank(command[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < command.size() && !blank(command[end])) {
      if (!plain_char(command[end])) return std::nullopt;
      ++end;
    }
    words.emplace_back(command.substr(i, end - i));
    i = end;
  }
  if (words.empty()) return std::nullopt;
  const std::string& first = words.front();
  // `NAME=value cmd` is an assignment; `%1` names a job.
  if (first.find('=') != std::string::npos || first.front() == '%') return std::nullopt;
  const bool alone = words.size() == 1;
  if ((first == "true" || first == "false") && alone) return words;
  if (std::find(kShellWords.begin(), kShellWords.end(), first) != kShellWords.end()) return std::nullopt;
  return words;
}

}  // namespace agentbox::exec
