// The /files/* routes through a real HttpServer on 127.0.0.1:0, with a temporary state dir and
// two accounts (alice, bob): each route's success shape and documented errors, Range on view
// and serve, streamed uploads and downloads that do not buffer whole files, zip archives read
// back with libzip, ownership of what is created, and isolation: bob reaches nothing of
// alice's through any route, whatever path or link he tries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "accounts/directory.hpp"
#include "api/errors.hpp"
#include "api/file_transfer.hpp"
#include "api/files.hpp"
#include "api/services.hpp"
#include "fs/fs_identity.hpp"
#include "http/byte_range.hpp"
#include "http/offload.hpp"
#include "http/response_writer.hpp"
#include "http/server.hpp"
#include "store/schema.hpp"
#include "support/raw_socket.hpp"
#include "util/error.hpp"

namespace agentbox::api {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace stdfs = std::filesystem;
using tcp = net::ip::tcp;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kKey[] = "file-routes-test-key";
constexpr char kSecret[] = "ALICE-SECRET-7f3a";

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Reply {
  unsigned status = 0;
  http::fields headers;
  std::string body;
  json js() const {
    try {
      return json::parse(body);
    } catch (const std::exception&) {
      ADD_FAILURE() << "not JSON: " << body.substr(0, 200);
      return {};
    }
  }
  std::string detail() const { return js().value("detail", ""); }
  std::string header(http::field f) const { return std::string(headers[f]); }
};

// Percent-encodes a query value.
std::string enc(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// One request on a fresh connection with a Beast client; bounded by a 30 s deadline.
Reply fetch(uint16_t port, http::verb method, const std::string& target, const Headers& headers,
            std::string body = {}) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == http::verb::post) {
    req.body() = std::move(body);
    req.prepare_payload();
  }
  Reply reply;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(512ull << 20);
  beast::error_code ec;
  stream.expires_after(30s);
  http::async_write(stream, req, [&](beast::error_code e, std::size_t) {
    if (e) {
      ec = e;
      return;
    }
    http::async_read(stream, buffer, parser, [&](beast::error_code e2, std::size_t) { ec = e2; });
  });
  ioc.run();
  EXPECT_FALSE(ec) << method << " " << target << ": " << ec.message();
  auto res = parser.release();
  reply.status = res.result_int();
  reply.headers = res.base();
  reply.body = std::move(res.body());
  return reply;
}

// A raw HTTP/1.1 exchange for bodies too large to hold: the request body comes from `next`
// (called until it returns false), the response body is only counted unless `keep` is set,
// and `on_body` sees every piece with its offset. Connection: close ends the response.
struct RawReply {
  unsigned status = 0;
  std::string head;
  uint64_t body_bytes = 0;
  std::string body;
};

RawReply raw_exchange(uint16_t port, const std::string& head, const std::function<bool(std::string&)>& next = {},
                      bool keep = true, const std::function<void(uint64_t, std::string_view)>& on_body = {}) {
  UniqueFd fd = testing::connect_loopback(port, 30);
  RawReply reply;
  if (!testing::send_all(fd.get(), head)) ADD_FAILURE() << "sending the head failed";
  std::string piece;
  while (next && next(piece)) {
    if (!testing::send_all(fd.get(), piece)) break;  // the server may answer early (413) and close
  }
  std::string buf(1 << 20, '\0');
  bool in_body = false;
  for (;;) {
    ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view data(buf.data(), static_cast<size_t>(n));
    if (!in_body) {
      reply.head.append(data);
      size_t end = reply.head.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      data = std::string_view(reply.head).substr(end + 4);
      std::string rest(data);
      reply.head.resize(end + 4);
      in_body = true;
      if (on_body && !rest.empty()) on_body(0, rest);
      if (keep) reply.body += rest;
      reply.body_bytes += rest.size();
      continue;
    }
    if (on_body) on_body(reply.body_bytes, data);
    if (keep) reply.body.append(data);
    reply.body_bytes += data.size();
  }
  if (reply.head.size() > 12) reply.status = static_cast<unsigned>(std::stoul(reply.head.substr(9, 3)));
  return reply;
}

// The process's peak resident memory since the last reset_peak_rss().
uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// Entry name → contents of a zip held in memory.
std::map<std::string, std::string> unzip(const std::string& bytes) {
  std::map<std::string, std::string> out;
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  zip_t* za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err) : nullptr;
  if (!za) {
    ADD_FAILURE() << "not a zip: " << zip_error_strerror(&err);
    if (src) zip_source_free(src);
    zip_error_fini(&err);
    return out;
  }
  char buf[65536];
  for (zip_int64_t i = 0; i < zip_get_num_entries(za, 0); ++i) {
    std::string data;
    zip_file_t* f = zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0);
    for (zip_int64_t n; f && (n = zip_fread(f, buf, sizeof buf)) > 0;) data.append(buf, static_cast<size_t>(n));
    if (f) zip_fclose(f);
    out[zip_get_name(za, static_cast<zip_uint64_t>(i), 0)] = data;
  }
  zip_close(za);
  zip_error_fini(&err);
  return out;
}

class FileRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/abx-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    state_ = base_ + "/state";
    spool_ = base_ + "/spool";
    ASSERT_EQ(::mkdir(spool_.c_str(), 0700), 0);
    ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
    accounts_ = std::make_unique<AccountStore>(open_state_db(state_), UidRange{4200000, 1000});
    callers_ = std::make_unique<accounts::AccountDirectory>(*accounts_, state_);
    alice_ = resolve("alice");
    bob_ = resolve("bob");
    pool_ = std::make_shared<FairPool>(3, 2, "files");
    FileRoutesOptions o;
    o.upload_max_bytes = 128ull << 20;
    o.read.byte_budget = 64 << 10;
    port_ = start(o);
  }

  void TearDown() override {
    for (auto& s : servers_) s->stop();
    servers_.clear();
    pool_.reset();
    callers_.reset();
    accounts_.reset();
    stdfs::remove_all(base_);
  }

  accounts::Caller resolve(const std::string& user) {
    Request req;
    req.headers.set("X-User-Id", user);
    return callers_->resolve(req);
  }

  // The routes' services: the callers, file work on `pool` (the fixture's by default).
  Services services(FileRoutesOptions o = {}, std::shared_ptr<FairPool> pool = nullptr) {
    Services s;
    s.callers = callers_.get();
    s.file_pool = pool ? std::move(pool) : pool_;
    s.file_options = o;
    return s;
  }

  uint16_t start(FileRoutesOptions o, unsigned io_threads = 2) {
    Router router;
    add_file_routes(router, services(o));
    return serve(std::move(router), io_threads);
  }

  // A server of these routes; its port.
  uint16_t serve(Router router, unsigned io_threads) {
    HttpServerOptions ho;
    ho.threads = io_threads;
    ho.api_key = kKey;
    ho.spool_dir = spool_;
    ho.shutdown_grace = 3s;
    router.map_errors(error_map);  // as the daemon does: FsError and the like as statuses
    servers_.push_back(std::make_unique<HttpServer>(std::move(router), ho));
    uint16_t port = servers_.back()->listen("127.0.0.1", 0).port;
    servers_.back()->start();
    return port;
  }

  static Headers as(const std::string& user, const std::string& session = {}) {
    Headers h = {{"Authorization", std::string("Bearer ") + kKey}, {"X-User-Id", user}};
    if (!session.empty()) h.emplace_back("X-Session-Id", session);
    return h;
  }
  Reply get(const std::string& user, const std::string& target, Headers extra = {}) {
    Headers h = as(user);
    for (auto& e : extra) h.push_back(e);
    return fetch(port_, http::verb::get, target, h);
  }
  Reply post(const std::string& user, const std::string& target, const json& body, const std::string& session = {}) {
    return fetch(port_, http::verb::post, target, as(user, session), body.dump());
  }
  Reply del(const std::string& user, const std::string& target) {
    return fetch(port_, http::verb::delete_, target, as(user));
  }

  // Host paths of an account's home, and files put there as the account would have.
  std::string host(const accounts::Caller& c, const std::string& rel = "") const {
    return callers_->host_home(c.account) + (rel.empty() ? "" : "/" + rel);
  }
  void put(const accounts::Caller& c, const std::string& rel, const std::string& data, mode_t mode = 0644) {
    std::ofstream(host(c, rel), std::ios::binary) << data;
    ASSERT_EQ(::chmod(host(c, rel).c_str(), mode), 0);
    ASSERT_EQ(::chown(host(c, rel).c_str(), c.account.uid, c.account.gid), 0);
  }
  void put_dir(const accounts::Caller& c, const std::string& rel) {
    ASSERT_EQ(::mkdir(host(c, rel).c_str(), 0755), 0);
    ASSERT_EQ(::chown(host(c, rel).c_str(), c.account.uid, c.account.gid), 0);
  }
  void put_link(const accounts::Caller& c, const std::string& rel, const std::string& target) {
    ASSERT_EQ(::symlink(target.c_str(), host(c, rel).c_str()), 0);
    ASSERT_EQ(::lchown(host(c, rel).c_str(), c.account.uid, c.account.gid), 0);
  }
  static std::string read_host(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static struct stat stat_of(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return st;
  }

  std::string base_, state_, spool_;
  std::unique_ptr<AccountStore> accounts_;
  std::unique_ptr<accounts::AccountDirectory> callers_;
  accounts::Caller alice_, bob_;
  std::shared_ptr<FairPool> pool_;
  std::vector<std::unique_ptr<HttpServer>> servers_;
  uint16_t port_ = 0;
};

// ---------------------------------------------------------------- auth and caller

TEST_F(FileRoutesTest, EveryRouteNeedsTheKeyAndAUser) {
  const std::pair<http::verb, std::string> routes[] = {
      {http::verb::get, "/files/cwd"},
      {http::verb::post, "/files/cwd"},
      {http::verb::get, "/files/list"},
      {http::verb::get, "/files/read?path=a"},
      {http::verb::get, "/files/display?path=a"},
      {http::verb::get, "/files/view?path=a"},
      {http::verb::get, "/files/serve/a"},
      {http::verb::post, "/files/write"},
      {http::verb::post, "/files/replace"},
      {http::verb::post, "/files/mkdir"},
      {http::verb::delete_, "/files/delete?path=a"},
      {http::verb::post, "/files/move"},
      {http::verb::get, "/files/grep?query=a"},
      {http::verb::get, "/files/glob?pattern=a"},
      {http::verb::post, "/files/upload?directory=."},
      {http::verb::post, "/files/archive"},
  };
  for (const auto& [method, target] : routes) {
    Reply no_key = fetch(port_, method, target, {{"X-User-Id", "alice"}}, "{}");
    EXPECT_EQ(no_key.status, 401u) << target;
    Reply no_user = fetch(port_, method, target, {{"Authorization", std::string("Bearer ") + kKey}}, "{}");
    EXPECT_EQ(no_user.status, 400u) << target;
    EXPECT_THAT(no_user.detail(), HasSubstr("X-User-Id")) << target;
  }
}

// ---------------------------------------------------------------- cwd

TEST_F(FileRoutesTest, CwdIsPerSessionAndRelativePathsFollowIt) {
  Reply r = get("alice", "/files/cwd");
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.js(), (json{{"cwd", alice_.box_home},
                          {"home", alice_.box_home},
                          {"root", {{"path", alice_.box_home}, {"label", "Home"}}}}));

  put_dir(alice_, "proj");
  r = post("alice", "/files/cwd", {{"path", "proj"}}, "chat-1");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.js()["cwd"], alice_.box_home + "/proj");
  Reply cwd = fetch(port_, http::verb::get, "/files/cwd", as("alice", "chat-1"));
  EXPECT_EQ(cwd.js()["cwd"], alice_.box_home + "/proj");

  // A relative write in that session lands in proj/, in another session in the home.
  Reply w = fetch(port_, http::verb::post, "/files/write", as("alice", "chat-1"),
                  json{{"path", "x.txt"}, {"content", "in proj"}}.dump());
  EXPECT_EQ(w.js()["path"], alice_.box_home + "/proj/x.txt");
  EXPECT_EQ(read_host(host(alice_, "proj/x.txt")), "in proj");
  EXPECT_EQ(post("alice", "/files/write", {{"path", "x.txt"}, {"content", "home"}}).js()["path"],
            alice_.box_home + "/x.txt");

  EXPECT_EQ(post("alice", "/files/cwd", {{"path", "missing"}}, "chat-1").status, 404u);
  EXPECT_EQ(post("alice", "/files/cwd", {{"path", "/etc"}}, "chat-1").status, 403u);
  EXPECT_EQ(post("alice", "/files/cwd", {{"path", bob_.box_home}}, "chat-1").status, 403u);
  EXPECT_EQ(post("alice", "/files/cwd", {{"wrong", "proj"}}, "chat-1").status, 422u);
  EXPECT_EQ(fetch(port_, http::verb::post, "/files/cwd", as("alice", "chat-1"), "{not json").status, 400u);
}

// ---------------------------------------------------------------- write, read, list, display

