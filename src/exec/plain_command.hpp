#pragma once
// Commands that need no shell. `POST /execute` runs `bash -c COMMAND`, and starting bash costs
// more CPU than most commands it runs (about 5 ms here against 1 ms for /usr/bin/true). A command
// made only of plain words — no quoting, expansion, redirection, operator or builtin — means the
// same to bash as its words do to execve, because bash -c execs such a command directly.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::exec {

// The words of `command` when bash would run it as a plain execve of those words, or nothing
// when the command needs the shell: any character outside [A-Za-z0-9_./,:+@%=-] and blanks, a
// first word that is a bash builtin or keyword (`true` and `false` alone excepted: their
// programs behave the same) or an assignment, or no word at all. `env` is the command's
// environment: one that makes bash read a file or change behaviour first (BASH_ENV, SHELLOPTS,
// BASHOPTS, exported functions) needs the shell too.
std::optional<std::vector<std::string>> plain_command_words(std::string_view command,
                                                            const std::map<std::string, std::string>& env);

}  // namespace agentbox::exec
