"""The bait namespace's side (see netns_world.py): everything world sends is recorded.

* A packet recorder: an AF_PACKET socket on the bait's veth sees every frame world sends,
  so even a SYN to a closed port or a datagram nobody reads is on the record.
* Listeners on all the bait's addresses, so that a probe that gets through has something to
  talk to: an HTTP server on port 80 (answers `bait saw PATH host=HOST`), TCP listeners on
  53 and 443 that accept and read, UDP sockets on 53 and 123 that read.

`settle()` makes sure everything sent before it has been recorded: it sends a marker datagram
from world over the same veth and waits until the recorder has seen it. A test checks what
arrived between two marks: `with bait.window() as seen: ...` then `seen.packets`.
"""
import contextlib
import dataclasses
import itertools
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .netns_world import BAIT_IF, BAIT_LINK_ADDRESS, entered

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # frames the bait itself sends (answers): not world's doing
MARK_PORT = 9        # discard: nobody listens, the marker only has to be seen
HTTP_PORT = 80
TCP_PORTS = (53, 443)
UDP_PORTS = (53, 123)
_PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp"}


@dataclasses.dataclass(frozen=True)
class Packet:
    """One frame from world, as far as the tests care."""
    proto: str          # tcp, udp, icmp, ipv6, arp..., or "ip-N"
    src: str = ""
    dst: str = ""
    dport: int = 0
    syn: bool = False   # a TCP connection attempt (SYN without ACK)
    sport: int = 0      # TCP and UDP
    payload: bytes = b""  # UDP only

    def __str__(self):
        return f"{self.proto} {self.src} -> {self.dst}:{self.dport}{' SYN' if self.syn else ''}"


def _parse(frame):
    ethertype = struct.unpack("!H", frame[12:14])[0]
    if ethertype == 0x0806:
        return None  # ARP: world asking where the bait is, not a packet to anywhere
    if ethertype != 0x0800:
        return Packet(proto=f"ethertype-{ethertype:#06x}")
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    proto = _PROTOCOLS.get(ip[9], f"ip-{ip[9]}")
    src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
    l4 = ip[ihl:]
    if proto == "tcp":
        flags = l4[13]
        sport, dport = struct.unpack("!HH", l4[0:4])
        return Packet(proto, src, dst, dport, syn=bool(flags & 0x02) and not flags & 0x10, sport=sport)
    if proto == "udp":
        sport, dport = struct.unpack("!HH", l4[0:4])
        return Packet(proto, src, dst, dport, payload=bytes(l4[8:]), sport=sport)
    return Packet(proto, src, dst)


def _flow(p):
    return (p.src, p.sport, p.dst, p.dport)


class Window:
    """What arrived during a block. packets and requests are complete when the block has
    ended (an HTTP request is noted before it is answered); the listeners' threads accept and
    read on their own time, so connections and datagrams are awaited with wait_for()."""

    def __init__(self, bait, start):
        self.bait = bait
        self.start = start
        self.packets = []      # Packet, excluding markers
        self.connections = []  # (local address, port) accepted by a TCP listener
        self.datagrams = []    # (port, payload) read by a UDP socket (the address: see packets)
        self.requests = []     # (local address, path, Host header) served over HTTP

    def wait_for(self, kind, condition, timeout=5):
        """The items of kind since the block began, once condition(items) holds."""
        deadline = time.monotonic() + timeout
        with self.bait.lock:
            while True:
                items = getattr(self.bait, kind)[self.start[kind]:]
                left = deadline - time.monotonic()
                if condition(items) or left <= 0:
                    return items
                self.bait.lock.wait(left)

    def summary(self):
        return "\n".join(str(p) for p in self.packets) or "(nothing)"


class Bait:
    def __init__(self, world):
        self.world = world
        self.lock = threading.Condition()
        self.packets, self.connections, self.datagrams, self.requests = [], [], [], []
        self.sockets = []
        self.stopping = False
        self.markers = itertools.count()
        with entered(world.bait_path):
            self.sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.sniffer.bind((BAIT_IF, ETH_P_ALL))
            self.http = self._http_server()
            tcp = [socket.create_server(("0.0.0.0", port)) for port in TCP_PORTS]
            udp = []
            for port in UDP_PORTS:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind(("0.0.0.0", port))
                udp.append(s)
        with entered(world.world_path):
            self.marker_out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sockets = [self.sniffer, *tcp, *udp, self.marker_out]
        self._start(self._sniff)
        self._start(self.http.serve_forever)
        for s in tcp:
            self._start(self._accept, s)
        for s in udp:
            self._start(self._read, s)

    @staticmethod
    def _start(target, *args):
        threading.Thread(target=target, args=args, daemon=True).start()

    def _note(self, kind, item):
        with self.lock:
            getattr(self, kind).append(item)
            self.lock.notify_all()

    def _sniff(self):
        # A packet socket is not woken by close(): poll a flag (a blocked recv would also keep
        # the bait namespace alive after `ip netns del`).
        self.sniffer.settimeout(0.2)
        while not self.stopping:
            try:
                frame, (_, _, pkttype, _, _) = self.sniffer.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if pkttype == PACKET_OUTGOING:
                continue
            packet = _parse(frame)
            if packet:
                self._note("packets", packet)

    def _accept(self, listener):
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            self._note("connections", conn.getsockname())
            self._start(self._drain, conn)

    @staticmethod
    def _drain(conn):
        conn.settimeout(5)
        with contextlib.suppress(OSError), conn:
            while conn.recv(65536):
                pass

    def _read(self, s):
        port = s.getsockname()[1]
        while True:
            try:
                data = s.recv(65536)
            except OSError:
                return
            if self.stopping:  # shutdown() wakes the read with nothing
                return
            self._note("datagrams", (port, data))

    def _http_server(self):
        bait = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                local = self.connection.getsockname()[0]
                bait._note("requests", (local, self.path, self.headers.get("Host")))
                body = f"bait saw {self.path} host={self.headers.get('Host')} at {local}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        return Server(("0.0.0.0", HTTP_PORT), Handler)

    def _mark(self):
        return {k: len(getattr(self, k)) for k in ("packets", "connections", "datagrams", "requests")}

    def settle(self, timeout=10):
        """Returns once a marker sent from world now has been recorded: whatever world sent
        before it was recorded first."""
        payload = f"bait-marker-{next(self.markers)}".encode()
        self.marker_out.sendto(payload, (BAIT_LINK_ADDRESS, MARK_PORT))
        deadline = time.monotonic() + timeout
        with self.lock:
            while not any(p.proto == "udp" and p.payload == payload for p in self.packets):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("the bait's recorder never saw the marker: is it recording at all?")
                self.lock.wait(left)

    @contextlib.contextmanager
    def window(self):
        """Records what arrives while the block runs (settled at both ends)."""
        self.settle()
        with self.lock:
            start = self._mark()
        seen = Window(self, start)
        yield seen
        self.settle()
        with self.lock:
            # A connection opened before the window may still close in it (a late FIN or RST):
            # its packets are the earlier block's, not this one's.
            earlier = {_flow(p) for p in self.packets[:start["packets"]] if p.syn}
            for kind, first in start.items():
                items = getattr(self, kind)[first:]
                if kind == "packets":
                    items = [p for p in items if not (p.proto == "udp" and p.dport == MARK_PORT)
                             and not (p.proto == "tcp" and not p.syn and _flow(p) in earlier)]
                setattr(seen, kind, items)

    def close(self):
        self.stopping = True
        self.http.shutdown()
        self.http.server_close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