TEST_F(FileRoutesTest, WriteReadListDisplayRoundTrip) {
  Reply w =
      post("alice", "/files/write", {{"path", "~/notes/day1.md"}, {"content", "one\ntwo\nthree\n"}, {"extra", 1}});
  ASSERT_EQ(w.status, 200u) << w.body;
  EXPECT_EQ(w.js(), (json{{"path", alice_.box_home + "/notes/day1.md"}, {"size", 14}}));
  struct stat st = stat_of(host(alice_, "notes/day1.md"));
  EXPECT_EQ(st.st_uid, alice_.account.uid) << "files are created as the account";
  EXPECT_EQ(st.st_gid, alice_.account.gid);
  EXPECT_EQ(stat_of(host(alice_, "notes")).st_uid, alice_.account.uid) << "parents too";

  Reply r = get("alice", "/files/read?path=notes/day1.md");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.js(), (json{{"path", alice_.box_home + "/notes/day1.md"},
                          {"total_lines", 3},
                          {"content", "one\ntwo\nthree\n"},
                          {"truncated", false}}));
  r = get("alice", "/files/read?path=" + enc(alice_.box_home + "/notes/day1.md") + "&start_line=2&end_line=2");
  EXPECT_EQ(r.js()["content"], "two\n");
  EXPECT_EQ(get("alice", "/files/read?path=notes/day1.md&start_line=null").js()["content"], "one\ntwo\nthree\n")
      << "a null query value is absent";

  Reply l = get("alice", "/files/list?directory=notes");
  ASSERT_EQ(l.status, 200u);
  EXPECT_EQ(l.js()["dir"], alice_.box_home + "/notes");
  ASSERT_EQ(l.js()["entries"].size(), 1u);
  json e = l.js()["entries"][0];
  EXPECT_EQ(e["name"], "day1.md");
  EXPECT_EQ(e["type"], "file");
  EXPECT_EQ(e["size"], 14);
  EXPECT_TRUE(e["writable"].get<bool>());
  EXPECT_GT(e["modified"].get<double>(), 1e9);
  EXPECT_EQ(get("alice", "/files/list?path=notes").js()["entries"].size(), 1u) << "path is an alias";
  json home = get("alice", "/files/list").js();
  EXPECT_EQ(home["dir"], alice_.box_home);
  EXPECT_EQ(home["entries"][0]["type"], "directory");

  EXPECT_EQ(get("alice", "/files/display?path=notes/day1.md").js(),
            (json{{"path", alice_.box_home + "/notes/day1.md"}, {"exists", true}}));
  Reply d = get("alice", "/files/display?path=nope.txt");
  EXPECT_EQ(d.status, 200u) << "display never answers 404";
  EXPECT_EQ(d.js()["exists"], false);
  EXPECT_EQ(get("alice", "/files/display?path=notes").js()["exists"], false) << "a directory";
}

TEST_F(FileRoutesTest, ReadErrorsImagesAndTheBudget) {
  EXPECT_EQ(get("alice", "/files/read?path=missing.txt").status, 404u);
  EXPECT_EQ(get("alice", "/files/read").status, 422u);
  put(alice_, "a.txt", "x\n");
  for (const char* bad : {"start_line=0", "start_line=abc", "end_line=-1", "start_line=1.5"})
    EXPECT_EQ(get("alice", std::string("/files/read?path=a.txt&") + bad).status, 422u) << bad;

  put(alice_, "blob.bin",
      std::string("\x7f"
                  "ELF\0\0\0\0binary",
                  15));
  Reply bin = get("alice", "/files/read?path=blob.bin");
  EXPECT_EQ(bin.status, 415u);
  EXPECT_THAT(bin.detail(), HasSubstr("Unsupported binary file type"));

  std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) + std::string(100, '\0');
  put(alice_, "pic.png", png);
  Reply img = get("alice", "/files/read?path=pic.png");
  ASSERT_EQ(img.status, 200u);
  EXPECT_EQ(img.header(http::field::content_type), "image/png");
  EXPECT_TRUE(img.body == png);

  // 64 KiB budget (fixture option): a long file comes back cut at a line, with where to go on.
  std::string lines;
  for (int i = 1; i <= 20000; ++i) lines += "line " + std::to_string(i) + "\n";
  put(alice_, "long.txt", lines);
  json cut = get("alice", "/files/read?path=long.txt").js();
  EXPECT_EQ(cut["total_lines"], 20000);
  EXPECT_TRUE(cut["truncated"].get<bool>());
  uint64_t next = cut["next_start_line"].get<uint64_t>();
  EXPECT_GT(next, 1000u);
  EXPECT_LE(cut["content"].get<std::string>().size(), 64u << 10);
  json rest = get("alice", "/files/read?path=long.txt&start_line=" + std::to_string(next)).js();
  EXPECT_THAT(rest["content"].get<std::string>(), ::testing::StartsWith("line " + std::to_string(next) + "\n"));
  EXPECT_EQ(post("alice", "/files/write", {{"path", "a.txt"}}).status, 422u) << "content missing";
  EXPECT_EQ(post("alice", "/files/write", {{"path", "a.txt"}, {"content", 5}}).status, 422u);
  EXPECT_EQ(post("alice", "/files/write", json::array({1, 2})).status, 422u);
}

TEST_F(FileRoutesTest, NulBytesInPathsAre400) {
  EXPECT_EQ(get("alice", "/files/read?path=a%00b").status, 400u);
  EXPECT_EQ(post("alice", "/files/write", {{"path", std::string("a\0b", 3)}, {"content", "x"}}).status, 400u);
  EXPECT_FALSE(stdfs::exists(host(alice_, "a")));
}

// ---------------------------------------------------------------- replace, mkdir, delete, move

TEST_F(FileRoutesTest, ReplaceAsOpenTerminal) {
  put(alice_, "code.py", "a = 1\nb = 1\nc = 2\n");
  Reply r = post("alice", "/files/replace",
                 {{"path", "code.py"}, {"replacements", {{{"target", "c = 2"}, {"replacement", "c = 3"}}}}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.js(), (json{{"path", alice_.box_home + "/code.py"}, {"size", 18}}));
  EXPECT_EQ(read_host(host(alice_, "code.py")), "a = 1\nb = 1\nc = 3\n");

  r = post("alice", "/files/replace",
           {{"path", "code.py"}, {"replacements", {{{"target", "zzz"}, {"replacement", "y"}}}}});
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.detail(), "Target string not found: 'zzz'");
  r = post("alice", "/files/replace",
           {{"path", "code.py"}, {"replacements", {{{"target", " = 1"}, {"replacement", " = 0"}}}}});
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.detail(), "Found 2 occurrences of target string but allow_multiple is false");
  r = post(
      "alice", "/files/replace",
      {{"path", "code.py"},
       {"replacements", {{{"target", " = 1"}, {"replacement", " = 0"}, {"start_line", 2}, {"end_line", nullptr}}}}});
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(read_host(host(alice_, "code.py")), "a = 1\nb = 0\nc = 3\n");

  EXPECT_EQ(post("alice", "/files/replace",
                 {{"path", "nope.py"}, {"replacements", {{{"target", "a"}, {"replacement", "b"}}}}})
                .status,
            404u);
  EXPECT_EQ(post("alice", "/files/replace", {{"path", "code.py"}}).status, 422u);
  EXPECT_EQ(post("alice", "/files/replace", {{"path", "code.py"}, {"replacements", {{{"target", "a"}}}}}).status, 422u);
  EXPECT_EQ(post("alice", "/files/replace",
                 {{"path", "code.py"}, {"replacements", {{{"target", "a"}, {"replacement", "b"}, {"start_line", 0}}}}})
                .status,
            422u);
}

