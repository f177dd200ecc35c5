// The floor of a terminal keystroke round trip, for bench/terminal_bench.sh: a WebSocket server
// that relays each message to `cat` and its echo back, and does nothing else (no auth, no
// session, no replay buffer, no second thread, no event loop library: one epoll_wait on the
// client's socket and cat's output, then the one read and the one write that the ready end
// needs). With a pty (the default) it pays what any web terminal must pay: the
// bytes cross a pty's line discipline both ways (raw mode, no echo, as the bench sets in
// agentbox's terminal). With --pipe, cat is on a pair of pipes, as websocketd relays it: that is
// what the terminal path is compared to, and the difference between the two is the pty's cost.
// With --box, cat runs on a pty in a box started through the Box API, as a terminal's shell
// does (its namespaces, uid, seccomp allowlist, Landlock, and a cgroup with an account's default
// limits: CPU quota, memory, pids): the floor of a sandboxed terminal, without the daemon.
//
//   pty_relay PORT [--pipe | --box]     127.0.0.1:PORT (0: any; the port is printed once it
//                                       listens), one connection at a time (--box: run as root)
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "box/box.hpp"
#include "box/cgroup.hpp"
#include "config/server_config.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;

// cat's two ends as this side sees them: write keystrokes to `in`, read the echo from `out`.
struct Cat {
  pid_t pid = -1;
  int in = -1;
  int out = -1;
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

Cat start_cat_on_pty() {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) die("posix_openpt");
  const char* name = ptsname(master);
  if (name == nullptr) die("ptsname");
  std::string slave_name = name;
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    setsid();
    int slave = open(slave_name.c_str(), O_RDWR);  // the first tty opened: the controlling one
    if (slave < 0) _exit(127);
    termios t{};
    tcgetattr(slave, &t);
    cfmakeraw(&t);  // stty raw -echo: the byte goes through cat and nothing else
    tcsetattr(slave, TCSANOW, &t);
    dup2(slave, 0);
    dup2(slave, 1);
    dup2(slave, 2);
    if (slave > 2) close(slave);
    execlp("cat", "cat", static_cast<char*>(nullptr));
    _exit(127);
  }
  return Cat{pid, master, master};
}

Cat start_cat_on_pipes() {
  int to_cat[2], from_cat[2];
  if (pipe2(to_cat, O_CLOEXEC) != 0 || pipe2(from_cat, O_CLOEXEC) != 0) die("pipe2");
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    dup2(to_cat[0], 0);
    dup2(from_cat[1], 1);
    execlp("cat", "cat", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_cat[0]);
  close(from_cat[1]);
  return Cat{pid, to_cat[1], from_cat[0]};
}

void stop_cat(const Cat& cat) {
  close(cat.in);
  if (cat.out != cat.in) close(cat.out);
  if (cat.pid < 0) return;  // in a box: it ends with the box
  kill(cat.pid, SIGKILL);
  waitpid(cat.pid, nullptr, 0);
}

// One box for the relay's life, started as `agentbox run` starts one as root (init exec'd, a
// network namespace of its own, cgroup limits), with a home of its own under /tmp.
class BenchBox {
 public:
  BenchBox() {
    constexpr uid_t kUid = 1'500'100;  // far above host accounts and agentbox's ranges
    char tmpl[] = "/tmp/agentbox-ptyrelay-XXXXXX";
    if (!::mkdtemp(tmpl)) die("mkdtemp");
    home_ = tmpl;
    if (::chown(home_.c_str(), kUid, kUid) != 0) die("chown");
    std::string why;
    cgroups_ = agentbox::CgroupDriver::detect("/sys/fs/cgroup", &why);
    if (!cgroups_) {
      std::fprintf(stderr, "pty_relay: cgroups unavailable: %s\n", why.c_str());
      std::exit(1);
    }
    agentbox::BoxSpec spec;
    spec.identity = agentbox::IdentityMode::host_uid;
    spec.uid = spec.gid = kUid;
    spec.name = spec.hostname = "ptyrelay";
    spec.home_source = home_;
    spec.home_target = "/home/ptyrelay";
    spec.use_cgroup = true;
    // An account's box as the daemon makes it by default (CPU quota, memory, pids), so that cat
    // is scheduled in a CPU cgroup of its own as a terminal's shell is.
    spec.limits = agentbox::default_server_box_limits();
    agentbox::BoxStartOptions opts;
    opts.init_path = agentbox::default_init_path();
    opts.cgroups = cgroups_.get();
    opts.cgroup_use = agentbox::CgroupUse::limits_only;
    opts.cgroup_name = "ptyrelay-" + std::to_string(::getpid());
    box_ = agentbox::Box::start(spec, opts);
  }
  ~BenchBox() {
    box_->stop();
    std::error_code ignored;
    std::filesystem::remove_all(home_, ignored);
  }

