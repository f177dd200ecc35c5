"""Two network namespaces a test owns, so that it can name addresses other than 127.0.0.1
without any packet leaving the machine (issue 14, "How tests name other addresses").

  world  198.51.100.1/24 on `world0`, default route via the bait: the daemon, its clients and
         the control probes run here (`nsenter --net=...`; never `ip netns exec`, which
         remounts /sys and hides the cgroup hierarchies the daemon needs).
  bait   198.51.100.2/24 on `bait0` (the veth's other end), and holds the addresses the tests
         name: 203.0.113.7 ("the internet"), 10.0.0.1 ("a private network") and
         169.254.169.254 ("cloud metadata"). Every other address world sends to arrives here too.

The interfaces are created inside the new namespaces, so their names never meet the host's.
IPv6 is off on the veth (no router solicitations or neighbour discovery on the wire): every
packet the bait sees from world is one some program in world chose to send.

Sockets of the test process are made in a namespace with `entered(path)`: the calling thread
joins it for the block and returns; a socket stays in the namespace it was made in.
"""
import contextlib
import ctypes
import os
import re
import secrets
import socket
import subprocess
import threading

WORLD_ADDRESS = "198.51.100.1"
BAIT_LINK_ADDRESS = "198.51.100.2"
INTERNET = "203.0.113.7"
PRIVATE = "10.0.0.1"
METADATA = "169.254.169.254"
BAIT_ADDRESSES = (INTERNET, PRIVATE, METADATA)
WORLD_IF = "world0"
BAIT_IF = "bait0"

_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
_NAME = re.compile(r"^abx-(?:world|bait)-(\d+)-[0-9a-f]+$")


def _setns(fd):
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def entered(netns_path):
    """The calling thread is in the namespace for the block, then back where it was."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            try:
                _setns(home)
            except OSError:
                os._exit(70)  # a thread left in another namespace would poison every later test
    finally:
        os.close(home)


def _ip(*args):
    subprocess.run(["ip", *args], check=True, timeout=30, stdin=subprocess.DEVNULL, capture_output=True)


def netns_names():
    out = subprocess.run(["ip", "netns", "list"], check=True, timeout=30, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _remove_stale():
    """Namespaces of earlier runs whose process died without cleaning up (SIGKILL)."""
    for name in netns_names():
        m = _NAME.match(name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            subprocess.run(["ip", "netns", "del", name], timeout=30, capture_output=True)


class World:
    """world + bait as above; remove() deletes both (call it after everything in world stopped)."""

    def __init__(self):
        _remove_stale()
        tag = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.world = f"abx-world-{tag}"
        self.bait = f"abx-bait-{tag}"
        self.made = []
        try:
            for ns in (self.world, self.bait):
                _ip("netns", "add", ns)
                self.made.append(ns)
                # New interfaces get no IPv6; lo (made with the namespace) keeps ::1.
                self._sysctl(ns, "net/ipv6/conf/default/disable_ipv6", "1")
            _ip("-n", self.world, "link", "add", WORLD_IF, "type", "veth", "peer", "name", BAIT_IF, "netns", self.bait)
            _ip("-n", self.world, "addr", "add", f"{WORLD_ADDRESS}/24", "dev", WORLD_IF)
            _ip("-n", self.bait, "addr", "add", f"{BAIT_LINK_ADDRESS}/24", "dev", BAIT_IF)
            for address in BAIT_ADDRESSES:
                _ip("-n", self.bait, "addr", "add", f"{address}/32", "dev", BAIT_IF)
            for ns, dev in ((self.world, WORLD_IF), (self.bait, BAIT_IF)):
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", self.world, "route", "add", "default", "via", BAIT_LINK_ADDRESS)
        except BaseException:
            self.remove()
            raise

    @staticmethod
    def path(ns):
        return f"/run/netns/{ns}"

    @property
    def world_path(self):
        return self.path(self.world)

    @property
    def bait_path(self):
        return self.path(self.bait)

    def _sysctl(self, ns, key, value):
        # /proc/sys/net shows the namespace of the thread that opens it.
        with entered(self.path(ns)), open(f"/proc/sys/{key}", "w") as f:
            f.write(value)

    def nsenter(self):
        """The command prefix that runs a program in world."""
        return ["nsenter", f"--net={self.world_path}"]

    def remove(self):
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], timeout=30, capture_output=True)
        self.made = []


class Forwarder:
    """127.0.0.1:PORT in the test's namespace relayed to 127.0.0.1:target in another one, so
    that httpx and the e2e helpers speak to a daemon inside world unchanged."""

    def __init__(self, netns_path, target_port):
        self.netns_path = netns_path
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.open = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            with entered(self.netns_path):
                upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                upstream.connect(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                upstream.close()
                continue
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self):
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self.listener.close()
        with self.lock:
            for s in self.open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.open = []