TEST_F(FileRoutesTest, MkdirDeleteMoveWithTheirStatuses) {
  Reply m = post("alice", "/files/mkdir", {{"path", "a/b/c"}});
  ASSERT_EQ(m.status, 200u) << m.body;
  EXPECT_EQ(m.js(), (json{{"path", alice_.box_home + "/a/b/c"}}));
  EXPECT_EQ(stat_of(host(alice_, "a/b/c")).st_uid, alice_.account.uid);
  EXPECT_EQ(post("alice", "/files/mkdir", {{"path", "a/b/c"}}).status, 200u) << "existing is fine";
  put(alice_, "file", "f");
  EXPECT_EQ(post("alice", "/files/mkdir", {{"path", "file/sub"}}).status, 400u);

  Reply mv = post("alice", "/files/move", {{"source", "file"}, {"destination", "a/moved"}});
  ASSERT_EQ(mv.status, 200u) << mv.body;
  EXPECT_EQ(mv.js(), (json{{"source", alice_.box_home + "/file"}, {"destination", alice_.box_home + "/a/moved"}}));
  EXPECT_EQ(read_host(host(alice_, "a/moved")), "f");
  EXPECT_EQ(post("alice", "/files/move", {{"source", "file"}, {"destination", "x"}}).status, 404u);
  EXPECT_EQ(post("alice", "/files/move", {{"source", "a/moved"}, {"destination", "no/dir/x"}}).status, 400u);
  EXPECT_EQ(post("alice", "/files/move", {{"source", "a/moved"}, {"destination", "a/b"}}).status, 409u);
  EXPECT_EQ(post("alice", "/files/move", {{"source", "a"}, {"destination", "a/b/c/a"}}).status, 400u);
  EXPECT_EQ(post("alice", "/files/move", {{"source", "a"}}).status, 422u);

  Reply d = del("alice", "/files/delete?path=a");
  ASSERT_EQ(d.status, 200u) << d.body;
  EXPECT_EQ(d.js()["path"], alice_.box_home + "/a");
  EXPECT_EQ(d.js()["type"], "directory");
  EXPECT_TRUE(d.js()["trash"].is_string()) << "deleted into the account's trash";
  EXPECT_FALSE(stdfs::exists(host(alice_, "a")));
  EXPECT_EQ(del("alice", "/files/delete?path=a").status, 404u);
  EXPECT_EQ(del("alice", "/files/delete").status, 422u);
  EXPECT_EQ(del("alice", "/files/delete?path=~").status, 403u) << "the home itself";
}

// ---------------------------------------------------------------- grep and glob

TEST_F(FileRoutesTest, GrepWithItsOptionsAndValidation) {
  put_dir(alice_, "src");
  put(alice_, "src/a.py", "import os\nprint('Hello')\n");
  put(alice_, "src/b.txt", "hello world\n");
  json r = get("alice", "/files/grep?query=hello&path=src&case_insensitive=true").js();
  EXPECT_EQ(r["query"], "hello");
  EXPECT_EQ(r["path"], alice_.box_home + "/src");
  EXPECT_EQ(r["truncated"], false);
  ASSERT_EQ(r["matches"].size(), 2u);
  EXPECT_EQ(r["matches"][0],
            (json{{"file", alice_.box_home + "/src/a.py"}, {"line", 2}, {"content", "print('Hello')"}}));

  r = get("alice", "/files/grep?query=hello&path=src&case_insensitive=1&include=*.txt").js();
  ASSERT_EQ(r["matches"].size(), 1u);
  EXPECT_EQ(r["matches"][0]["file"], alice_.box_home + "/src/b.txt");
  r = get("alice", "/files/grep?query=hello&path=src&case_insensitive=yes&include%5B%5D=*.py").js();
  ASSERT_EQ(r["matches"].size(), 1u);
  EXPECT_EQ(r["matches"][0]["file"], alice_.box_home + "/src/a.py");
  r = get("alice", "/files/grep?query=o&path=src&match_per_line=false").js();
  EXPECT_EQ(r["matches"],
            (json{{{"file", alice_.box_home + "/src/a.py"}}, {{"file", alice_.box_home + "/src/b.txt"}}}));
  r = get("alice", "/files/grep?query=(.&regex=false&path=src").js();
  EXPECT_TRUE(r["matches"].empty());
  r = get("alice", "/files/grep?query=o&path=src&max_results=1").js();
  EXPECT_EQ(r["matches"].size(), 1u);
  EXPECT_EQ(r["truncated"], true);

  EXPECT_EQ(get("alice", "/files/grep?query=(unclosed").status, 400u);
  EXPECT_EQ(get("alice", "/files/grep?query=x&path=nowhere").status, 404u);
  EXPECT_EQ(get("alice", "/files/grep").status, 422u);
  for (const char* bad : {"max_results=0", "max_results=501", "max_results=ten", "regex=maybe", "case_insensitive=2",
                          "match_per_line=nah"})
    EXPECT_EQ(get("alice", std::string("/files/grep?query=x&") + bad).status, 422u) << bad;
  EXPECT_EQ(get("alice", "/files/grep?query=x&max_results=500").status, 200u);
}

