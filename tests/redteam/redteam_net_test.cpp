// Red team, network: a box's network namespace holds only its own `lo`, and it is the whole
// boundary (no Landlock TCP rule, DESIGN §3). No TCP or UDP reaches a non-loopback address (a
// test host in a network namespace this test makes, on a veth pair with documentation-range
// addresses), nor the host's 127.0.0.1, nor the daemon's API port from the daemon's own boxes;
// raw and packet sockets are refused. Controls: the same probes from the host reach the same
// listeners, and a box reaches its own listeners on any port.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "redteam/probe_runner.hpp"
#include "support/raw_socket.hpp"
#include "support/uid_range.hpp"

namespace agentbox::redteam {
namespace {

// ---------------------------------------------------------------- sockets the test serves

UniqueFd bound_socket(int type, const std::string& address) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
  if (!fd) throw sys_error("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) throw Error("bad address " + address);
  check(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), "bind(" + address + ")");
  if (type == SOCK_STREAM) check(::listen(fd.get(), 16), "listen(" + address + ")");
  return fd;
}

uint16_t port_of(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  check(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), "getsockname");
  return ntohs(sa.sin_port);
}

// A TCP listener (connects complete in the backlog, nobody needs to accept) and a UDP echo
// served by a thread, both on one address; they close with the object.
class Listeners {
 public:
  explicit Listeners(const std::string& address)
      : address_(address), tcp_(bound_socket(SOCK_STREAM, address)), udp_(bound_socket(SOCK_DGRAM, address)) {
    echo_ = std::thread([this] { echo(); });
  }
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;
  ~Listeners() {
    stop_ = true;
    echo_.join();
  }
  const std::string& address() const { return address_; }
  std::string tcp_port() const { return std::to_string(port_of(tcp_.get())); }
  std::string udp_port() const { return std::to_string(port_of(udp_.get())); }

 private:
  void echo() {
    while (!stop_) {
      pollfd p{udp_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[512];
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      const ssize_t n = ::recvfrom(udp_.get(), buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
      if (n > 0) ::sendto(udp_.get(), buf, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }

  std::string address_;
  UniqueFd tcp_, udp_;
  std::atomic<bool> stop_{false};
  std::thread echo_;
};

// ---------------------------------------------------------------- the test host

// Runs a setup command; failures are the fixture's, reported with the command's output.
void must_run(const Argv& argv) {
  const RunResult r = run(argv, RunOptions{.timeout = 10s});
  if (r.exit_code != 0) {
    std::string line;
    for (const auto& a : argv) line += a + " ";
    throw Error("'" + line + "' failed: " + r.describe());
  }
}

// The documentation /24 the test hosts use: TEST-NET-2 or TEST-NET-3, whichever no host
// interface holds. (TEST-NET-1, 192.0.2.0/24, is the real network of our CI VMs: eth0 is
// 192.0.2.2 with gateway 192.0.2.1, so a test route there would hijack the host's traffic.)
std::string free_documentation_net() {
  ifaddrs* list = nullptr;
  check(::getifaddrs(&list), "getifaddrs");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, ::freeifaddrs);
  for (const std::string prefix : {"198.51.100.", "203.0.113."}) {
    bool taken = false;
    for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
      const std::string addr = text;
      // Our own test hosts' ends (abxh*) do not count: other test processes hold other /30s.
      if (addr.starts_with(prefix) && !std::string(a->ifa_name).starts_with("abxh")) taken = true;
    }
    if (!taken) return prefix;
  }
  throw Error("both TEST-NET-2 and TEST-NET-3 are in use on this host: no safe test addresses");
}

// A /30 of that /24 that no other test process holds: the claim is an abstract unix socket
// name, released by the kernel when this process ends, however it ends.
class SubnetClaim {
 public:
  SubnetClaim() : prefix_(free_documentation_net()) {
    for (int i = 0; i < 64; ++i) {
      UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_un sa{};
      sa.sun_family = AF_UNIX;
      const std::string name = "abx-redteam-subnet-" + std::to_string(i);
      std::copy(name.begin(), name.end(), sa.sun_path + 1);  // sun_path[0] = 0: abstract
      const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) == 0) {
        index_ = i;
        claim_ = std::move(fd);
        return;
      }
    }
    throw Error("all 64 test subnets of " + prefix_ + "0/24 are claimed");
  }
  std::string host_address() const { return prefix_ + std::to_string(4 * index_ + 1); }
  std::string peer_address() const { return prefix_ + std::to_string(4 * index_ + 2); }

