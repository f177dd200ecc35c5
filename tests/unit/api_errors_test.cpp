// The API's one error map as a table: each exception a handler may let escape, with and without
// a start named, and the status, detail and Retry-After the client gets.
#include "api/errors.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <functional>
#include <string>

#include "agent/chat_request.hpp"
#include "box/box_error.hpp"
#include "box/spawn_result.hpp"
#include "exec/terminals.hpp"
#include "fs/fs_error.hpp"
#include "support/log_capture.hpp"

namespace agentbox::api {
namespace {

struct Row {
  const char* name;
  std::function<void()> raise;
  std::string_view starting;
  unsigned status;
  std::string detail;
  std::string retry_after;  // "" when none
};

[[noreturn]] void raise_fs(FsErrorKind kind) { throw FsError(kind, "No such file or directory: /home/alice/x"); }

const Row kRows[] = {
    {"HttpError", [] { throw HttpError(http::status::conflict, "busy"); }, {}, 409, "busy", ""},
    {"HttpError while starting", [] { throw HttpError(http::status::conflict, "busy"); }, "Command", 409, "busy", ""},
    {"FsError bad_request",
     [] { raise_fs(FsErrorKind::bad_request); },
     {},
     400,
     "No such file or directory: /home/alice/x",
     ""},
    {"FsError forbidden",
     [] { raise_fs(FsErrorKind::forbidden); },
     {},
     403,
     "No such file or directory: /home/alice/x",
     ""},
    {"FsError not_found",
     [] { raise_fs(FsErrorKind::not_found); },
     {},
     404,
     "No such file or directory: /home/alice/x",
     ""},
    {"FsError conflict",
     [] { raise_fs(FsErrorKind::conflict); },
     {},
     409,
     "No such file or directory: /home/alice/x",
     ""},
    {"FsError unsupported_media",
     [] { raise_fs(FsErrorKind::unsupported_media); },
     {},
     415,
     "No such file or directory: /home/alice/x",
     ""},
    {"FsError too_large",
     [] { raise_fs(FsErrorKind::too_large); },
     {},
     413,
     "No such file or directory: /home/alice/x",
     ""},
    {"FsError insufficient_storage",
     [] { raise_fs(FsErrorKind::insufficient_storage); },
     {},
     507,
     "No such file or directory: /home/alice/x",
     ""},
    {"BoxUnavailable with a retry",
     [] { throw BoxUnavailable("box of alice did not start within 10 s", 5); },
     {},
     503,
     "box of alice did not start within 10 s",
     "5"},
    {"BoxUnavailable without one", [] { throw BoxUnavailable("the host runs all the boxes it may"); }, "Command", 503,
     "the host runs all the boxes it may", ""},
    {"BoxLimitReached", [] { throw BoxLimitReached("this box holds all the 256 ptys it may"); }, "Terminal", 429,
     "this box holds all the 256 ptys it may", ""},
    {"TerminalLimitError",
     [] { throw exec::TerminalLimitError(16); },
     {},
     429,
     "Too many terminals: this account may have 16 open at once; close one first",
     ""},
    {"ChatRequestError",
     [] { throw agent::ChatRequestError("messages must not be empty"); },
     {},
     400,
     "messages must not be empty",
     ""},
    {"SpawnError of a command", [] { throw SpawnError("chdir(/home/alice/gone): No such file or directory", ENOENT); },
     "Command", 400, "Command could not start: chdir(/home/alice/gone): No such file or directory", ""},
    {"SpawnError of a terminal", [] { throw SpawnError("execve(bash): Permission denied", EACCES); }, "Terminal", 400,
     "Terminal could not start: execve(bash): Permission denied", ""},
    {"SpawnError of nothing named",
     [] { throw SpawnError("execve(x): No such file or directory", ENOENT); },
     {},
     400,
     "Could not start: execve(x): No such file or directory",
     ""},
    {"E2BIG while starting", [] { throw Error("spawn message of 3 MiB", E2BIG); }, "Command", 413,
     "Command and environment are too large to start", ""},
    {"E2BIG elsewhere", [] { throw Error("spawn message of 3 MiB", E2BIG); }, {}, 500, "Internal Server Error", ""},
    {"Error", [] { throw Error("open(/var/lib/agentbox/secret): Permission denied", EACCES); }, "Command", 500,
     "Internal Server Error", ""},
    {"std::exception", [] { throw std::runtime_error("map::at"); }, {}, 500, "Internal Server Error", ""},
    {"not an exception", [] { throw 42; }, {}, 500, "Internal Server Error", ""},
};

std::exception_ptr caught(const std::function<void()>& raise) {
  try {
    raise();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

TEST(ApiErrors, EachRowOfTheTable) {
  for (const Row& row : kRows) {
    SCOPED_TRACE(row.name);
    const Response r = error_response_for(caught(row.raise), "POST /execute", row.starting);
    EXPECT_EQ(static_cast<unsigned>(r.status), row.status);
    EXPECT_EQ(nlohmann::json::parse(r.body), (nlohmann::json{{"detail", row.detail}}));
    EXPECT_EQ(r.headers[http::field::content_type], "application/json");
    EXPECT_EQ(std::string(r.headers[http::field::retry_after]), row.retry_after);
  }
}

TEST(ApiErrors, TheRouteTablesMapIsTheSameFunction) {
  for (const Row& row : kRows) {
    if (!row.starting.empty()) continue;
    SCOPED_TRACE(row.name);
    const Response a = error_map(caught(row.raise), "GET /x");
    const Response b = error_response_for(caught(row.raise), "GET /x");
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.body, b.body);
  }
}

TEST(ApiErrors, A500IsLoggedWithItsContextAndRealMessage) {
  testing::LogCapture log;
  const Response r =
      error_response_for(caught([] { throw Error("open(/var/lib/agentbox/secret): EACCES"); }), "GET /files/read");
  EXPECT_EQ(r.status, http::status::internal_server_error);
  EXPECT_EQ(r.body.find("secret"), std::string::npos);
  EXPECT_NE(
      log.text().find("[http] [error] GET /files/read: unhandled exception: open(/var/lib/agentbox/secret): EACCES"),
      std::string::npos)
      << log.text();
}

}  // namespace
}  // namespace agentbox::api
