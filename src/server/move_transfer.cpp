#include "server/move_transfer.hpp"

#include <signal.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "cluster/admin_url.hpp"
#include "fs/dir_entries.hpp"
#include "server/http_error.hpp"
#include "util/error.hpp"
#include "util/run_program.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

// Sending waits on the target's disk at worst; the answer comes after the target unpacked and
// re-owned everything, which for a big home takes minutes.
constexpr int kSendTimeoutSeconds = 300;
constexpr int kAnswerTimeoutSeconds = 3600;
constexpr size_t kChunk = 256 << 10;

void set_timeout(asio::ip::tcp::socket& s, int option, int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, option, &tv, sizeof tv);
}

asio::ip::tcp::socket connect_to(asio::io_context& io, const NodeEndpoint& to) {
  asio::ip::tcp::resolver resolver(io);
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  auto found = resolver.resolve(to.host, std::to_string(to.port), ec);
  if (!ec) asio::connect(socket, found, ec);
  if (ec)
    throw HttpError(http::status::bad_gateway, "cannot reach node " + to.name + " at " + to.host + ":" +
                                                   std::to_string(to.port) + " (" + ec.message() + ")");
  set_timeout(socket, SO_SNDTIMEO, kSendTimeoutSeconds);
  set_timeout(socket, SO_RCVTIMEO, kAnswerTimeoutSeconds);
  return socket;
}

template <class Request>
void set_common(Request& req, const NodeEndpoint& to) {
  req.set(http::field::host, to.host + ":" + std::to_string(to.port));
  req.set(http::field::authorization, "Bearer " + to.admin_key);
  req.set(http::field::user_agent, "agentbox-move");
  req.keep_alive(false);
}

// nullopt when no answer could be read (the connection broke).
std::optional<http::response<http::string_body>> read_response(asio::ip::tcp::socket& socket) {
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  boost::system::error_code ec;
  http::read(socket, buffer, res, ec);
  if (ec) return std::nullopt;
  return res;
}

nlohmann::json answer_of(const http::response<http::string_body>& res, const NodeEndpoint& to) {
  nlohmann::json answer = nlohmann::json::parse(res.body(), nullptr, false);
  const unsigned status = res.result_int();
  if (status >= 200 && status < 300 && !answer.is_discarded()) return answer;
  std::string detail = answer.is_object() && answer.contains("detail") && answer["detail"].is_string()
                           ? answer["detail"].get<std::string>()
                           : std::string(res.reason());
  // The target's refusal keeps its status (409: the user has an account there); its own
  // failures are the gateway's.
  const auto passed = status >= 400 && status < 500 ? res.result() : http::status::bad_gateway;
  throw HttpError(passed, "node " + to.name + ": " + detail);
}

nlohmann::json read_answer(asio::ip::tcp::socket& socket, const NodeEndpoint& to) {
  auto res = read_response(socket);
  if (!res) throw HttpError(http::status::bad_gateway, "no answer from node " + to.name + " (it may have stopped)");
  return answer_of(*res, to);
}

// tar's output, read by the sender; the child is waited for (and killed if still running) on
// every way out.
class TarReader {
 public:
  explicit TarReader(const std::vector<ArchivePart>& parts) {
    // pax: nanosecond times, any name length and file size; holes stay holes (a sparse file
    // must not outgrow the target's quota).
    std::vector<std::string> argv = {"tar", "--create", "--format=posix", "--sparse", "--numeric-owner", "--file=-"};
    for (const ArchivePart& p : parts) {
      argv.push_back("--directory=" + p.dir);
      for (const std::string& e : p.entries) argv.push_back(e);
    }
    int out[2];
    check(::pipe2(out, O_CLOEXEC), "pipe2");
    read_end_.reset(out[0]);
    UniqueFd write_end(out[1]);
    errors_.reset(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!errors_) throw sys_error("open(O_TMPFILE in /tmp)");
    pid_ = spawn_program(argv, -1, write_end.get(), errors_.get());
  }
  ~TarReader() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait_program(pid_);
    }
  }
  // 0 at the end.
  size_t read(char* buf, size_t size) {
    for (;;) {
      ssize_t n = ::read(read_end_.get(), buf, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) throw sys_error("read(tar)");
    }
  }
  // Throws Error with tar's last line unless it exited 0.
  void finish() {
    const int status = wait_program(pid_);
    pid_ = -1;
    if (status == 0) return;
    std::string text(4096, '\0');
    ssize_t n = ::pread(errors_.get(), text.data(), text.size(), 0);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    throw Error("tar --create failed (status " + std::to_string(status) + "): " + last_output_line(text));
  }

 private:
  UniqueFd read_end_, errors_;
  pid_t pid_ = -1;
};