 private:
  std::string prefix_;
  int index_ = -1;
  UniqueFd claim_;
};

// Moves the calling thread into a network namespace for its lifetime (sockets made meanwhile
// stay in that namespace), and back.
class InNetns {
 public:
  explicit InNetns(const std::string& path)
      : home_(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)),
        target_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (!home_ || !target_) throw sys_error("open(netns " + path + ")");
    check(::setns(target_.get(), CLONE_NEWNET), "setns(" + path + ")");
  }
  InNetns(const InNetns&) = delete;
  InNetns& operator=(const InNetns&) = delete;
  ~InNetns() {
    if (::setns(home_.get(), CLONE_NEWNET) != 0) std::abort();  // never go on in the wrong namespace
  }

 private:
  UniqueFd home_, target_;
};

// A test host: netns "abx-rt-<pid>" linked to the host by a veth pair, the host end holding
// .1 and the peer .2 of a claimed /30, with a TCP listener and a UDP echo on the peer address.
class RedteamNetTestHost : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string id = std::to_string(::getpid());
    netns_ = "abx-rt-" + id;
    veth_host_ = "abxh" + id;  // interface names: at most 15 characters
    veth_peer_ = "abxp" + id;
    must_run({"ip", "netns", "add", netns_});
    netns_made_ = true;
    must_run({"ip", "link", "add", veth_host_, "type", "veth", "peer", "name", veth_peer_, "netns", netns_});
    veth_made_ = true;
    must_run({"ip", "addr", "add", subnet_.host_address() + "/30", "dev", veth_host_});
    must_run({"ip", "link", "set", veth_host_, "up"});
    must_run({"ip", "-n", netns_, "addr", "add", subnet_.peer_address() + "/30", "dev", veth_peer_});
    must_run({"ip", "-n", netns_, "link", "set", veth_peer_, "up"});
    must_run({"ip", "-n", netns_, "link", "set", "lo", "up"});
    InNetns in("/run/netns/" + netns_);
    listeners_.emplace(subnet_.peer_address());
  }

  // Always: the listeners close, deleting the netns removes the peer and with it the pair.
  void TearDown() override {
    listeners_.reset();
    if (veth_made_) run({"ip", "link", "del", veth_host_}, RunOptions{.timeout = 10s});
    if (netns_made_) run({"ip", "netns", "del", netns_}, RunOptions{.timeout = 10s});
  }

  const Listeners& peer() const { return *listeners_; }

  // The veth link comes up asynchronously: retry the control briefly before judging it.
  ProbeResult control(const Argv& args) {
    ProbeResult r = probe_outside(args);
    for (int i = 0; i < 20 && r.run.exit_code != 0; ++i) {
      std::this_thread::sleep_for(100ms);
      r = probe_outside(args);
    }
    return r;
  }

  SubnetClaim subnet_;
  std::string netns_, veth_host_, veth_peer_;
  bool netns_made_ = false, veth_made_ = false;
  std::optional<Listeners> listeners_;
};

TEST_F(RedteamNetTestHost, TcpToANonLoopbackAddressIsUnreachable) {
  const std::string host = peer().address(), port = peer().tcp_port();
  ASSERT_TRUE(Allowed(control({"tcp-connect", host, port})));

  BoxHome home;
  // The box's netns has no route out: the kernel refuses before sending anything.
  EXPECT_TRUE(Blocked(home.box().probe({"tcp-connect", host, port}), "ENETUNREACH"));
}

