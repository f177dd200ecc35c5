// The /files/* routes' errors, handlers called directly in memory (support/route_caller.hpp):
// no listener and no socket, the work on a file pool as the daemon runs it, the daemon's map of
// errors to statuses. Each documented error is the client's answer, status and detail: 422 for
// a parameter or field of the wrong shape, 400 for a NUL byte or a body that is not JSON, 404 for
// a path that is not there, 403 for one outside the home (by name, by "..", through a symlink,
// or the home itself where that is refused), 413 past a read, upload or archive limit; and a
// refused request leaves nothing behind.
//
// Integration, not unit: the account's home is made as its uid (chown) and the file work runs
// under that uid (setfsuid), which takes root. The same routes over TCP, with their successes:
// api_files_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "accounts/directory.hpp"
#include "api/errors.hpp"
#include "api/files.hpp"
#include "api/services.hpp"
#include "store/schema.hpp"
#include "support/route_caller.hpp"
#include "support/scratch_dir.hpp"
#include "util/fair_pool.hpp"

namespace agentbox::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::RouteReply;
using ::testing::StartsWith;
namespace stdfs = std::filesystem;

using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr uint64_t kUploadMax = 1024;   // bytes of one uploaded file
constexpr uint64_t kTextMax = 4096;     // bytes of a text file /files/read reads
constexpr uint64_t kArchiveMax = 8192;  // bytes of files one archive takes

class FileHandlersTest : public ::testing::Test {
 protected:
  FileHandlersTest() {
    Services s;
    s.accounts = &accounts_;
    s.callers = &callers_;
    s.file_pool = pool_;
    s.file_options.upload_max_bytes = kUploadMax;
    s.file_options.read.max_text_bytes = kTextMax;
    s.file_options.archive.max_input_bytes = kArchiveMax;
    Router router;
    router.map_errors(error_map);  // as register_routes does: FsError and the like as statuses
    add_file_routes(router, s);
    routes_ = std::make_unique<testing::RouteCaller>(std::move(router), spool_.path());
    alice_ = resolve("alice");
    bob_ = resolve("bob");
  }

  accounts::Caller resolve(const std::string& user) {
    Request req;
    req.headers.set("X-User-Id", user);
    return callers_.resolve(req);
  }

  static Headers as(const std::string& user) { return {{"X-User-Id", user}, {"X-Session-Id", "chat-1"}}; }
  RouteReply get(const std::string& target) { return routes_->get(target, as("alice")); }
  RouteReply post(const std::string& target, const std::string& body) {
    return routes_->post(target, body, as("alice"));
  }
  RouteReply post(const std::string& target, const json& body) { return post(target, body.dump()); }
  RouteReply del(const std::string& target) { return routes_->del(target, as("alice")); }
  RouteReply upload(const std::string& target, const std::string& body) {
    Headers h = as("alice");
    h.emplace_back("Content-Type", "multipart/form-data; boundary=b");
    return routes_->call({http::verb::post, target, h, body});
  }
  static std::string multipart(const std::string& filename_field, const std::string& content) {
    return "--b\r\nContent-Disposition: form-data; name=\"file\"; " + filename_field + "\r\n\r\n" + content +
           "\r\n--b--\r\n";
  }

  // alice's home on the host, and files put there as she would have.
  std::string host(const std::string& rel = "") const {
    return callers_.host_home(alice_.account) + (rel.empty() ? "" : "/" + rel);
  }
  void put(const std::string& rel, const std::string& data) {
    std::ofstream(host(rel), std::ios::binary) << data;
    ASSERT_EQ(::chown(host(rel).c_str(), alice_.account.uid, alice_.account.gid), 0);
  }
  void put_dir(const std::string& rel) {
    ASSERT_EQ(::mkdir(host(rel).c_str(), 0755), 0);
    ASSERT_EQ(::chown(host(rel).c_str(), alice_.account.uid, alice_.account.gid), 0);
  }
  void put_link(const std::string& rel, const std::string& target) {
    ASSERT_EQ(::symlink(target.c_str(), host(rel).c_str()), 0);
    ASSERT_EQ(::lchown(host(rel).c_str(), alice_.account.uid, alice_.account.gid), 0);
  }
  // What alice's home holds, by relative path.
  std::vector<std::string> home_entries() const {
    std::vector<std::string> out;
    for (const auto& e : stdfs::recursive_directory_iterator(host()))
      out.push_back(e.path().lexically_relative(host()).string());  // relative() would follow d/etc
    std::sort(out.begin(), out.end());
    return out;
  }

  testing::ScratchDir dir_{"abx-file-handlers"};
  testing::ScratchDir spool_{"abx-file-handlers-spool"};
  AccountStore accounts_{open_state_db(dir_.path()), UidRange{4400000, 1000}};
  accounts::AccountDirectory callers_{accounts_, dir_.path()};
  std::shared_ptr<FairPool> pool_ = std::make_shared<FairPool>(2, 2, "files-direct");
  std::unique_ptr<testing::RouteCaller> routes_;
  accounts::Caller alice_, bob_;
};