TEST_F(FileRoutesTest, GlobWithTypeExcludeAndValidation) {
  put_dir(alice_, "p");
  put_dir(alice_, "p/sub");
  put(alice_, "p/a.py", "1");
  put(alice_, "p/sub/b.py", "22");
  put(alice_, "p/sub/c.txt", "3");
  json r = get("alice", "/files/glob?pattern=**/*.py&path=p").js();
  EXPECT_EQ(r["pattern"], "**/*.py");
  EXPECT_EQ(r["path"], alice_.box_home + "/p");
  std::vector<std::string> paths;
  for (auto& m : r["matches"]) paths.push_back(m["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"a.py", "sub/b.py"}));
  EXPECT_EQ(r["matches"][1]["size"], 2);
  EXPECT_EQ(r["matches"][1]["type"], "file");
  EXPECT_GT(r["matches"][1]["modified"].get<double>(), 1e9);

  r = get("alice", "/files/glob?pattern=*&path=p&type=directory").js();
  ASSERT_EQ(r["matches"].size(), 1u);
  EXPECT_EQ(r["matches"][0]["path"], "sub");
  r = get("alice", "/files/glob?pattern=**/*&path=p&type=file&exclude=sub").js();
  ASSERT_EQ(r["matches"].size(), 1u);
  r = get("alice", "/files/glob?pattern=**/*&path=p&type=file&exclude%5B%5D=*.py").js();
  ASSERT_EQ(r["matches"].size(), 1u);
  EXPECT_EQ(r["matches"][0]["path"], "sub/c.txt");

  EXPECT_EQ(get("alice", "/files/glob?pattern=*&type=socket").status, 422u);
  EXPECT_EQ(get("alice", "/files/glob?pattern=*&max_results=0").status, 422u);
  EXPECT_EQ(get("alice", "/files/glob").status, 422u);
  EXPECT_EQ(get("alice", "/files/glob?pattern=*&path=nowhere").status, 404u);
}

// ---------------------------------------------------------------- view, serve, Range

TEST_F(FileRoutesTest, ViewAndServeWithRanges) {
  put_dir(alice_, "site");
  put(alice_, "site/index.html", "<h1>0123456789</h1>");  // 19 bytes
  Reply v = get("alice", "/files/view?path=site/index.html");
  ASSERT_EQ(v.status, 200u);
  EXPECT_EQ(v.body, "<h1>0123456789</h1>");
  EXPECT_THAT(v.header(http::field::content_type), HasSubstr("text/html"));
  EXPECT_EQ(v.header(http::field::accept_ranges), "bytes");
  EXPECT_EQ(v.headers["X-Content-Type-Options"], "nosniff");
  EXPECT_THAT(std::string(v.headers["Content-Security-Policy"]), ::testing::StartsWith("sandbox"))
      << "an HTML preview must not run in the API's origin";

  Reply s = get("alice", "/files/serve" + alice_.box_home + "/site/index.html");
  ASSERT_EQ(s.status, 200u);
  EXPECT_EQ(s.body, v.body);

  struct Case {
    const char* range;
    unsigned status;
    const char* body;
    const char* content_range;
  };
  const Case cases[] = {
      {"bytes=4-7", 206, "0123", "bytes 4-7/19"},
      {"bytes=14-", 206, "</h1>", "bytes 14-18/19"},
      {"bytes=-5", 206, "</h1>", "bytes 14-18/19"},
      {"bytes=10-1000", 206, "6789</h1>", "bytes 10-18/19"},
      {"bytes=0-0", 206, "<", "bytes 0-0/19"},
      {"bytes=19-", 416, nullptr, "bytes */19"},
      {"bytes=100-200", 416, nullptr, "bytes */19"},
      {"bytes=0-1,5-6", 200, "<h1>0123456789</h1>", ""},  // several ranges: the whole file
      {"bytes=5-2", 200, "<h1>0123456789</h1>", ""},      // invalid: ignored
      {"lines=1-2", 200, "<h1>0123456789</h1>", ""},
  };
  for (const Case& c : cases) {
    Reply r = get("alice", "/files/view?path=site/index.html", {{"Range", c.range}});
    EXPECT_EQ(r.status, c.status) << c.range;
    if (c.body) {
      EXPECT_EQ(r.body, c.body) << c.range;
    }
    EXPECT_EQ(r.header(http::field::content_range), c.content_range) << c.range;
  }
  EXPECT_EQ(get("alice", "/files/view?path=site/index.html", {{"Range", "bytes=13-"}}).body, "9</h1>");
  Reply sr = get("alice", "/files/serve" + alice_.box_home + "/site/index.html", {{"Range", "bytes=4-5"}});
  EXPECT_EQ(sr.status, 206u);
  EXPECT_EQ(sr.body, "01");

  EXPECT_EQ(get("alice", "/files/view?path=missing").status, 404u);
  EXPECT_EQ(get("alice", "/files/view?path=site").status, 404u) << "a directory is no file";
  EXPECT_EQ(get("alice", "/files/view").status, 422u);
  EXPECT_EQ(get("alice", "/files/serve/etc/passwd").status, 403u);
  EXPECT_EQ(get("alice", "/files/serve/site/index.html").status, 403u) << "serve paths are absolute";
}

TEST(ByteRange, ParsesSingleRangesAndIgnoresTheRest) {
  using K = ByteRange::Kind;
  EXPECT_EQ(parse_byte_range(std::nullopt, 10).kind, K::whole);
  EXPECT_EQ(parse_byte_range("bytes=-0", 10).kind, K::unsatisfiable);
  EXPECT_EQ(parse_byte_range("bytes=0-", 0).kind, K::unsatisfiable);
  EXPECT_EQ(parse_byte_range("bytes=-5", 0).kind, K::unsatisfiable);
  EXPECT_EQ(parse_byte_range("bytes=+1-2", 10).kind, K::whole);
  EXPECT_EQ(parse_byte_range("bytes= 1 - 2 ", 10).kind, K::partial);
  EXPECT_EQ(parse_byte_range("BYTES=1-2", 10).length, 2u);
  EXPECT_EQ(parse_byte_range("bytes=99999999999999999999-", 10).kind, K::whole);
  ByteRange r = parse_byte_range("bytes=-50", 10);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.length, 10u);
  EXPECT_EQ(r.content_range(10), "bytes 0-9/10");
}

TEST_F(FileRoutesTest, AGigabyteStreamsFastWithoutBeingHeldInMemory) {
  // A sparse 1 GiB file with markers at known offsets.
  const uint64_t size = 1ull << 30;
  const std::array<uint64_t, 3> markers = {0, size / 2 + 12345, size - 8};
  std::string path = host(alice_, "big.bin");
  {
    UniqueFd fd(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
    for (uint64_t at : markers) ASSERT_EQ(::pwrite(fd.get(), "MARKER!!", 8, static_cast<off_t>(at)), 8);
    ASSERT_EQ(::fchown(fd.get(), alice_.account.uid, alice_.account.gid), 0);
  }
  // Baseline: reading it in-process as cat would, once to warm the cache, once timed.
  auto read_all = [&] {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    std::string buf(128 << 10, '\0');
    while (::read(fd.get(), buf.data(), buf.size()) > 0) {
    }
  };
  read_all();
  auto t0 = Clock::now();
  read_all();
  auto cat_time = Clock::now() - t0;

  reset_peak_rss();
  uint64_t rss_before = peak_rss_bytes();
  std::map<uint64_t, std::string> seen;
  auto on_body = [&](uint64_t offset, std::string_view data) {
    for (uint64_t at : markers)
      if (at >= offset && at + 8 <= offset + data.size()) seen[at] = std::string(data.substr(at - offset, 8));
  };
  t0 = Clock::now();
  RawReply r = raw_exchange(port_,
                            "GET /files/view?path=big.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                std::string(kKey) + "\r\nX-User-Id: alice\r\nConnection: close\r\n\r\n",
                            {}, false, on_body);
  auto http_time = Clock::now() - t0;
  EXPECT_EQ(r.status, 200u) << r.head;
  EXPECT_EQ(r.body_bytes, size);
  EXPECT_THAT(r.head, HasSubstr("Content-Length: 1073741824"));
  for (uint64_t at : markers) EXPECT_EQ(seen[at], "MARKER!!") << at;
  uint64_t grown = peak_rss_bytes() - rss_before;
  EXPECT_LT(grown, 64ull << 20) << "the file was buffered";
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::cout << "1 GiB: read() " << ms(cat_time) << " ms, HTTP view " << ms(http_time) << " ms\n";
  EXPECT_LT(ms(http_time), 8000) << "streaming is far slower than reading the file";

  Reply tail = get("alice", "/files/view?path=big.bin", {{"Range", "bytes=-8"}});
  EXPECT_EQ(tail.status, 206u);
  EXPECT_EQ(tail.body, "MARKER!!");
  EXPECT_EQ(tail.header(http::field::content_range), "bytes 1073741816-1073741823/1073741824");
}

// ---------------------------------------------------------------- upload

std::string upload_head(const std::string& user, const std::string& directory, uint64_t length,
                        const std::string& boundary) {
  return "POST /files/upload?directory=" + enc(directory) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey +
         "\r\nX-User-Id: " + user + "\r\nContent-Type: multipart/form-data; boundary=" + boundary +
         "\r\nContent-Length: " + std::to_string(length) + "\r\nConnection: close\r\n\r\n";
}

TEST_F(FileRoutesTest, UploadStreamsAMultiMegabyteFileToDisk) {
  const uint64_t file_size = 48ull << 20;
  const std::string boundary = "----abxBoundary42";
  const std::string prefix = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--" +
                             boundary +
                             "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"data.bin\"\r\n"
                             "Content-Type: application/octet-stream\r\n\r\n";
  const std::string suffix = "\r\n--" + boundary + "--\r\n";
  auto byte_at = [](uint64_t i) { return static_cast<char>((i * 7 + i / 4096) & 0xff); };
  uint64_t sent = 0;
  int stage = 0;
  auto next = [&](std::string& piece) {
    if (stage == 0) {
      piece = prefix;
      stage = 1;
      return true;
    }
    if (stage == 1) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(1 << 20, file_size - sent));
      piece.resize(n);
      for (size_t i = 0; i < n; ++i) piece[i] = byte_at(sent + i);
      sent += n;
      if (sent == file_size) stage = 2;
      return true;
    }
    if (stage == 2) {
      piece = suffix;
      stage = 3;
      return true;
    }
    return false;
  };
  reset_peak_rss();
  uint64_t rss_before = peak_rss_bytes();
  RawReply r = raw_exchange(
      port_, upload_head("alice", "uploads/in", prefix.size() + file_size + suffix.size(), boundary), next);
  ASSERT_EQ(r.status, 200u) << r.head << r.body;
  EXPECT_EQ(json::parse(r.body), (json{{"path", alice_.box_home + "/uploads/in/data.bin"}, {"size", file_size}}));
  EXPECT_LT(peak_rss_bytes() - rss_before, 24ull << 20) << "the upload was held in memory";

  std::string path = host(alice_, "uploads/in/data.bin");
  struct stat st = stat_of(path);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), file_size);
  EXPECT_EQ(st.st_uid, alice_.account.uid);
  EXPECT_EQ(stat_of(host(alice_, "uploads")).st_uid, alice_.account.uid);
  std::ifstream in(path, std::ios::binary);
  std::string buf(1 << 20, '\0');
  uint64_t off = 0, wrong = 0;
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i)
      if (buf[static_cast<size_t>(i)] != byte_at(off + static_cast<uint64_t>(i))) ++wrong;
    off += static_cast<uint64_t>(in.gcount());
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(stdfs::is_empty(spool_)) << "the spooled body has no name";
}