void reown_at(int dirfd, const std::string& name, const std::string& shown, uid_t uid, gid_t gid, int depth) {
  struct stat st;
  check(::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW), "stat(" + shown + ")");
  check(::fchownat(dirfd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW), "chown(" + shown + ")");
  if (S_ISLNK(st.st_mode)) return;
  // Not a link (the staging tree is root's alone, nothing swaps it): the mode again, set-id
  // bits included, which chown cleared.
  check(::fchmodat(dirfd, name.c_str(), st.st_mode & 07777, 0), "chmod(" + shown + ")");
  if (!S_ISDIR(st.st_mode)) return;
  if (depth > 1024) throw Error("reown: " + shown + " is nested too deep");  // one descriptor per level
  UniqueFd dir(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) throw sys_error("open(" + shown + ")");
  for (const DirEntry& e : read_dir_entries(dir.get(), shown))
    reown_at(dir.get(), e.name, shown + "/" + e.name, uid, gid, depth + 1);
}

}  // namespace

NodeEndpoint node_endpoint(const ClusterNode& node, std::string admin_key) {
  cluster::AdminAddress a = cluster::admin_address(node);
  return {node.name, std::move(a.host), a.port, std::move(admin_key)};
}

nlohmann::json send_archive(const NodeEndpoint& to, const std::string& target, const std::vector<ArchivePart>& parts) {
  asio::io_context io;
  asio::ip::tcp::socket socket = connect_to(io, to);
  TarReader tar(parts);

  // Beast's chunked-from-a-pipe pattern: the serializer writes what the body points at, then
  // asks for more (need_buffer) until `more` is false.
  http::request<http::buffer_body> req{http::verb::put, target, 11};
  set_common(req, to);
  req.set(http::field::content_type, "application/x-tar");
  req.chunked(true);
  req.body().data = nullptr;
  req.body().more = true;
  http::request_serializer<http::buffer_body> sr{req};
  boost::system::error_code ec;
  http::write_header(socket, sr, ec);
  std::vector<char> buf(kChunk);
  bool first = true;
  while (!ec) {
    const size_t n = tar.read(buf.data(), buf.size());
    req.body().data = n ? buf.data() : nullptr;
    req.body().size = n;
    req.body().more = n != 0;
    if (n == 0) tar.finish();  // a failed tar must not end the body as if it were whole
    http::write(socket, sr, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (n == 0) break;
    if (first) {
      first = false;
      move_test_pause("transfer");
    }
  }
  if (ec) {
    // The target may have refused early (and closed): its answer, if any, says why.
    if (auto res = read_response(socket)) return answer_of(*res, to);
    throw HttpError(http::status::bad_gateway, "sending to node " + to.name + " failed (" + ec.message() + ")");
  }
  return read_answer(socket, to);
}

nlohmann::json post_admin(const NodeEndpoint& to, const std::string& target) {
  asio::io_context io;
  asio::ip::tcp::socket socket = connect_to(io, to);
  http::request<http::empty_body> req{http::verb::post, target, 11};
  set_common(req, to);
  req.prepare_payload();
  boost::system::error_code ec;
  http::write(socket, req, ec);
  if (ec) throw HttpError(http::status::bad_gateway, "sending to node " + to.name + " failed (" + ec.message() + ")");
  return read_answer(socket, to);
}

void unpack_archive(int archive_fd, const std::string& dir) {
  // As root tar would give entries the archive's owners (the source's uids, which may be
  // anyone's here): root's until reown_tree gives them the account's. Modes and times as sent;
  // GNU tar refuses members with "..", strips leading "/", and makes links pointing outward
  // only after every file is written, so nothing lands outside dir.
  ProgramResult r = run_program({"tar", "--extract", "--file=-", "--directory=" + dir, "--no-same-owner",
                                 "--preserve-permissions", "--delay-directory-restore"},
                                archive_fd);
  if (r.status != 0)
    throw Error("tar --extract failed (status " + std::to_string(r.status) + "): " + last_output_line(r.output));
}

void reown_tree(const std::string& path, uid_t uid, gid_t gid) {
  const size_t slash = path.rfind('/');
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw sys_error("open(" + parent + ")");
  reown_at(dir.get(), path.substr(slash + 1), path, uid, gid, 0);
}

void move_test_pause(std::string_view point) {
  const char* hook = ::getenv("AGENTBOX_TEST_MOVE_PAUSE");
  if (!hook) return;
  std::string_view h(hook);
  const size_t eq = h.find('=');
  if (eq == std::string_view::npos || h.substr(0, eq) != point) return;
  int seconds = 0;
  std::from_chars(h.data() + eq + 1, h.data() + h.size(), seconds);
  spdlog::warn("test hook: move paused at {} for {} s", point, seconds);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
}

}  // namespace agentbox::server