// The in-memory calls answer as the daemon does when nothing is wrong: JSON from a pool thread,
// and a file's bytes through the writer's send_file.
TEST_F(FileHandlersTest, AWriteReadAndViewAnswerInMemory) {
  RouteReply w = post("/files/write", json{{"path", "notes/a.txt"}, {"content", "one\ntwo\n"}});
  ASSERT_TRUE(w.answered);
  ASSERT_EQ(w.code(), 200u) << w.body;
  EXPECT_EQ(w.js(), (json{{"path", alice_.box_home + "/notes/a.txt"}, {"size", 8}}));
  RouteReply r = get("/files/read?path=notes/a.txt&start_line=2");
  ASSERT_EQ(r.code(), 200u) << r.body;
  EXPECT_EQ(r.js()["content"], "two\n");
  RouteReply v = get("/files/view?path=" + alice_.box_home + "/notes/a.txt");
  ASSERT_EQ(v.code(), 200u) << v.body;
  EXPECT_EQ(v.body, "one\ntwo\n");
}

TEST_F(FileHandlersTest, ParametersAndFieldsOfTheWrongShapeAre422) {
  struct Case {
    http::verb method;
    std::string target;
    std::string body;
    std::string detail;
  };
  const std::string max_results = "Query parameter 'max_results' must be an integer from 1 to 500";
  const Case cases[] = {
      {http::verb::get, "/files/read", "", "Query parameter 'path' is required"},
      {http::verb::get, "/files/read?path=a&start_line=0", "",
       "Query parameter 'start_line' must be an integer from 1 to 9223372036854775807"},
      {http::verb::get, "/files/read?path=a&end_line=x", "",
       "Query parameter 'end_line' must be an integer from 1 to 9223372036854775807"},
      {http::verb::get, "/files/display", "", "Query parameter 'path' is required"},
      {http::verb::get, "/files/view", "", "Query parameter 'path' is required"},
      {http::verb::get, "/files/grep", "", "Query parameter 'query' is required"},
      {http::verb::get, "/files/grep?query=a&max_results=0", "", max_results},
      {http::verb::get, "/files/grep?query=a&max_results=501", "", max_results},
      {http::verb::get, "/files/grep?query=a&regex=maybe", "",
       "Query parameter 'regex' must be a boolean (true or false)"},
      {http::verb::get, "/files/glob", "", "Query parameter 'pattern' is required"},
      {http::verb::get, "/files/glob?pattern=*&type=link", "",
       "Query parameter 'type' must be one of any, file, directory"},
      {http::verb::delete_, "/files/delete", "", "Query parameter 'path' is required"},
      {http::verb::post, "/files/write", R"({"path": "a"})", "Field 'content' is required and must be a string"},
      {http::verb::post, "/files/write", R"({"content": "x"})", "Field 'path' is required and must be a string"},
      {http::verb::post, "/files/write", R"({"path": 5, "content": "x"})",
       "Field 'path' is required and must be a string"},
      {http::verb::post, "/files/write", "[]", "Request body must be a JSON object"},
      {http::verb::post, "/files/replace", R"({"path": "a"})", "Field 'replacements' is required and must be a list"},
      {http::verb::post, "/files/replace", R"({"path": "a", "replacements": [5]})",
       "Each replacement must be an object"},
      {http::verb::post, "/files/replace",
       R"({"path": "a", "replacements": [{"target": "a", "replacement": "b", "start_line": 0}]})",
       "Field 'start_line' must be an integer of at least 1"},
      {http::verb::post, "/files/replace",
       R"({"path": "a", "replacements": [{"target": "a", "replacement": "b", "allow_multiple": "yes"}]})",
       "Field 'allow_multiple' must be a boolean"},
      {http::verb::post, "/files/mkdir", "{}", "Field 'path' is required and must be a string"},
      {http::verb::post, "/files/move", R"({"source": "a"})", "Field 'destination' is required and must be a string"},
      {http::verb::post, "/files/cwd", R"({"wrong": "a"})", "Field 'path' is required and must be a string"},
      {http::verb::post, "/files/archive", "{}", "Field 'paths' is required and must be a list of paths"},
      {http::verb::post, "/files/archive", R"({"paths": [1]})", "Field 'paths' must be a list of strings"},
      {http::verb::post, "/files/upload", multipart("filename=\"x\"", "X"), "Query parameter 'directory' is required"},
  };
  for (const Case& c : cases) {
    RouteReply r = routes_->call({c.method, c.target, as("alice"), c.body});
    ASSERT_TRUE(r.answered) << c.target << " " << c.body;
    EXPECT_EQ(r.code(), 422u) << c.target << " " << c.body << ": " << r.body;
    EXPECT_EQ(r.detail(), c.detail) << c.target << " " << c.body;
  }
  EXPECT_TRUE(home_entries().empty()) << "a refused request writes nothing";
}