TEST_F(FileRoutesTest, UploadErrors) {
  auto upload = [&](const std::string& target, const std::string& content_type, const std::string& body) {
    Headers h = as("alice");
    h.emplace_back("Content-Type", content_type);
    return fetch(port_, http::verb::post, target, h, body);
  };
  const std::string ok_body =
      "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"../../x.txt\"\r\n\r\nX\r\n--b--\r\n";
  Reply r = upload("/files/upload?directory=up", "multipart/form-data; boundary=b", ok_body);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.js()["path"], alice_.box_home + "/up/x.txt") << "only the file name's last part counts";

  EXPECT_EQ(upload("/files/upload", "multipart/form-data; boundary=b", ok_body).status, 422u);
  EXPECT_EQ(upload("/files/upload?directory=up", "application/json", "{}").status, 422u);
  EXPECT_EQ(upload("/files/upload?directory=up", "multipart/form-data", ok_body).status, 400u);
  Reply truncated =
      upload("/files/upload?directory=up", "multipart/form-data; boundary=b",
             "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"t.txt\"\r\n\r\nunfinished");
  EXPECT_EQ(truncated.status, 400u);
  EXPECT_THAT(truncated.detail(), HasSubstr("Malformed multipart"));
  EXPECT_FALSE(stdfs::exists(host(alice_, "up/t.txt"))) << "a failed upload leaves nothing";
  Reply no_file = upload("/files/upload?directory=up", "multipart/form-data; boundary=b",
                         "--b\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nv\r\n--b--\r\n");
  EXPECT_EQ(no_file.status, 422u);
  EXPECT_THAT(no_file.detail(), HasSubstr("'file'"));
  EXPECT_EQ(upload("/files/upload?directory=/etc", "multipart/form-data; boundary=b", ok_body).status, 403u);
  Reply nul = upload("/files/upload?directory=up", "multipart/form-data; boundary=b",
                     "--b\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''..%00x\r\n\r\n"
                     "X\r\n--b--\r\n");
  EXPECT_EQ(nul.status, 400u);
  EXPECT_THAT(nul.detail(), HasSubstr("NUL"));

  // Over the file limit (a second server with a 1 MiB limit): 413, and nothing is left behind.
  FileRoutesOptions small;
  small.upload_max_bytes = 1 << 20;
  uint16_t port = start(small);
  std::string big = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big\"\r\n\r\n" +
                    std::string((1 << 20) + 1, 'x') + "\r\n--b--\r\n";
  Headers h = as("alice");
  h.emplace_back("Content-Type", "multipart/form-data; boundary=b");
  EXPECT_EQ(fetch(port, http::verb::post, "/files/upload?directory=up", h, big).status, 413u);
  std::string huge = "--b\r\n" + std::string((3 << 20), 'x');
  RawReply over = raw_exchange(port, upload_head("alice", "up", huge.size(), "b") + huge);
  EXPECT_EQ(over.status, 413u) << "over the route's body limit";
  EXPECT_FALSE(stdfs::exists(host(alice_, "up/big")));
}

// ---------------------------------------------------------------- archive