TEST_F(RedteamNetTestHost, UdpToANonLoopbackAddressIsUnreachable) {
  const std::string host = peer().address(), port = peer().udp_port();
  ASSERT_TRUE(Allowed(control({"udp-send", host, port})));
  BoxHome home;
  // Landlock does not cover UDP: the network namespace alone stops it.
  EXPECT_TRUE(Blocked(home.box().probe({"udp-send", host, port}), "ENETUNREACH"));
}

// The host's own loopback is not the box's: a listener on the host's 127.0.0.1 is out of reach.
TEST(RedteamNet, HostLoopbackIsNotReachable) {
  Listeners host_lo("127.0.0.1");
  const std::string tcp_port = host_lo.tcp_port(), udp_port = host_lo.udp_port();
  EXPECT_TRUE(Allowed(probe_outside({"tcp-connect", "127.0.0.1", tcp_port})));
  EXPECT_TRUE(Allowed(probe_outside({"udp-send", "127.0.0.1", udp_port})));

  BoxHome home;
  BoxRun box = home.box();
  // The box's own lo has nothing on that port: refused there, never the host's listener.
  EXPECT_TRUE(Blocked(box.probe({"tcp-connect", "127.0.0.1", tcp_port}), "ECONNREFUSED"));
  // UDP: the box's lo answers "port unreachable" or nothing; never the host's echo.
  EXPECT_TRUE(BlockedWithAnyOf(box.probe({"udp-send", "127.0.0.1", udp_port}), {"ECONNREFUSED", "ETIMEDOUT"}));
}

// A server the box runs itself, on its own loopback, and the probe connecting to it from the
// same box: the control of every test here (the probe can connect where connecting is right).
std::string own_listener_script(const std::string& probe) {
  // socat listens inside the box; once /proc/net/tcp shows it in LISTEN state (0A), the probe
  // connects. Exit 3: the listener never came up.
  return "timeout 10 socat TCP-LISTEN:$1,bind=127.0.0.1,reuseaddr EXEC:/bin/true & "
         "hex=$(printf '%04X' $1); i=0; "
         "while ! grep -q \":$hex 00000000:0000 0A\" /proc/net/tcp; do "
         "i=$((i+1)); [ $i -gt 200 ] && exit 3; sleep 0.05; done; " +
         probe + " tcp-connect 127.0.0.1 $1; rc=$?; kill $! 2>/dev/null; exit $rc";
}

ProbeResult connect_to_own_listener(const BoxRun& box, uint16_t port) {
  return to_probe_result(box.command({"/bin/sh", "-c", own_listener_script(kProbeInBox), "sh", std::to_string(port)}),
                         "inside a box, own listener on port " + std::to_string(port));
}

// No Landlock TCP rule: a box's programs reach their own servers on any port (a dev server and
// the browser-like client that tests it, a database and its app). With the rule, each of these
// was EACCES.
TEST(RedteamNet, ABoxReachesItsOwnListenersOnAnyPort) {
  BoxHome home;
  BoxRun box = home.box();
  for (uint16_t port : {1024, 8124, 28081, 65535}) EXPECT_TRUE(Allowed(connect_to_own_listener(box, port)));
}

// ---------------------------------------------------------------- the daemon's own boxes

// A non-loopback IPv4 address of this host (not one of our test hosts' veth ends), if any.
std::optional<std::string> host_address() {
  ifaddrs* list = nullptr;
  check(::getifaddrs(&list), "getifaddrs");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, ::freeifaddrs);
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
    if ((a->ifa_flags & IFF_LOOPBACK) || std::string(a->ifa_name).starts_with("abx")) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    return std::string(text);
  }
  return std::nullopt;
}

