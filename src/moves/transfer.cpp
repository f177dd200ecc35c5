#include "moves/transfer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include "http/error.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/run_program.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::moves {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

// Sending waits on the target's disk at worst; the answer comes after the target unpacked and
// re-owned everything, which for a big home takes minutes.
constexpr int kSendTimeoutSeconds = 300;
constexpr int kAnswerTimeoutSeconds = 3600;
// The receiver's wait for the next bytes of an archive (the sender waits as long on its disk).
constexpr int kBodyTimeoutSeconds = 300;
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

// A tar child whose stderr (and stdout) goes to a file read when it fails; it is waited for
// (and killed if still running) on every way out.
class TarChild {
 public:
  TarChild(const TarChild&) = delete;
  TarChild& operator=(const TarChild&) = delete;
  ~TarChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait_program(pid_);
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
    // Its last line is a summary ("Exiting with failure status due to previous errors"): the
    // line before says what failed.
    const size_t summary = text.find("tar: Exiting with failure status");
    if (summary != std::string::npos) text.resize(summary);
    throw Error(what_ + " failed (status " + std::to_string(status) + "): " + last_output_line(text));
  }

 protected:
  // Runs tar `argv` with stdin `in` and stdout `out` (-1: its errors file).
  TarChild(const std::vector<std::string>& argv, int in, int out) : what_(argv[0] + " " + argv[1]) {
    errors_.reset(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!errors_) throw sys_error("open(O_TMPFILE in /tmp)");
    pid_ = spawn_program(argv, in, out >= 0 ? out : errors_.get(), errors_.get());
  }

 private:
  std::string what_;
  UniqueFd errors_;
  pid_t pid_ = -1;
};

// tar --create of the parts, its archive read by the sender.
class TarReader : public TarChild {
 public:
  explicit TarReader(const std::vector<ArchivePart>& parts) : TarReader(parts, Pipe()) {}
  // 0 at the end.
  size_t read(char* buf, size_t size) {
    for (;;) {
      ssize_t n = ::read(read_end_.get(), buf, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) throw sys_error("read(tar)");
    }
  }

 private:
  struct Pipe {
    UniqueFd read_end, write_end;
    Pipe() {
      int fds[2];
      check(::pipe2(fds, O_CLOEXEC), "pipe2");
      read_end.reset(fds[0]);
      write_end.reset(fds[1]);
    }
  };
  TarReader(const std::vector<ArchivePart>& parts, Pipe pipe)
      : TarChild(create_argv(parts), -1, pipe.write_end.get()), read_end_(std::move(pipe.read_end)) {}
  static std::vector<std::string> create_argv(const std::vector<ArchivePart>& parts) {
    // pax: nanosecond times, any name length and file size; holes stay holes (a sparse file
    // must not outgrow the target's quota).
    std::vector<std::string> argv = {"tar", "--create", "--format=posix", "--sparse", "--numeric-owner", "--file=-"};
    for (const ArchivePart& p : parts) {
      argv.push_back("--directory=" + p.dir);
      for (const std::string& e : p.entries) argv.push_back(e);
    }
    return argv;
  }
  UniqueFd read_end_;
};

// tar --extract into dir, fed by the receiver. Its stdin is a socket, not a pipe: a write to it
// after tar died is EPIPE (MSG_NOSIGNAL), never a SIGPIPE to the daemon.
class TarWriter : public TarChild {
 public:
  explicit TarWriter(const std::string& dir) : TarWriter(dir, SocketPair()) {}
  // False once tar stopped reading: it failed (finish() says why) or saw the archive's end.
  bool write(const char* data, size_t size) {
    while (size > 0) {
      ssize_t n = ::send(write_end_.get(), data, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return false;
      if (n < 0) throw sys_error("write(tar)");
      data += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }
  // The archive's end: tar sees EOF.
  void close() { write_end_.reset(); }

 private:
  struct SocketPair {
    UniqueFd ours, tars;
    SocketPair() {
      int fds[2];
      check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), "socketpair");
      ours.reset(fds[0]);
      tars.reset(fds[1]);
      const int size = 1 << 20;  // fewer wakeups of tar per MiB
      ::setsockopt(ours.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    }
  };
  TarWriter(const std::string& dir, SocketPair s)
      : TarChild(extract_argv(dir), s.tars.get(), -1), write_end_(std::move(s.ours)) {}
  static std::vector<std::string> extract_argv(const std::string& dir) {
    // As root tar would give entries the archive's owners (the source's uids, which may be
    // anyone's here): root's until reown_tree gives them the account's. Modes and times as
    // sent; GNU tar refuses members with "..", strips leading "/", and makes links pointing
    // outward only after every file is written, so nothing lands outside dir.
    return {"tar",
            "--extract",
            "--file=-",
            "--directory=" + dir,
            "--no-same-owner",
            "--preserve-permissions",
            "--delay-directory-restore"};
  }
  UniqueFd write_end_;
};

// Waits until fd is readable; false after `seconds` without.
bool wait_readable(int fd, int seconds) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&p, 1, seconds * 1000);
    if (n >= 0) return n > 0;
    if (errno != EINTR) throw sys_error("poll");
  }
}

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

void receive_archive(Takeover& upload, const std::string& dir) {
  TarWriter tar(dir);
  Takeover::Parser& parser = *upload.parser;
  parser.body_limit(boost::none);    // as big as a volume: bounded by the disk it lands on
  upload.socket.non_blocking(true);  // a read that would wait returns, to wait here with a deadline
  std::vector<char> buf(kChunk);
  bool tar_reads = true;
  while (!parser.is_done()) {
    parser.get().body().data = buf.data();
    parser.get().body().size = buf.size();
    boost::system::error_code ec;
    http::read_some(upload.socket, upload.buffer, parser, ec);
    const size_t n = buf.size() - parser.get().body().size;
    if (n > 0 && tar_reads && !tar.write(buf.data(), n)) {
      // tar stopped early: a failure is reported; after the archive's end the rest (padding)
      // is read and dropped, so that the sender can finish and read the answer.
      tar_reads = false;
      tar.close();
      tar.finish();
    }
    if (ec == http::error::need_buffer) continue;
    if (ec == asio::error::would_block) {
      if (!wait_readable(upload.socket.native_handle(), kBodyTimeoutSeconds))
        throw HttpError(http::status::request_timeout,
                        "the archive stopped arriving (nothing for " + std::to_string(kBodyTimeoutSeconds) + " s)");
      continue;
    }
    if (ec) throw HttpError(http::status::bad_request, "the archive broke off (" + ec.message() + ")");
  }
  if (tar_reads) {
    tar.close();
    tar.finish();
  }
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
  log::warn("moves", "test hook: move paused at {} for {} s", point, seconds);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
}

}  // namespace agentbox::moves