TEST_F(FileRoutesTest, ArchiveIsAZipAttachment) {
  put_dir(alice_, "proj");
  put_dir(alice_, "proj/src");
  put(alice_, "proj/src/main.c", "int main;\n");
  put(alice_, "notes.txt", "n");
  Reply r = post("alice", "/files/archive", {{"paths", {"proj", "~/notes.txt"}}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.header(http::field::content_type), "application/zip");
  EXPECT_THAT(r.header(http::field::content_disposition), HasSubstr("attachment; filename=\"download.zip\""));
  EXPECT_EQ(unzip(r.body),
            (std::map<std::string, std::string>{
                {"proj/", ""}, {"proj/src/", ""}, {"proj/src/main.c", "int main;\n"}, {"notes.txt", "n"}}));
  Reply one = post("alice", "/files/archive", {{"paths", {"proj"}}});
  EXPECT_THAT(one.header(http::field::content_disposition), HasSubstr("filename=\"proj.zip\""));

  Reply empty = post("alice", "/files/archive", {{"paths", json::array()}});
  EXPECT_EQ(empty.status, 400u);
  EXPECT_EQ(empty.detail(), "No paths provided");
  Reply missing = post("alice", "/files/archive", {{"paths", {"proj", "ghost"}}});
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.detail(), "Path not found: " + alice_.box_home + "/ghost");
  EXPECT_EQ(post("alice", "/files/archive", {{"paths", "proj"}}).status, 422u);
  EXPECT_EQ(post("alice", "/files/archive", {{"paths", {1}}}).status, 422u);
  EXPECT_EQ(post("alice", "/files/archive", json::object()).status, 422u);
  EXPECT_TRUE(stdfs::is_empty(spool_));
}

TEST(AttachmentDisposition, QuotesAndNonAsciiAreSafe) {
  EXPECT_EQ(attachment_disposition("a.zip"), "attachment; filename=\"a.zip\"; filename*=UTF-8''a.zip");
  EXPECT_EQ(attachment_disposition("r\xC3\xA9\"s;\r\n.zip"),
            "attachment; filename=\"r___s___.zip\"; filename*=UTF-8''r%C3%A9%22s%3B%0D%0A.zip");
}

// ---------------------------------------------------------------- isolation

// Bob, with every trick, against alice's ~/secret. Alice's home and secret are made world
// readable, so confinement alone (not permissions) stands between them.
TEST_F(FileRoutesTest, BobReachesNothingOfAlicesThroughAnyRoute) {
  put(alice_, "secret", std::string(kSecret) + "\n", 0644);
  put_dir(alice_, "dir");
  put(alice_, "dir/inner", kSecret, 0644);
  ASSERT_EQ(::chmod(host(alice_).c_str(), 0755), 0);
  const std::string alice_box = alice_.box_home + "/secret";
  const std::string alice_host = host(alice_, "secret");
  const std::string alice_name = alice_.account.name;

  // Bob's own home, with links of every kind towards it.
  put(bob_, "mine.txt", "bob's\n");
  put_link(bob_, "abs_host", alice_host);
  put_link(bob_, "abs_box", alice_box);
  put_link(bob_, "rel", "../" + alice_name + "/secret");
  put_link(bob_, "dir_link", "../" + alice_name + "/dir");
  put_link(bob_, "proc", "/proc/self/root" + alice_host);
  put_link(bob_, "fd_link", "/proc/self/fd/0");
  const std::vector<std::string> links = {"abs_host", "abs_box", "rel", "proc", "fd_link", "dir_link/inner"};
  const std::vector<std::string> direct = {
      alice_box,
      alice_host,
      "../" + alice_name + "/secret",
      "~/../" + alice_name + "/secret",
      "/proc/self/root" + alice_host,
      "/proc/self/cwd/" + alice_host,
  };

  auto no_secret = [&](const Reply& r, const std::string& what) {
    EXPECT_THAT(r.body, Not(HasSubstr(kSecret))) << what;
  };
  for (const std::string& p : direct) {
    SCOPED_TRACE(p);
    for (const std::string& target :
         {"/files/read?path=" + enc(p), "/files/view?path=" + enc(p), "/files/list?directory=" + enc(p),
          "/files/grep?query=SECRET&path=" + enc(p), "/files/glob?pattern=*&path=" + enc(p)}) {
      Reply r = get("bob", target);
      EXPECT_EQ(r.status, 403u) << target << " " << r.body;
      no_secret(r, target);
    }
    Reply d = get("bob", "/files/display?path=" + enc(p));
    EXPECT_EQ(d.status, 403u);
    EXPECT_EQ(post("bob", "/files/write", {{"path", p}, {"content", "pwned"}}).status, 403u);
    EXPECT_EQ(del("bob", "/files/delete?path=" + enc(p)).status, 403u);
    EXPECT_EQ(post("bob", "/files/move", {{"source", p}, {"destination", "stolen"}}).status, 403u);
    EXPECT_EQ(post("bob", "/files/move", {{"source", "mine.txt"}, {"destination", p}}).status, 403u);
    EXPECT_EQ(post("bob", "/files/mkdir", {{"path", p + "x"}}).status, 403u);
    EXPECT_EQ(post("bob", "/files/cwd", {{"path", p}}, "s").status, 403u);
    Reply a = post("bob", "/files/archive", {{"paths", {p}}});
    EXPECT_EQ(a.status, 403u);
    no_secret(a, "archive");
    EXPECT_EQ(post("bob", "/files/replace", {{"path", p}, {"replacements", {{{"target", "A"}, {"replacement", "B"}}}}})
                  .status,
              403u);
  }
  if (alice_box.find('/') == 0) {
    Reply s = get("bob", "/files/serve" + alice_box);
    EXPECT_EQ(s.status, 403u);
    no_secret(s, "serve");
  }

  // Through links in bob's own home: refused for reading and writing, never followed.
  for (const std::string& link : links) {
    SCOPED_TRACE(link);
    Reply r = get("bob", "/files/read?path=" + enc(link));
    EXPECT_THAT(r.status, ::testing::AnyOf(403u, 404u)) << r.body;
    no_secret(r, "read");
    Reply v = get("bob", "/files/view?path=" + enc(link));
    EXPECT_THAT(v.status, ::testing::AnyOf(403u, 404u));
    no_secret(v, "view");
    Reply s = get("bob", "/files/serve" + bob_.box_home + "/" + link);
    EXPECT_THAT(s.status, ::testing::AnyOf(403u, 404u));
    no_secret(s, "serve");
    EXPECT_EQ(get("bob", "/files/display?path=" + enc(link)).js()["exists"], false);
    Reply w = post("bob", "/files/write", {{"path", link}, {"content", "pwned"}});
    EXPECT_THAT(w.status, ::testing::AnyOf(403u, 404u)) << w.body;
    Reply a = post("bob", "/files/archive", {{"paths", {link}}});
    EXPECT_THAT(a.status, ::testing::AnyOf(403u, 404u));
    no_secret(a, "archive");
    Reply rep = post("bob", "/files/replace",
                     {{"path", link}, {"replacements", {{{"target", "ALICE"}, {"replacement", "BOB"}}}}});
    EXPECT_THAT(rep.status, ::testing::AnyOf(403u, 404u));
  }
  EXPECT_THAT(get("bob", "/files/list?directory=dir_link").status, ::testing::AnyOf(403u, 404u));

  // Searches and archives of bob's whole home see the links but never what is behind them.
  Reply g = get("bob", "/files/grep?query=SECRET&path=~");
  EXPECT_EQ(g.status, 200u);
  EXPECT_TRUE(g.js()["matches"].empty()) << g.body;
  Reply gl = get("bob", "/files/glob?pattern=**/inner&path=~");
  EXPECT_EQ(gl.status, 200u);
  EXPECT_TRUE(gl.js()["matches"].empty()) << gl.body;
  Reply all = post("bob", "/files/archive", {{"paths", {"~"}}});
  ASSERT_EQ(all.status, 200u) << all.body;
  auto entries = unzip(all.body);
  EXPECT_EQ(entries.count(bob_.account.name + "/mine.txt"), 1u);
  for (const auto& [name, data] : entries) EXPECT_THAT(data, Not(HasSubstr(kSecret))) << name;
  Reply list = get("bob", "/files/list");
  EXPECT_EQ(list.status, 200u);
  no_secret(list, "list");

  // Upload through a link to alice's directory lands nowhere in alice's home.
  Headers h = as("bob");
  h.emplace_back("Content-Type", "multipart/form-data; boundary=b");
  Reply up = fetch(port_, http::verb::post, "/files/upload?directory=dir_link", h,
                   "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"planted\"\r\n\r\nX\r\n--b--\r\n");
  EXPECT_THAT(up.status, ::testing::AnyOf(403u, 409u, 400u)) << up.body;

  // Alice's files are untouched.
  EXPECT_EQ(read_host(alice_host), std::string(kSecret) + "\n");
  EXPECT_EQ(read_host(host(alice_, "dir/inner")), kSecret);
  EXPECT_FALSE(stdfs::exists(host(alice_, "dir/planted")));
  EXPECT_FALSE(stdfs::exists(host(alice_, "secretx")));
  EXPECT_EQ(stdfs::directory_iterator(host(alice_, "dir")) != stdfs::directory_iterator(), true);
  // And alice, going the other way, cannot reach bob's either.
  EXPECT_EQ(get("alice", "/files/read?path=" + enc(bob_.box_home + "/mine.txt")).status, 403u);
}