  // cat on a pty of the box, raw and without echo (set through the master, which the line
  // discipline's settings belong to).
  Cat start_cat() {
    agentbox::SpawnRequest req;
    req.argv = {"cat"};
    req.env = {"PATH=/usr/bin:/bin"};
    req.tty = true;
    agentbox::SpawnResult spawned = box_->spawn(req);
    int master = spawned.pty_master.release();
    termios t{};
    tcgetattr(master, &t);
    cfmakeraw(&t);
    tcsetattr(master, TCSANOW, &t);
    return Cat{-1, master, master};
  }

 private:
  std::string home_;
  std::unique_ptr<agentbox::CgroupDriver> cgroups_;
  std::unique_ptr<agentbox::Box> box_;
};

// One client. Both ends are waited on at once, as a terminal must (cat may write with no
// keystroke before it) and as a server of many terminals does (epoll): a message from the
// client goes to cat whole; what cat gives back (all that is there at once) goes back as one
// binary message. Beast may read ahead past one frame; a client with one keystroke in flight,
// as the bench's, never has a second frame to leave unseen in its buffer.
void relay(tcp::socket socket, const Cat& cat) {
  beast::websocket::stream<tcp::socket> ws(std::move(socket));
  ws.next_layer().set_option(tcp::no_delay(true));
  ws.accept();
  ws.binary(true);
  const int sock = ws.next_layer().native_handle();
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = sock;
  epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev);
  ev.data.fd = cat.out;
  epoll_ctl(ep, EPOLL_CTL_ADD, cat.out, &ev);
  beast::flat_buffer in;
  char echo[4096];
  for (bool open = true; open;) {
    epoll_event ready[2];
    const int n = epoll_wait(ep, ready, 2, -1);
    for (int i = 0; i < n && open; ++i) {
      beast::error_code ec;
      if (ready[i].data.fd == sock) {
        in.clear();
        ws.read(in, ec);
        auto data = in.cdata();
        open = !ec && write(cat.in, data.data(), data.size()) == static_cast<ssize_t>(data.size());
      } else {
        const ssize_t got = read(cat.out, echo, sizeof echo);
        open = got > 0;
        if (open) ws.write(asio::buffer(echo, static_cast<size_t>(got)), ec);
        open = open && !ec;
      }
    }
  }
  close(ep);
}

// Accepts one client after another, each with a fresh cat.
[[noreturn]] void serve(tcp::acceptor& acceptor, const std::string& mode, BenchBox* box) {
  for (;;) {
    tcp::socket socket = acceptor.accept();
    Cat cat = box ? box->start_cat() : mode == "--pipe" ? start_cat_on_pipes() : start_cat_on_pty();
    relay(std::move(socket), cat);
    stop_cat(cat);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pty_relay PORT [--pipe | --box]\n");
    return 2;
  }
  const std::string mode = argc > 2 ? argv[2] : "";
  // SIGTERM and SIGINT are taken here, so the box is stopped and its home removed.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::unique_ptr<BenchBox> box;
  if (mode == "--box") box = std::make_unique<BenchBox>();
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::atoi(argv[1]))});
  std::printf("pty_relay: listening on 127.0.0.1:%u\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  std::thread([&] { serve(acceptor, mode, box.get()); }).detach();
  int sig = 0;
  sigwait(&stop, &sig);
  box.reset();
  std::_Exit(0);
}
