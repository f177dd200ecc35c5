// Red team, network: a box's network namespace holds only its own `lo`, and it is the whole
// boundary (no Landlock TCP rule, DESIGN §3). No TCP or UDP reaches a non-loopback address (a
// test host in a network namespace this test makes, on a veth pair with documentation-range
// addresses), nor the host's 127.0.0.1; raw and packet sockets are
// refused. Controls: the same probes from the host reach the same
// listeners, and a box reaches its own listeners on any port.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <ifaddrs.h>
#include <sys/un.h>

#include <atomic>
#include <memory>
#include <thread>

#include "redteam/probe_runner.hpp"

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
      : home_(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)), target_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
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