TEST_F(FileHandlersTest, NulBytesAndBodiesThatAreNotJsonAre400) {
  const std::string nul("a\0b", 3);
  const std::pair<std::string, json> cases[] = {
      {"/files/write", {{"path", nul}, {"content", "x"}}},
      {"/files/mkdir", {{"path", nul}}},
      {"/files/move", {{"source", "a"}, {"destination", nul}}},
      {"/files/replace", {{"path", nul}, {"replacements", json::array()}}},
      {"/files/archive", {{"paths", {nul}}}},
      {"/files/cwd", {{"path", nul}}},
  };
  put("a", "x");
  for (const auto& [target, body] : cases) {
    RouteReply r = post(target, body);
    EXPECT_EQ(r.code(), 400u) << target << ": " << r.body;
    EXPECT_EQ(r.detail(), "Path contains a NUL byte") << target;
  }
  // In a multipart file name (percent-encoded, so the body itself holds none).
  RouteReply up = upload("/files/upload?directory=up", multipart("filename*=UTF-8''..%00x", "X"));
  EXPECT_EQ(up.code(), 400u) << up.body;
  EXPECT_THAT(up.detail(), HasSubstr("NUL"));

  for (const std::string raw :
       {"{", "", R"({"path": "f", "content": "x",})", "{\"path\": \"f\", \"content\": \"\xff\"}"}) {
    RouteReply r = post("/files/write", raw);
    EXPECT_EQ(r.code(), 400u) << raw;
    EXPECT_THAT(r.detail(), StartsWith("Invalid JSON body: ")) << raw;
  }
  EXPECT_EQ(home_entries(), std::vector<std::string>{"a"}) << "a refused request writes nothing";
}

TEST_F(FileHandlersTest, PathsThatAreNotThereAre404) {
  const std::string missing = alice_.box_home + "/nope";
  struct Case {
    http::verb method;
    std::string target;
    std::string body;
    std::string detail;
  };
  const Case cases[] = {
      {http::verb::get, "/files/read?path=nope", "", "File not found: " + missing},
      {http::verb::get, "/files/view?path=nope", "", "File not found: " + missing},
      {http::verb::get, "/files/serve" + missing, "", "File not found: " + missing},
      {http::verb::get, "/files/list?directory=nope", "", "Directory not found: " + missing},
      {http::verb::get, "/files/grep?query=a&path=nope", "", "Search path not found: " + missing},
      {http::verb::get, "/files/glob?pattern=*&path=nope", "", "Search directory not found: " + missing},
      {http::verb::delete_, "/files/delete?path=nope", "", "Path not found: " + missing},
      {http::verb::post, "/files/move", R"({"source": "nope", "destination": "b"})",
       "Source path not found: " + missing},
      {http::verb::post, "/files/archive", R"({"paths": ["nope"]})", "Path not found: " + missing},
      {http::verb::post, "/files/replace", R"({"path": "nope", "replacements": []})", "File not found: " + missing},
  };
  for (const Case& c : cases) {
    RouteReply r = routes_->call({c.method, c.target, as("alice"), c.body});
    EXPECT_EQ(r.code(), 404u) << c.target << ": " << r.body;
    EXPECT_EQ(r.detail(), c.detail) << c.target;
  }
  RouteReply cwd = post("/files/cwd", json{{"path", "nope"}});
  EXPECT_EQ(cwd.code(), 404u) << cwd.body;
  // Where the API answers a question rather than an error, a missing path is an answer.
  RouteReply shown = get("/files/display?path=nope");
  EXPECT_EQ(shown.code(), 200u);
  EXPECT_EQ(shown.js(), (json{{"path", missing}, {"exists", false}}));
  EXPECT_TRUE(home_entries().empty());
}

