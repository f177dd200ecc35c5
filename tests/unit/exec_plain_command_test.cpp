// Which commands run without bash: only those whose words bash would exec unchanged.
#include "exec/plain_command.hpp"

#include <gtest/gtest.h>

namespace agentbox::exec {
namespace {

using Words = std::vector<std::string>;
const std::map<std::string, std::string> kEnv = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/a"}};

std::optional<Words> words(std::string_view command) { return plain_command_words(command, kEnv); }

TEST(PlainCommand, PlainWordsAreSplitOnBlanks) {
  EXPECT_EQ(words("ls"), Words{"ls"});
  EXPECT_EQ(words("  git   status\t--short "), (Words{"git", "status", "--short"}));
  EXPECT_EQ(words("python3 -m http.server 8080"), (Words{"python3", "-m", "http.server", "8080"}));
  EXPECT_EQ(words("./build/app --out=dir/x.o a,b c:d e+f u@h 50%"),
            (Words{"./build/app", "--out=dir/x.o", "a,b", "c:d", "e+f", "u@h", "50%"}));
  EXPECT_EQ(words("/usr/bin/env"), Words{"/usr/bin/env"});
}

TEST(PlainCommand, AnythingTheShellWouldInterpretKeepsTheShell) {
  for (const char* c :
       {"echo $HOME",  "ls *.txt", "ls ?",   "ls [ab]", "cat 'a b'", "cat \"a\"", "a\\ b",      "ls ~", "ls ~/x",
        "a | b",       "a && b",   "a; b",   "a > f",   "a < f",     "a & ",      "(a)",        "a\nb", "echo {a,b}",
        "a # comment", "a `b`",    "a $(b)", "!x",      "a^b",       "a\rb",      "caf\xc3\xa9"})
    EXPECT_EQ(words(c), std::nullopt) << c;
}

TEST(PlainCommand, BuiltinsKeywordsAssignmentsAndJobsKeepTheShell) {
  for (const char* c :
       {"cd /tmp", "export A", "exit 3",  "echo hi", "pwd",        "kill 1",    "test -f x", "[ -f x ]",    "source x",
        ". x",     "exec ls",  "time ls", "if",      "for",        "{",         "!",         "true --help", "false x",
        "A=1 ls",  "A=1",      "%1",      "type ls", "command ls", "ulimit -a", "read x"})
    EXPECT_EQ(words(c), std::nullopt) << c;
  // Alone, true and false are what their programs are too.
  EXPECT_EQ(words("true"), Words{"true"});
  EXPECT_EQ(words(" false "), Words{"false"});
}

TEST(PlainCommand, NoWordsKeepTheShell) {
  EXPECT_EQ(words(""), std::nullopt);
  EXPECT_EQ(words(" \t "), std::nullopt);
}

TEST(PlainCommand, AnEnvironmentThatChangesBashKeepsTheShell) {
  for (const char* name : {"BASH_ENV", "SHELLOPTS", "BASHOPTS", "BASH_FUNC_ls%%"}) {
    auto env = kEnv;
    env[name] = "x";
    EXPECT_EQ(plain_command_words("ls", env), std::nullopt) << name;
  }
}

}  // namespace
}  // namespace agentbox::exec
