#include "api/openapi.hpp"

#include <string>

namespace agentbox::api {

namespace {

using nlohmann::json;

json param(const char* name, const char* in, json schema, const char* description, bool required = false) {
  return {{"name", name},
          {"in", in},
          {"required", required || std::string(in) == "path"},
          {"schema", std::move(schema)},
          {"description", description}};
}

json type(const char* t) { return {{"type", t}}; }
json type(const char* t, json extra) {
  json s = std::move(extra);
  s["type"] = t;
  return s;
}

json ref(const char* schema) { return {{"$ref", std::string("#/components/schemas/") + schema}}; }

json body(const char* schema) {
  return {{"required", true}, {"content", {{"application/json", {{"schema", ref(schema)}}}}}};
}

json json_response(const char* description, json schema) {
  return {{"description", description}, {"content", {{"application/json", {{"schema", std::move(schema)}}}}}};
}

json errors(std::initializer_list<std::pair<const char*, const char*>> list) {
  json r = json::object();
  r["401"] = {{"description", "Invalid or missing API key."}};
  r["400"] = {{"description", "Missing X-User-Id header or malformed request."}};
  for (auto [code, text] : list) r[code] = {{"description", text}};
  return r;
}

// The parameters as a vector: `json parameters = {param(...)}` with one element is that element
// under clang, an array of it under gcc (nlohmann's brace-initialisation), so a list of one
// became an object in clang builds.
json operation(const char* id, const char* summary, const char* description, json::array_t parameters, json responses,
               json request_body = nullptr) {
  json op = {{"operationId", id},
             {"summary", summary},
             {"description", description},
             {"parameters", json(std::move(parameters))},
             {"responses", std::move(responses)}};
  if (!request_body.is_null()) op["requestBody"] = std::move(request_body);
  return op;
}

json with_ok(json responses, json ok) {
  responses["200"] = std::move(ok);
  return responses;
}

const char* kPathNote =
    " Paths are relative to the current working directory of this chat session (the home "
    "directory unless changed); `~/x` and absolute paths inside the home also work.";

json schemas() {
  json output_chunk = {
      {"type", "object"},
      {"properties", {{"type", type("string", {{"enum", {"output", "stdout", "stderr"}}})}, {"data", type("string")}}}};
  json process = {{"type", "object"},
                  {"properties",
                   {{"id", type("string")},
                    {"command", type("string")},
                    {"status", type("string", {{"enum", {"running", "done", "killed", "lost"}}})},
                    {"exit_code", {{"type", {"integer", "null"}}}},
                    {"output", {{"type", "array"}, {"items", ref("OutputChunk")}}},
                    {"truncated", type("boolean")},
                    {"next_offset", type("integer")}}}};
  return {
      {"ExecRequest",
       {{"type", "object"},
        {"required", {"command"}},
        {"properties",
         {{"command",
           type("string", {{"description", "Shell command to run (bash). Supports pipes, &&, ;, redirections."}})},
          {"cwd", type("string", {{"description",
                                   "Working directory, relative to the session's current directory. Default: the "
                                   "session's current directory."}})},
          {"env",
           {{"type", "object"},
            {"additionalProperties", type("string")},
            {"description", "Extra environment variables for the command."}}},
          {"timeout", type("number", {{"description", "Kill the command after this many seconds."}})},
          {"pty", type("boolean", {{"description",
                                    "Run in a terminal (default true: stdout and stderr merged). false keeps stdout "
                                    "and stderr apart and gives no terminal."}})},
          {"stdin", type("string", {{"description", "Text written to the command's standard input."}})}}}}},
      {"InputRequest",
       {{"type", "object"},
        {"required", {"input"}},
        {"properties",
         {{"input",
           type("string",
                {{"description",
                  "Text to send. Escapes are decoded: \\n for Enter, \\x03 for Ctrl-C, \\x04 for Ctrl-D."}})}}}}},
      {"WriteRequest",
       {{"type", "object"},
        {"required", {"path", "content"}},
        {"properties",
         {{"path", type("string", {{"description", "File to write (parent directories are created)."}})},
          {"content", type("string", {{"description", "The whole new content of the file."}})}}}}},
      {"Replacement",
       {{"type", "object"},
        {"required", {"target", "replacement"}},
        {"properties",
         {{"target", type("string", {{"description", "Exact text to find (whitespace and indentation included)."}})},
          {"replacement", type("string", {{"description", "Text to put in its place."}})},
          {"start_line", type("integer", {{"description", "Only search from this line (1-based)."}})},
          {"end_line", type("integer", {{"description", "Only search up to this line (inclusive)."}})},
          {"allow_multiple",
           type("boolean",
                {{"description", "Replace every occurrence; otherwise the target must occur exactly once."}})}}}}},
      {"ReplaceRequest",
       {{"type", "object"},
        {"required", {"path", "replacements"}},
        {"properties",
         {{"path", type("string", {{"description", "File to edit."}})},
          {"replacements",
           {{"type", "array"}, {"items", ref("Replacement")}, {"description", "Edits applied in order."}}}}}}},
      {"UserTerminalInput",
       {{"type", "object"},
        {"required", {"text"}},
        {"properties",
         {{"text", type("string", {{"description", "Text to type, as it is (no escapes are decoded)."}})},
          {"enter",
           type("boolean", {{"default", true}, {"description", "Press Enter after the text (default true)."}})}}}}},
      {"OutputChunk", output_chunk},
      {"Process", process},
  };
}

json paths() {
  json p = json::object();
  std::string note = kPathNote;

  p["/files/list"]["get"] =
      operation("list_files", "List a directory",
                ("Lists the files and directories in a directory with their type, size, modification time "
                 "and whether you can write them." +
                 note)
                    .c_str(),
                {param("directory", "query", type("string", {{"default", "."}}),
                       "Directory to list (default: the current directory).")},
                with_ok(errors({{"404", "Directory not found."}, {"403", "Outside the home directory."}}),
                        json_response("The entries, sorted by name.", {{"type", "object"}})));

  p["/files/read"]["get"] =
      operation("read_file", "Read a file",
                ("Reads a text file and returns its lines (optionally a range of lines, 1-based and "
                 "inclusive) with the total line count. Long files are cut to a byte budget: when the answer "
                 "says truncated, read on with start_line = next_start_line (and start_column = "
                 "next_start_column when a long line was cut). Text in other encodings is decoded. Images "
                 "are returned as images; other binary files are refused." +
                 note)
                    .c_str(),
                {param("path", "query", type("string"), "File to read.", true),
                 param("start_line", "query", type("integer", {{"minimum", 1}}), "First line to return (1-based)."),
                 param("start_column", "query", type("integer", {{"minimum", 1}}),
                       "Byte position in start_line to begin at (1-based): the next_start_column of a line cut short."),
                 param("end_line", "query", type("integer", {{"minimum", 1}}), "Last line to return (inclusive).")},
                with_ok(errors({{"404", "File not found."},
                                {"403", "Outside the home directory."},
                                {"415", "A binary file that is not an image."}}),
                        json_response("The content.", {{"type", "object"}})));

  p["/files/display"]["get"] = operation(
      "display_file", "Show a file to the user",
      ("Shows a file to the user in the chat interface (a preview they can open). Use it when the "
       "user should see a file you made, such as an HTML page, an image or a document. Answers "
       "whether the file exists." +
       note)
          .c_str(),
      {param("path", "query", type("string"), "File to show.", true)},
      with_ok(errors({{"403", "Outside the home directory."}}),
              json_response(
                  "Whether it exists.",
                  {{"type", "object"}, {"properties", {{"path", type("string")}, {"exists", type("boolean")}}}})));

  p["/files/write"]["post"] =
      operation("write_file", "Write a file",
                ("Creates or replaces a whole text file (parent directories are created). To change part "
                 "of an existing file, use replace_file_content instead." +
                 note)
                    .c_str(),
                json::array_t{},
                with_ok(errors({{"403", "Outside the home directory."}, {"422", "Invalid arguments."}}),
                        json_response("Path and size written.", {{"type", "object"}})),
                body("WriteRequest"));

  p["/files/replace"]["post"] = operation(
      "replace_file_content", "Edit a file",
      ("Replaces exact text in a file, one or more edits applied in order. Each target must occur "
       "exactly once unless allow_multiple is true; read the file first to copy the target "
       "exactly." +
       note)
          .c_str(),
      json::array_t{},
      with_ok(
          errors({{"404", "File not found."}, {"403", "Outside the home directory."}, {"422", "Invalid arguments."}}),
          json_response("Path and new size.", {{"type", "object"}})),
      body("ReplaceRequest"));

  p["/files/grep"]["get"] = operation(
      "grep_search", "Search file contents",
      ("Finds lines matching a regular expression (RE2 syntax) or a literal string in the files "
       "below a directory, or in one file." +
       note)
          .c_str(),
      {param("query", "query", type("string"), "The pattern to search for.", true),
       param("path", "query", type("string", {{"default", "."}}),
             "Directory or file to search (default: the current directory)."),
       param("regex", "query", type("boolean", {{"default", true}}), "false: the query is a literal string."),
       param("case_insensitive", "query", type("boolean", {{"default", false}}), "Ignore case."),
       param("include", "query", type("array", {{"items", type("string")}}),
             "Only files whose name matches one of these globs, e.g. *.py."),
       param("match_per_line", "query", type("boolean", {{"default", true}}), "false: list matching files only."),
       param("max_results", "query", type("integer", {{"default", 50}, {"minimum", 1}, {"maximum", 500}}),
             "Most matches to return.")},
      with_ok(errors({{"404", "Search path not found."},
                      {"403", "Outside the home directory."},
                      {"422", "Invalid arguments."}}),
              json_response("Matches with file, line number and line.", {{"type", "object"}})));

  p["/files/glob"]["get"] =
      operation("glob_search", "Find files by name",
                ("Finds files and directories whose path matches a glob pattern such as **/*.py below a "
                 "directory." +
                 note)
                    .c_str(),
                {param("pattern", "query", type("string"), "Glob pattern, e.g. **/*.md.", true),
                 param("path", "query", type("string", {{"default", "."}}),
                       "Directory to search (default: the current directory)."),
                 param("exclude", "query", type("array", {{"items", type("string")}}), "Glob patterns to leave out."),
                 param("type", "query", type("string", {{"enum", {"any", "file", "directory"}}, {"default", "any"}}),
                       "Only files or only directories."),
                 param("max_results", "query", type("integer", {{"default", 50}, {"minimum", 1}, {"maximum", 500}}),
                       "Most matches to return.")},
                with_ok(errors({{"404", "Search directory not found."},
                                {"403", "Outside the home directory."},
                                {"422", "Invalid arguments."}}),
                        json_response("Matching paths.", {{"type", "object"}})));

  p["/execute"]["get"] = operation(
      "list_processes", "List your commands",
      "Lists the commands you started in this chat (running and recently finished) with their status and exit "
      "code.",
      json::array_t{},
      with_ok(errors({}), json_response("The commands.", {{"type", "array"}, {"items", {{"type", "object"}}}})));

  p["/execute"]["post"] =
      operation("run_command", "Run a shell command",
                "Runs a shell command in your own Linux environment (a private sandbox: your home "
                "directory, your processes; see the system prompt for its network rules) and returns its "
                "id, status and output. Set `wait` to wait up to that many seconds for it to finish; if it "
                "is still running, poll with get_process_status passing the returned next_offset as "
                "offset, send keystrokes with send_process_input, and stop it with kill_process. The "
                "command starts in the session's current directory.",
                {param("wait", "query", type("number", {{"minimum", 0}, {"maximum", 300}}),
                       "Seconds to wait for the command to finish before answering (0 to 300). Output so far is "
                       "included either way."),
                 param("tail", "query", type("integer", {{"minimum", 1}}), "Return only the last N lines of output.")},
                with_ok(errors({{"404", "Working directory not found."},
                                {"403", "Working directory outside the home."},
                                {"422", "Invalid arguments."}}),
                        json_response("The process.", ref("Process"))),
                body("ExecRequest"));

  p["/execute/{id}/status"]["get"] = operation(
      "get_process_status", "Get a command's status and output",
      "Returns the status, exit code and output of a command you started. Pass the next_offset "
      "of the previous answer as offset to get only new output; with wait, waits up to that "
      "many seconds for the command to finish (with an offset, it also returns as soon as new "
      "output arrives).",
      {param("id", "path", type("string"), "The command's id."),
       param("wait", "query", type("number", {{"minimum", 0}, {"maximum", 300}}), "Seconds to wait (0 to 300)."),
       param("offset", "query", type("integer", {{"minimum", 0}}),
             "next_offset from the previous answer: only output after it is returned."),
       param("tail", "query", type("integer", {{"minimum", 1}}), "Return only the last N lines of output.")},
      with_ok(errors({{"404", "Process not found."}, {"422", "Invalid arguments."}}),
              json_response("The process.", ref("Process"))));

  p["/execute/{id}/input"]["post"] =
      operation("send_process_input", "Send input to a running command",
                "Types text into a running command (its terminal or standard input). Include \\n to press "
                "Enter; \\x03 is Ctrl-C.",
                {param("id", "path", type("string"), "The command's id.")},
                with_ok(errors({{"404", "Process not found."}, {"400", "The command has already exited."}}),
                        json_response("Sent.", {{"type", "object"}})),
                body("InputRequest"));

  p["/execute/{id}"]["delete"] =
      operation("kill_process", "Stop a command",
                "Stops a running command and everything it started: SIGTERM first, SIGKILL if it does not "
                "exit within a few seconds (or at once with force=true).",
                {param("id", "path", type("string"), "The command's id."),
                 param("force", "query", type("boolean", {{"default", false}}), "Send SIGKILL at once.")},
                with_ok(errors({{"404", "Process not found."}}), json_response("Stopped.", {{"type", "object"}})));

  p["/user-terminal/read"]["get"] = operation(
      "read_user_terminal", "Read the user's terminal",
      "Returns the last lines of the terminal the user has open beside this chat, as plain text (colours and "
      "other escape sequences removed): what they ran and what it printed, or a prompt waiting for an answer. "
      "Answers 404 when the user has no terminal open in this chat.",
      {param("lines", "query", type("integer", {{"default", 100}, {"minimum", 1}, {"maximum", 10000}}),
             "How many of the last lines to return (default 100).")},
      with_ok(errors({{"404", "No terminal open in this chat."}}),
              json_response(
                  "The recent output.",
                  {{"type", "object"},
                   {"properties",
                    {{"terminal_id", type("string")}, {"lines", type("integer")}, {"output", type("string")}}}})));

  p["/user-terminal/input"]["post"] =
      operation("send_user_terminal_input", "Type into the user's terminal",
                "Types text into the terminal the user has open beside this chat, then presses Enter unless enter is "
                "false: to answer a prompt of a program running there or run a command the user can watch. Read the "
                "terminal first (read_user_terminal) to see what it waits for, and again afterwards for the result. "
                "Answers 404 when the user has no terminal open in this chat.",
                json::array_t{},
                with_ok(errors({{"404", "No terminal open in this chat."}, {"422", "Invalid arguments."}}),
                        json_response("Typed.", {{"type", "object"}})),
                body("UserTerminalInput"));

  // Documented for the front end, not a tool: without an operationId Open WebUI makes no tool
  // of it, so the model cannot delete the chat it works in.
  json delete_workspace = operation(
      "", "Delete a chat's workspace",
      "Under /p/{profile} with isolation \"context\": stops the context's box and moves its workspace to "
      "the user's trash as one item (POST /files/trash/restore puts it back).",
      {param("context", "path", type("string"), "The context id, URL-encoded (chat:<id>, automation:<id>).")},
      with_ok(
          errors({{"400", "Malformed context id."},
                  {"404", "No workspace for this context, or the profile keeps none."},
                  {"409", "The context 'default' is the user's home."}}),
          json_response("In the trash.",
                        {{"type", "object"},
                         {"properties",
                          {{"context", type("string")}, {"profile", type("string")}, {"trash_id", type("string")}}}})));
  delete_workspace.erase("operationId");
  p["/workspaces/{context}"]["delete"] = std::move(delete_workspace);
  return p;
}

}  // namespace

json openapi_document(std::string_view version) {
  return {{"openapi", "3.1.0"},
          {"info",
           {{"title", "agentbox"},
            {"version", std::string(version)},
            {"description",
             "Your own Linux environment: run commands and read and write files in your home "
             "directory. Nothing here is shared with other users."}}},
          {"paths", paths()},
          {"components",
           {{"schemas", schemas()}, {"securitySchemes", {{"HTTPBearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
          {"security", json::array({{{"HTTPBearer", json::array()}}})}};
}

}  // namespace agentbox::api