// ---------------------------------------------------------------- the pool

TEST_F(FileRoutesTest, PoolThreadsGetTheirIdentityBack) {
  // Work as both accounts, then look at every pool thread's fs identity.
  for (int i = 0; i < 6; ++i) {
    post(i % 2 ? "alice" : "bob", "/files/write", {{"path", "f" + std::to_string(i)}, {"content", "x"}});
    get(i % 2 ? "alice" : "bob", "/files/list");
  }
  // Shared with the jobs by value: they may still be waking up when this test returns.
  struct Rendezvous {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    std::vector<uid_t> fsuids;
  };
  auto rv = std::make_shared<Rendezvous>();
  const int threads = static_cast<int>(pool_->threads());
  // One job per key: a key runs at most per_account() jobs at once, and every thread must come.
  for (int t = 0; t < threads; ++t)
    pool_->post("probe-" + std::to_string(t), [rv, threads] {
      std::unique_lock lock(rv->mu);
      rv->fsuids.push_back(FsIdentity::current_fsuid());
      ++rv->arrived;
      rv->cv.notify_all();
      // Hold this thread until every thread has reported, so each reports once.
      rv->cv.wait_for(lock, 5s, [&] { return rv->arrived == threads; });
    });
  std::unique_lock lock(rv->mu);
  ASSERT_TRUE(rv->cv.wait_for(lock, 10s, [&] { return rv->arrived == threads; }));
  std::vector<uid_t> fsuids = rv->fsuids;
  EXPECT_EQ(fsuids, std::vector<uid_t>(pool_->threads(), 0u));
}

TEST_F(FileRoutesTest, SlowFileWorkDoesNotHoldTheIoThread) {
  // One io thread, and a route whose work blocks on the pool: other requests are still served.
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  Router router;
  auto pool = std::make_shared<FairPool>(2, 2, "files");
  router.add_async(http::verb::get, "/slow", offload(pool, Handler([&](const Request&) {
                                                       std::unique_lock lock(mu);
                                                       cv.wait_for(lock, 10s, [&] { return release; });
                                                       return Response::json({{"slow", true}});
                                                     })));
  add_file_routes(router, services({}, pool));
  const uint16_t port = serve(std::move(router), 1);

  std::thread slow([&] { EXPECT_EQ(fetch(port, http::verb::get, "/slow", as("alice")).status, 200u); });
  std::this_thread::sleep_for(100ms);
  auto t0 = Clock::now();
  Reply cwd = fetch(port, http::verb::get, "/files/cwd", as("alice"));
  EXPECT_EQ(cwd.status, 200u);
  EXPECT_LT(Clock::now() - t0, 2s);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  slow.join();
}

TEST_F(FileRoutesTest, OneAccountsBlockedFileWorkLeavesThreadsForOthers) {
  // alice's file work blocks; she may hold 2 of the 3 threads, so bob is still served, and her
  // own further requests wait their turn instead of taking the last thread.
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int blocked = 0;
  Router router;
  auto pool = std::make_shared<FairPool>(3, 2, "files");
  router.add_async(http::verb::get, "/slow", offload(pool, Handler([&](const Request&) {
                                                       std::unique_lock lock(mu);
                                                       ++blocked;
                                                       cv.notify_all();
                                                       cv.wait_for(lock, 10s, [&] { return release; });
                                                       return Response::json({{"slow", true}});
                                                     })));
  add_file_routes(router, services({}, pool));
  const uint16_t port = serve(std::move(router), 1);

  std::vector<std::thread> slow;
  for (int i = 0; i < 4; ++i)
    slow.emplace_back([&] { EXPECT_EQ(fetch(port, http::verb::get, "/slow", as("alice")).status, 200u); });
  int blocked_then = 0;
  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, 5s, [&] { return blocked >= 2; });
    lock.unlock();
    std::this_thread::sleep_for(200ms);  // time for a third to start, were it allowed
    lock.lock();
    blocked_then = blocked;
  }
  auto t0 = Clock::now();
  Reply list = fetch(port, http::verb::get, "/files/list", as("bob"));
  auto bob_took = Clock::now() - t0;
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& t : slow) t.join();
  EXPECT_EQ(blocked_then, 2);
  EXPECT_EQ(list.status, 200u);
  EXPECT_LT(bob_took, 2s);
  EXPECT_EQ(blocked, 4);
}

}  // namespace
}  // namespace agentbox::api
