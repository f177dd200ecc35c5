"""The client and origin of bench/egress_tunnels_bench.sh: N CONNECT tunnels spread over the boxes
of many accounts, each through its own box's egress proxy, to an echo server on the host's
127.0.0.1; the daemon's RSS and CPU are read from /proc while the tunnels are held idle and then
while each carries a trickle of traffic (one small message and its echo every PERIOD seconds).

One process, one thread: the echo server's socket is made in the host's network namespace; each
tunnel's socket is made inside its box's namespace (setns into /proc/PID/ns/net of a process of
that box, then back), so every tunnel arrives on its account's real listener.

    python3 egress_tunnels.py --daemon PID --marker SLEEP_ARG_PREFIX --origin-port P \
        [--tunnels 1000] [--proxy-port 3128] [--idle 10] [--trickle 10] [--period 1.0]
"""
import argparse
import ctypes
import os
import resource
import selectors
import socket
import statistics
import sys
import threading
import time

CLONE_NEWNET = 0x40000000
HZ = os.sysconf("SC_CLK_TCK")
MESSAGE = b"m" * 64
libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def box_pids(marker):
    """The host pids of the boxes' `sleep MARKER.N` processes, by N."""
    found = {}
    prefix = ("sleep\0" + marker).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(prefix):
            found[cmd[len(prefix):].rstrip(b"\0").decode()] = int(entry)
    return found


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ  # utime + stime, all threads


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def meminfo_kib(*keys):
    total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            name, value = line.split(":", 1)
            if name in keys:
                total += int(value.split()[0])
    return total


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Snapshot:
    def __init__(self, daemon):
        self.t = time.monotonic()
        self.cpu = cpu_seconds(daemon)
        self.rss = status_kib(daemon, "VmRSS")
        self.threads = status_kib(daemon, "Threads")
        self.fds = fds(daemon)
        self.kernel = meminfo_kib("Slab", "KernelStack", "PageTables", "Percpu")


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        piece = sock.recv(n - len(data))
        if not piece:
            raise ConnectionError("closed early")
        data += piece
    return data