TEST_F(FileHandlersTest, PathsOutsideTheHomeAre403) {
  put_dir("d");
  put_link("d/etc", "/etc");
  const std::string other = bob_.box_home + "/x";
  const std::pair<http::verb, std::string> by_name[] = {
      {http::verb::get, "/files/read?path=/etc/passwd"},
      {http::verb::get, "/files/read?path=../../etc/passwd"},
      {http::verb::get, "/files/read?path=" + other},
      {http::verb::get, "/files/list?directory=/"},
      {http::verb::get, "/files/view?path=/etc/passwd"},
      {http::verb::get, "/files/serve/etc/passwd"},
      {http::verb::get, "/files/grep?query=root&path=/etc"},
      {http::verb::get, "/files/glob?pattern=*&path=" + bob_.box_home},
      {http::verb::delete_, "/files/delete?path=/etc/hostname"},
  };
  for (const auto& [method, target] : by_name) {
    RouteReply r = routes_->call({method, target, as("alice"), ""});
    EXPECT_EQ(r.code(), 403u) << target << ": " << r.body;
    EXPECT_THAT(r.detail(), StartsWith("Access denied: ")) << target;
    EXPECT_THAT(r.detail(), HasSubstr("is outside the home directory")) << target;
  }
  const std::pair<std::string, json> bodies[] = {
      {"/files/write", {{"path", dir_.path() + "/planted"}, {"content", "x"}}},
      {"/files/write", {{"path", other}, {"content", "x"}}},
      {"/files/mkdir", {{"path", "~/../bob"}}},
      {"/files/move", {{"source", "d"}, {"destination", "/tmp/d"}}},
      {"/files/archive", {{"paths", {"/etc"}}}},
      {"/files/cwd", {{"path", "/etc"}}},
  };
  for (const auto& [target, body] : bodies) {
    RouteReply r = post(target, body);
    EXPECT_EQ(r.code(), 403u) << target << " " << body << ": " << r.body;
    EXPECT_THAT(r.detail(), StartsWith("Access denied: ")) << target;
  }
  RouteReply up = upload("/files/upload?directory=/etc", multipart("filename=\"x\"", "X"));
  EXPECT_EQ(up.code(), 403u) << up.body;

  // Through a symlink in the home: the kernel keeps the walk inside it (openat2).
  for (const std::string target : {"/files/read?path=d/etc/passwd", "/files/view?path=d/etc/hostname"}) {
    RouteReply r = get(target);
    EXPECT_EQ(r.code(), 403u) << target << ": " << r.body;
    EXPECT_THAT(r.detail(),
                StartsWith("Access denied: path leads outside the home directory: " + alice_.box_home + "/d/etc/"))
        << target;
  }
  RouteReply w = post("/files/write", json{{"path", "d/etc/planted"}, {"content", "x"}});
  EXPECT_EQ(w.code(), 403u) << w.body;
  EXPECT_FALSE(stdfs::exists("/etc/planted"));

  // The home itself may not be deleted or moved.
  RouteReply d = del("/files/delete?path=~");
  EXPECT_EQ(d.code(), 403u);
  EXPECT_EQ(d.detail(), "Refusing to delete the home directory");
  RouteReply m = post("/files/move", json{{"source", "~"}, {"destination", "d/home"}});
  EXPECT_EQ(m.code(), 403u);
  EXPECT_EQ(m.detail(), "Refusing to move the home directory");

  EXPECT_FALSE(stdfs::exists(dir_.path() + "/planted"));
  EXPECT_FALSE(stdfs::exists("/tmp/d"));
  EXPECT_EQ(home_entries(), (std::vector<std::string>{"d", "d/etc"}));
}

TEST_F(FileHandlersTest, ReadsUploadsAndArchivesPastTheirLimitsAre413) {
  put("big.txt", std::string(kTextMax + 1, 'x'));
  RouteReply r = get("/files/read?path=big.txt");
  EXPECT_EQ(r.code(), 413u) << r.body;
  EXPECT_EQ(r.detail(),
            "File too large to read (4097 bytes, limit 4096): use run_command with head, tail, sed or "
            "grep on " +
                alice_.box_home + "/big.txt");
  put("fits.txt", std::string(kTextMax, 'x'));
  EXPECT_EQ(get("/files/read?path=fits.txt").code(), 200u) << "at the limit is not past it";

  // The route's body limit leaves room for multipart overhead, so the handler sees this one.
  RouteReply up = upload("/files/upload?directory=up", multipart("filename=\"big\"", std::string(kUploadMax + 1, 'u')));
  EXPECT_EQ(up.code(), 413u) << up.body;
  EXPECT_EQ(up.detail(), "Upload larger than 1024 bytes");
  EXPECT_FALSE(stdfs::exists(host("up/big"))) << "a refused upload leaves no file";
  RouteReply fits = upload("/files/upload?directory=up", multipart("filename=\"fits\"", std::string(kUploadMax, 'u')));
  EXPECT_EQ(fits.code(), 200u) << fits.body;

  put_dir("arc");
  put("arc/one", std::string(kArchiveMax / 2, '1'));
  put("arc/two", std::string(kArchiveMax / 2, '2'));
  EXPECT_EQ(post("/files/archive", json{{"paths", {"arc"}}}).code(), 200u) << "at the limit is not past it";
  put("arc/three", "3");
  RouteReply a = post("/files/archive", json{{"paths", {"arc"}}});
  EXPECT_EQ(a.code(), 413u) << a.body;
  EXPECT_THAT(a.detail(), StartsWith("Archive input is more than 8192 bytes"));
}

}  // namespace
}  // namespace agentbox::api