// `agentbox serve` listening on every interface (port 0) with a temporary state directory, its
// output in a file. The probe runs in the boxes it makes (copied into the account's home, which
// its box shows at /home/NAME). Stopped with SIGTERM, which stops its boxes, when the object ends.
class ServeDaemon {
 public:
  ServeDaemon() {
    std::ifstream random("/dev/urandom", std::ios::binary);
    char bytes[16];
    random.read(bytes, sizeof bytes);
    for (unsigned char b : bytes) key_ += "0123456789abcdef"[b >> 4], key_ += "0123456789abcdef"[b & 15];
    // Each daemon needs a uid range no other running daemon holds (box/uid_range_guard.hpp):
    // one per attempt from this process's share, the next one if another test holds it.
    for (int attempt = 0; port_ == 0; ++attempt) {
      process_.emplace(Argv{"/bin/sh", "-c",
                            "exec env -u AGENTBOX_CONFIG -u AGENTBOX_LISTEN -u AGENTBOX_STATE_DIR "
                            "AGENTBOX_API_KEY=\"$1\" AGENTBOX_UID_BASE=\"$5\" \"$2\" serve --listen 0.0.0.0:0 "
                            "--state \"$3\" >\"$4\" 2>&1",
                            "sh", key_, agentbox_path(), state(), dir_ / "serve.log",
                            std::to_string(testing::test_uid_base(attempt))});
      const std::regex ready(R"(serving on http://0\.0\.0\.0:(\d+))");
      const auto deadline = Clock::now() + 30s;
      while (port_ == 0) {
        const std::string s = log_text();
        if (std::smatch m; std::regex_search(s, m, ready)) {
          port_ = static_cast<uint16_t>(std::stoi(m[1]));
          break;
        }
        if (!process_->running() && s.find(testing::kUidRangeInUse) != std::string::npos && attempt < 20) break;
        if (!process_->running() || Clock::now() > deadline) throw Error("agentbox serve did not come up: " + s);
        std::this_thread::sleep_for(50ms);
      }
    }
  }