def open_tunnel(netns_fd, host_ns, proxy_port, origin):
    setns(netns_fd)
    try:
        s = socket.socket()
    finally:
        setns(host_ns)
    s.connect(("127.0.0.1", proxy_port))
    s.sendall(f"CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        piece = s.recv(4096)
        if not piece:
            raise ConnectionError("the proxy closed the tunnel: " + head.decode(errors="replace"))
        head += piece
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError("the proxy refused: " + head.split(b"\r\n")[0].decode(errors="replace"))
    s.sendall(MESSAGE)  # end to end once: the echo comes back through the tunnel
    if recv_exactly(s, len(MESSAGE)) != MESSAGE:
        raise ConnectionError("wrong echo")
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", type=int, required=True)
    ap.add_argument("--marker", required=True)
    ap.add_argument("--origin-port", type=int, required=True)
    ap.add_argument("--origin-host", default="origin.test")
    ap.add_argument("--proxy-port", type=int, default=3128)
    ap.add_argument("--tunnels", type=int, default=1000)
    ap.add_argument("--idle", type=float, default=10)
    ap.add_argument("--trickle", type=float, default=10)
    ap.add_argument("--period", type=float, default=1.0)
    args = ap.parse_args()
    daemon = args.daemon

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    pids = box_pids(args.marker)
    if not pids:
        sys.exit("egress_tunnels.py: no box processes found")
    accounts = sorted(pids)
    host_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    netns = {a: os.open(f"/proc/{pids[a]}/ns/net", os.O_RDONLY) for a in accounts}

    sel = selectors.DefaultSelector()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", args.origin_port))
    server.listen(4096)
    server.setblocking(False)
    sel.register(server, selectors.EVENT_READ, "accept")

    def serve_origin(timeout):
        """Runs the echo server's events for at most timeout seconds."""
        for key, _ in sel.select(timeout):
            if key.data == "accept":
                while True:
                    try:
                        conn, _ = server.accept()
                    except BlockingIOError:
                        break
                    conn.setblocking(False)
                    sel.register(conn, selectors.EVENT_READ, "echo")
            elif key.data == "echo":
                try:
                    data = key.fileobj.recv(65536)
                except ConnectionError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                else:
                    key.fileobj.sendall(data)  # small: the send buffer takes it
            else:
                key.data(key.fileobj)

    print(f"egress tunnels: {args.tunnels} tunnels over {len(accounts)} accounts' boxes, "
          f"CONNECT {args.origin_host}:{args.origin_port} through 127.0.0.1:{args.proxy_port} in each box")
    # The daemon with the boxes up and no tunnel: the baseline of RSS and idle CPU.
    base_start = Snapshot(daemon)
    time.sleep(args.idle)
    before = Snapshot(daemon)
    base_cpu = (before.cpu - base_start.cpu) / (before.t - base_start.t)

    # Opening: the origin answers on a thread of its own meanwhile (the tunnels open blocking).
    tunnels = []
    t0 = time.monotonic()
    stop = threading.Event()

    def origin_loop():
        while not stop.is_set():
            serve_origin(0.05)

    th = threading.Thread(target=origin_loop)
    th.start()
    try:
        for i in range(args.tunnels):
            a = accounts[i % len(accounts)]
            tunnels.append(open_tunnel(netns[a], host_ns, args.proxy_port, f"{args.origin_host}:{args.origin_port}"))
    finally:
        stop.set()
        th.join()
    opened = time.monotonic() - t0

    # Idle: every tunnel open, nothing moving.
    time.sleep(1)
    idle_start = Snapshot(daemon)
    time.sleep(args.idle)
    idle_end = Snapshot(daemon)

    # Trickle: each tunnel sends MESSAGE every period seconds (spread evenly), the origin echoes
    # it, the client checks the echo; the origin and the client share this thread.
    pending = {}
    received = [0]
    latencies = []

    def on_echo(sock):
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("a tunnel closed during the trickle")
        got = pending.get(sock, (0, 0.0))
        left = got[0] - len(data)
        if left <= 0:
            latencies.append(time.monotonic() - got[1])
            received[0] += 1
            pending.pop(sock, None)
        else:
            pending[sock] = (left, got[1])

    for s in tunnels:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, on_echo)
    sent = 0
    trickle_start = Snapshot(daemon)
    start = time.monotonic()
    step = args.period / len(tunnels)
    nxt = start
    i = 0
    while True:
        now = time.monotonic()
        if now - start >= args.trickle:
            break
        while nxt <= now:
            s = tunnels[i % len(tunnels)]
            if s not in pending:
                s.send(MESSAGE)
                pending[s] = (len(MESSAGE), time.monotonic())
                sent += 1
            i += 1
            nxt += step
        serve_origin(max(0.0, min(nxt - time.monotonic(), 0.01)))
    trickle_end = Snapshot(daemon)
    drain_until = time.monotonic() + 2
    while pending and time.monotonic() < drain_until:
        serve_origin(0.05)

    for s in tunnels:
        sel.unregister(s)
        s.close()
    time.sleep(1)
    closed = Snapshot(daemon)

    n = args.tunnels
    row = "  {:<58} {:>14}"
    print(f"load {open('/proc/loadavg').read().split()[:3]} at the end of the trickle")
    print(row.format("open them all (CONNECT, 200, first echo), total", f"{opened * 1000:.0f} ms"))
    print(row.format("daemon RSS before the tunnels", f"{before.rss / 1024:.1f} MiB"))
    print(row.format(f"daemon RSS with {n} tunnels idle", f"{idle_end.rss / 1024:.1f} MiB"))
    print(row.format(f"daemon RSS with {n} tunnels trickling", f"{trickle_end.rss / 1024:.1f} MiB"))
    print(row.format("daemon RSS after they closed", f"{closed.rss / 1024:.1f} MiB"))
    print(row.format("  RSS per tunnel (trickling - before) / N",
                     f"{(max(idle_end.rss, trickle_end.rss) - before.rss) / n:.1f} KiB"))
    print(row.format("daemon descriptors before / with the tunnels", f"{before.fds} / {idle_end.fds}"))
    print(row.format("daemon threads", f"{idle_end.threads}"))
    print(row.format("kernel (Slab+KernelStack+PageTables+Percpu) growth / N (noisy)",
                     f"{(idle_end.kernel - before.kernel) / n:.1f} KiB"))
    idle_cpu = (idle_end.cpu - idle_start.cpu) / (idle_end.t - idle_start.t)
    print(row.format(f"daemon CPU, boxes up, no tunnel ({args.idle:g} s)", f"{base_cpu * 100:.2f} % of a core"))
    print(row.format(f"daemon CPU, {n} tunnels idle ({args.idle:g} s)", f"{idle_cpu * 100:.2f} % of a core"))
    trickle_cpu = trickle_end.cpu - trickle_start.cpu
    trickle_t = trickle_end.t - trickle_start.t
    print(row.format(f"trickle: {len(MESSAGE)} B each way per tunnel every {args.period:g} s",
                     f"{sent / trickle_t:.0f} messages/s"))
    print(row.format("  echoes back / messages sent", f"{received[0]} / {sent}"))
    if latencies:
        q = statistics.quantiles(latencies, n=100)
        print(row.format("  echo round trip through the tunnel p50 / p99",
                         f"{q[49] * 1e6:.0f} / {q[98] * 1e6:.0f} us"))
    print(row.format("daemon CPU during the trickle", f"{trickle_cpu / trickle_t * 100:.2f} % of a core"))
    if sent:
        print(row.format("  daemon CPU per message (both directions)", f"{trickle_cpu / sent * 1e6:.1f} us"))
    if received[0] != sent:
        sys.exit(f"egress_tunnels.py: {sent - received[0]} echoes missing")


if __name__ == "__main__":
    main()