  uint16_t port() const { return port_; }
  std::string state() const { return dir_ / "state"; }
  std::string log_text() const {
    std::ifstream in(dir_ / "serve.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  struct Reply {
    int status = 0;
    nlohmann::json body;  // discarded (not an object) when the body is not JSON
    std::string text;     // the body as it came
  };
  // One request on its own connection (Connection: close); the answer's status and JSON body.
  Reply request(const std::string& method, const std::string& target, const std::string& user,
                const std::string& body = {}) const {
    UniqueFd fd = testing::connect_loopback(port_, 60);
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key_ +
                      "\r\nX-User-Id: " + user + "\r\nConnection: close\r\n";
    if (!body.empty())
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    if (!testing::send_all(fd.get(), req)) throw Error("sending to agentbox serve failed");
    std::string answer;
    char buf[16384];
    ssize_t n;
    while ((n = ::recv(fd.get(), buf, sizeof buf, 0)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) answer.append(buf, static_cast<size_t>(n));
    const size_t end = answer.find("\r\n\r\n");
    if (answer.size() < 12 || end == std::string::npos)
      throw Error("no answer from agentbox serve to " + method + " " + target + " (" +
                  (n < 0 ? std::string(std::strerror(errno)) : "closed") + "): '" + answer +
                  "'; its log: " + log_text());
    std::string text = answer.substr(end + 4);
    return {std::stoi(answer.substr(9, 3)), nlohmann::json::parse(text, nullptr, false), text};
  }

  // Runs a shell command line in user's box (POST /execute, no pty) as a probe run.
  ProbeResult in_box(const std::string& user, const std::string& command, const std::string& where) const {
    nlohmann::json body = {{"command", command}, {"pty", false}};
#ifdef AGENTBOX_SANITIZE
    body["env"] = {{"ASAN_OPTIONS", "detect_leaks=0"}};  // as BoxRun: no ptrace for LeakSanitizer
#endif
    const Reply r = request("POST", "/execute?wait=30", user, body.dump());
    RunResult run;
    if (r.status != 200 || !r.body.is_object()) {
      run.err = "POST /execute answered " + std::to_string(r.status) + ": " + r.body.dump();
      return to_probe_result(run, where);
    }
    run.exit_code = r.body["exit_code"].is_number() ? r.body["exit_code"].get<int>() : -1;
    for (const auto& piece : r.body["output"])
      (piece["type"] == "stdout" ? run.out : run.err) += piece["data"].get<std::string>();
    return to_probe_result(run, where);
  }

  // Starts a shell command line in user's box and leaves it running (POST /execute?wait=0).
  void start_in_box(const std::string& user, const std::string& command) const {
    const nlohmann::json body = {{"command", command}, {"pty", false}};
    const Reply r = request("POST", "/execute?wait=0", user, body.dump());
    if (r.status != 200 || r.body.value("status", "") != "running")
      throw Error("POST /execute of '" + command + "' answered " + std::to_string(r.status) + ": " + r.text);
  }

  // Waits until GET /ports of user lists port (the server in the box listens).
  void await_listener(const std::string& user, uint16_t port) const {
    const auto deadline = Clock::now() + 30s;
    for (;;) {
      const Reply r = request("GET", "/ports", user);
      if (r.status != 200) throw Error("GET /ports answered " + std::to_string(r.status) + ": " + r.text);
      for (const auto& p : r.body["ports"])
        if (p["port"] == port) return;
      if (Clock::now() > deadline) throw Error("port " + std::to_string(port) + " never listed: " + r.text);
      std::this_thread::sleep_for(50ms);
    }
  }

  // The probe, in user's home (copied there on first use): its path as the box sees it.
  std::string probe_for(const std::string& user) const {
    // A write makes the user's volume (a read of a new user makes none).
    const Reply made = request("POST", "/files/mkdir", user, R"({"path": ".probe"})");
    if (made.status != 200) throw Error("POST /files/mkdir: " + made.text);
    const Reply cwd = request("GET", "/files/cwd", user);
    const std::string home = cwd.body.value("home", "");
    if (cwd.status != 200 || !home.starts_with("/home/")) throw Error("GET /files/cwd: " + cwd.body.dump());
    const std::string host_copy = state() + "/volumes/" + home.substr(6) + "/home/abx-probe";
    std::filesystem::copy_file(probe_path(), host_copy, std::filesystem::copy_options::overwrite_existing);
    check(::chmod(host_copy.c_str(), 0755), "chmod(" + host_copy + ")");
    return home + "/abx-probe";
  }

 private:
  TempDir dir_{"serve"};
  std::string key_;
  std::optional<Background> process_;
  uint16_t port_ = 0;
};

// The daemon listens on every interface here, as it may in production: none of its addresses
// is reachable from the boxes it makes (they join the accounts' own network namespaces). The
// box's own listener on the same port number is (the control inside the box).
TEST(RedteamNetDaemon, TheDaemonsApiPortIsNotReachableFromItsBoxes) {
  ServeDaemon daemon;
  const std::string port = std::to_string(daemon.port());
  const std::optional<std::string> host = host_address();
  ASSERT_TRUE(Allowed(probe_outside({"tcp-connect", "127.0.0.1", port})));
  if (host) {
    ASSERT_TRUE(Allowed(probe_outside({"tcp-connect", *host, port})));
  }

  const std::string user = "redteam-net";
  const std::string probe = daemon.probe_for(user);
  const std::string own = std::regex_replace(own_listener_script(probe), std::regex("\\$1"), port);
  EXPECT_TRUE(Allowed(daemon.in_box(user, own, "in the daemon's box, own listener on the daemon's port number")));
  EXPECT_TRUE(
      Blocked(daemon.in_box(user, probe + " tcp-connect 127.0.0.1 " + port, "in the daemon's box"), "ECONNREFUSED"));
  if (host) {
    EXPECT_TRUE(Blocked(daemon.in_box(user, probe + " tcp-connect " + *host + " " + port, "in the daemon's box"),
                        "ENETUNREACH"));
  } else {
    std::cerr << "no non-loopback IPv4 address on this host: only 127.0.0.1 was tried\n";
  }
}

// Another account's server, and a listener on the host's 127.0.0.1: bob's box and bob's /proxy
// enter only bob's network namespace, so on the same port numbers both are refused to him, the
// proxy answering 502 without a byte of them. Controls: alice reaches her server from her box
// and through her own /proxy (the secret it serves comes back); the host reaches its listener.
TEST(RedteamNetDaemon, AnotherBoxsServerAndTheHostsLoopbackAreUnreachableFromABoxAndThroughTheProxy) {
  ServeDaemon daemon;
  const std::string alice = "redteam-alice", bob = "redteam-bob";
  constexpr uint16_t kAlicesPort = 28090;
  const std::string secret =
      "alices-secret-" + std::to_string(::getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  const nlohmann::json file = {{"path", "site/secret.txt"}, {"content", secret}};
  ASSERT_EQ(daemon.request("POST", "/files/write", alice, file.dump()).status, 200);
  daemon.start_in_box(alice, "exec /usr/bin/python3 -m http.server " + std::to_string(kAlicesPort) +
                                 " --bind 127.0.0.1 --directory site");
  daemon.await_listener(alice, kAlicesPort);
  const std::string port = std::to_string(kAlicesPort);
  const std::string alices_probe = daemon.probe_for(alice), bobs_probe = daemon.probe_for(bob);

  // Controls: alice's own box and alice's own /proxy reach her server.
  EXPECT_TRUE(Allowed(daemon.in_box(alice, alices_probe + " tcp-connect 127.0.0.1 " + port, "in alice's box")));
  const auto own = daemon.request("GET", "/proxy/" + port + "/secret.txt", alice);
  EXPECT_EQ(own.status, 200) << own.text;
  EXPECT_EQ(own.text, secret);

  // bob: from his box, and through /proxy, with his box running (so the proxy enters his
  // namespace rather than answering "no box").
  EXPECT_TRUE(
      Blocked(daemon.in_box(bob, bobs_probe + " tcp-connect 127.0.0.1 " + port, "in bob's box"), "ECONNREFUSED"));
  for (const std::string& target :
       {"/proxy/" + port + "/secret.txt", "/proxy/" + port + "/secret.txt?user_id=" + bob}) {
    const auto r = daemon.request("GET", target, bob);
    EXPECT_EQ(r.status, 502) << target << ": " << r.text;
    EXPECT_NE(r.text.find("refused"), std::string::npos) << r.text;
    EXPECT_EQ(r.text.find(secret), std::string::npos) << r.text;
  }
  // Naming alice in the query while the header names bob is refused, not resolved to either.
  const auto mixed = daemon.request("GET", "/proxy/" + port + "/secret.txt?user_id=" + alice, bob);
  EXPECT_EQ(mixed.status, 400) << mixed.text;
  EXPECT_EQ(mixed.text.find(secret), std::string::npos) << mixed.text;
  const auto bobs_ports = daemon.request("GET", "/ports", bob);
  EXPECT_EQ(bobs_ports.status, 200);
  EXPECT_EQ(bobs_ports.body, nlohmann::json::parse(R"({"ports":[]})")) << bobs_ports.text;

  // The host's loopback: a listener the host reaches is refused to bob's box and his /proxy.
  Listeners host("127.0.0.1");
  ASSERT_TRUE(Allowed(probe_outside({"tcp-connect", "127.0.0.1", host.tcp_port()})));
  EXPECT_TRUE(Blocked(daemon.in_box(bob, bobs_probe + " tcp-connect 127.0.0.1 " + host.tcp_port(), "in bob's box"),
                      "ECONNREFUSED"));
  const auto to_host = daemon.request("GET", "/proxy/" + host.tcp_port() + "/", bob);
  EXPECT_EQ(to_host.status, 502) << to_host.text;
  EXPECT_NE(to_host.text.find("refused"), std::string::npos) << to_host.text;
}

TEST(RedteamNet, RawAndPacketSocketsAreRefused) {
  BoxHome home;
  BoxRun box = home.box();
  EXPECT_TRUE(Blocked(box.probe({"raw-socket"}), "EPERM"));
  EXPECT_TRUE(Blocked(box.probe({"packet-socket"}), "EPERM"));
  EXPECT_TRUE(Allowed(probe_outside({"raw-socket"})));
  EXPECT_TRUE(Allowed(probe_outside({"packet-socket"})));
}

}  // namespace
}  // namespace agentbox::redteam
