"""What every box shares on the host, reached through the egress proxy (issue 30, findings 2, 3,
6 and 9): the state disk (the network log), the host's TCP memory (tunnels nobody reads), the
host's own services (its addresses) and its ephemeral ports (TIME_WAIT toward one destination).

The daemon runs in a world namespace whose every route leads to a bait namespace holding
203.0.113.7 ("the internet"; netns_world.py). The origins are sockets this test makes in the
bait; world gets an address of its own, 203.0.113.77 beside 198.51.100.1 on its interface, with
a listener on 0.0.0.0 standing for the host's services. Nothing leaves the machine.

Each attack has its control: the same measure with the limit off, or below it, or an entry that
opens the address, shows that the probe and the measure are real.
"""
import contextlib
import json
import os
import re
import selectors
import shlex
import socket
import subprocess
import threading
import time
import uuid

import pytest

from e2e_conftest import agentbox_bin, new_workdir, remove_workdir, run, sh, wait_done
from .netns_world import INTERNET, WORLD_ADDRESS, WORLD_IF, entered

SELF = "203.0.113.77"  # world's own address: "the host's public address"
LATE = "203.0.113.78"  # given to world after the daemon started

FLOODER = f"shared-flood-{uuid.uuid4().hex[:8]}"  # the default policy: every request refused
CALM = f"shared-calm-{uuid.uuid4().hex[:8]}"
STAR = f"shared-star-{uuid.uuid4().hex[:8]}"      # any name; the reserved ranges opened
NAMED = f"shared-named-{uuid.uuid4().hex[:8]}"    # SELF and LATE named by allow_addresses
HOLDER = f"shared-holder-{uuid.uuid4().hex[:8]}"
CHURN = f"shared-churn-{uuid.uuid4().hex[:8]}"
OTHER = f"shared-other-{uuid.uuid4().hex[:8]}"

CONFIG = f"""
[policy.default]
allow = ["internet.test", "self.test"]
[policy.users."{STAR}"]
allow = ["*"]
allow_addresses = ["203.0.113.0/24", "198.51.100.0/24"]
[policy.users."{NAMED}"]
allow = ["*"]
allow_addresses = ["{SELF}/32", "{LATE}/32"]
[policy.users."{CALM}"]
allow_addresses = ["{INTERNET}/32"]
[policy.users."{HOLDER}"]
allow_addresses = ["{INTERNET}/32"]
[policy.users."{CHURN}"]
allow_addresses = ["{INTERNET}/32"]
[policy.users."{OTHER}"]
allow_addresses = ["{INTERNET}/32"]
[hosts]
"internet.test" = "{INTERNET}"
"self.test" = "{SELF}"
"""
MIB = 1 << 20


def _ip(*args):
    subprocess.run(["ip", *args], check=True, timeout=30, capture_output=True, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def self_address(world):
    """world's own address beside its veth's, before the daemon starts."""
    _ip("-n", world.world, "addr", "add", f"{SELF}/32", "dev", WORLD_IF)
    return SELF


@pytest.fixture(scope="module")
def wdaemon(world_daemon_factory, self_address):
    return world_daemon_factory("shared", CONFIG)


@contextlib.contextmanager
def client(daemon, user):
    c = daemon.client(user=user)
    try:
        yield c
    finally:
        c.close()


def listener_in(netns_path, address, backlog=1024):
    with entered(netns_path):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, 0))
    s.listen(backlog)
    return s


class CountingOrigin:
    """Accepts and counts; a GET head gets a line naming this origin, then the connection ends;
    anything else is read until the peer closes, and closed after it (so the peer closes first,
    as a box that churns does). One thread, a selector."""

    def __init__(self, listener, name):
        self.listener, self.name = listener, name
        self.port = listener.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        sel = selectors.DefaultSelector()
        self.listener.setblocking(False)
        sel.register(self.listener, selectors.EVENT_READ)
        heads = {}
        while not self.stop.is_set():
            for key, _ in sel.select(0.1):
                if key.fileobj is self.listener:
                    try:
                        c, _ = self.listener.accept()
                    except OSError:
                        continue
                    self.accepted += 1
                    c.setblocking(False)
                    heads[c] = b""
                    sel.register(c, selectors.EVENT_READ)
                    continue
                c = key.fileobj
                try:
                    data = c.recv(65536)
                except OSError:
                    data = b""
                answered = False
                if data:
                    heads[c] += data
                    if b"\r\n\r\n" in heads[c] and heads[c].startswith(b"GET "):
                        body = f"{self.name} saw {heads[c].split()[1].decode()}".encode()
                        with contextlib.suppress(OSError):
                            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                                      % (len(body), body))
                        answered = True
                    if not answered:
                        continue
                sel.unregister(c)
                heads.pop(c, None)
                c.close()
        for c in list(heads):
            c.close()
        self.listener.close()

    def close(self):
        self.stop.set()
        self.thread.join(10)


class FloodOrigin:
    """Sends from a small send buffer and never reads, on every connection it accepts, until a
    second passes with nothing taken: then that connection is stalled, and held open."""

    def __init__(self, listener):
        self.listener = listener
        self.port = listener.getsockname()[1]
        self.sent = []  # bytes per connection
        self.stalled = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                c, _ = self.listener.accept()
            except OSError:
                continue
            with self.lock:
                i = len(self.sent)
                self.sent.append(0)
                self.stalled.append(False)
            threading.Thread(target=self._flood, args=(c, i), daemon=True).start()

    def _flood(self, c, i):
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)  # its own memory stays small
        c.settimeout(1.0)
        chunk = b"f" * 65536
        try:
            while not self.stop.is_set():
                self.sent[i] += c.send(chunk)
        except OSError:  # timed out: nothing taken for a second
            pass
        self.stalled[i] = True
        self.stop.wait()
        c.close()

    def wait_stalled(self, n, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.stalled) >= n and all(self.stalled):
                    return True
            time.sleep(0.2)
        return False

    def close(self):
        self.stop.set()
        self.listener.close()


def allocated(path):
    """What each of path's files takes on disk (sparse images count their blocks), mounts not
    entered: {path: bytes}."""
    sizes = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(root, d))]
        for f in files:
            with contextlib.suppress(OSError):
                sizes[os.path.join(root, f)] = os.lstat(os.path.join(root, f)).st_blocks * 512
    return sizes


def growth(before, after):
    """Bytes grown in all, and the files that grew most (for the message)."""
    grew = {f: after.get(f, 0) - before.get(f, 0) for f in set(before) | set(after)}
    top = sorted(((n, os.path.basename(f)) for f, n in grew.items() if n), reverse=True)[:4]
    return sum(grew.values()), ", ".join(f"{name} {n / MIB:+.1f} MiB" for n, name in top)


def whole_log(c):
    """Every entry of the caller's network log, newest first."""
    entries, before = [], None
    while True:
        params = {"limit": 1000} | ({"before": before} if before else {})
        page = c.get("/network/log", params=params).json()
        entries += page["entries"]
        before = page["next_before"]
        if not before:
            return entries


# ---- 2. the state disk, through the network log ---------------------------------------------

# Runs in a box: WORKERS processes, each for SECONDS asking its proxy for CONNECTs it refuses
# (the default policy allows neither name): the even ones always the same host, the odd ones a
# new host each time. Prints {"same": n, "distinct": n, "statuses": {code: n}}.
FLOOD = r'''
import json, os, socket, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
seconds, workers = float(sys.argv[1]), int(sys.argv[2])

def worker(k):
    made, statuses = 0, {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        host = "flood.test" if k % 2 == 0 else f"h{k}-{made}.flood.test"
        with socket.create_connection((proxy.hostname, proxy.port)) as s:
            s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        code = answer[9:12].decode()
        statuses[code] = statuses.get(code, 0) + 1
        made += 1
    return {"same" if k % 2 == 0 else "distinct": made, "statuses": statuses}

r, w = os.pipe()
pids = []
for k in range(workers):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, (json.dumps(worker(k)) + "\n").encode())
        os._exit(0)
    pids.append(pid)
os.close(w)
for pid in pids:
    os.waitpid(pid, 0)
total = {"same": 0, "distinct": 0, "statuses": {}}
for line in os.fdopen(r).read().splitlines():
    one = json.loads(line)
    for key in ("same", "distinct"):
        total[key] += one.get(key, 0)
    for code, n in one["statuses"].items():
        total["statuses"][code] = total["statuses"].get(code, 0) + n
print(json.dumps(total))
'''

# Runs in a box: each host of argv asked for once (a CONNECT refused or answered), in order.
ASK = r'''
import os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
for host in sys.argv[1:]:
    with socket.create_connection((proxy.hostname, proxy.port)) as s:
        s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\n\r\n".encode())
        while s.recv(4096):
            pass
'''

FLOOD_SECONDS = 10
LOG_ROWS = 10_000  # the default [egress] log_rows


def ask(c, hosts):
    code, _, err = sh(c, f"python3 -c {shlex.quote(ASK)} {' '.join(shlex.quote(h) for h in hosts)}")
    assert code == 0, err


def test_a_refusal_flood_leaves_the_state_disk_within_a_few_mib_and_the_log_useful(wdaemon):
    with client(wdaemon, FLOODER) as c:
        sh(c, "true")  # the box is up, its account and volume made: they are not the flood's
        time.sleep(0.5)
        before = allocated(wdaemon.state_dir)
        code, out, err = sh(c, f"python3 -c {shlex.quote(FLOOD)} {FLOOD_SECONDS} 4", wait=FLOOD_SECONDS + 15)
        assert code == 0, err
        made = json.loads(out)
        ask(c, ["after.test"])  # the newest decision, after the flood
        deadline = time.monotonic() + 15
        while True:  # the writer stores in batches: wait until the last one is in
            entries = whole_log(c)
            same = sum(e["count"] for e in entries if e["host"] == "flood.test")
            if (entries and entries[0]["host"] == "after.test" and same == made["same"]) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        grown, which = growth(before, allocated(wdaemon.state_dir))

    requests = made["same"] + made["distinct"]
    assert made["statuses"] == {"403": requests}, made
    assert requests >= 2000, f"the flood was too slow to prove anything: {made}"
    assert grown <= 4 * MIB, f"{requests} refusals grew the state directory by {grown / MIB:.1f} MiB: {which}"
    # Useful: the newest is kept, the refusals of one host are one row (or one a minute) with
    # their count, every distinct host refused is a row of its own up to the account's cap.
    assert entries[0]["host"] == "after.test" and entries[0]["allowed"] is False and entries[0]["count"] == 1
    merged = [e for e in entries if e["host"] == "flood.test"]
    assert 1 <= len(merged) <= 2 and same == made["same"], (merged, made)
    assert merged[0]["reason"] == "agentbox: flood.test:443 is not in this sandbox's network allowlist"
    assert merged[0]["last_time_ms"] - merged[-1]["time_ms"] >= (FLOOD_SECONDS - 2) * 1000
    distinct = [e for e in entries if e["host"].endswith(".flood.test") and e["host"] != "flood.test"]
    assert all(e["count"] == 1 for e in distinct)
    assert len(entries) == min(LOG_ROWS, 1 + len(merged) + made["distinct"]), (len(entries), made)


def test_control_distinct_decisions_below_the_cap_are_all_kept(wdaemon):
    hosts = [f"d{i}.calm.test" for i in range(30)] + ["again.test"] * 5
    with client(wdaemon, CALM) as c:
        ask(c, hosts)
        deadline = time.monotonic() + 10
        while len(entries := whole_log(c)) < 31 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert [e["host"] for e in entries] == ["again.test"] + [f"d{i}.calm.test" for i in reversed(range(30))]
    assert entries[0]["count"] == 5 and all(e["count"] == 1 for e in entries[1:])
    assert all(e["allowed"] is False and e["last_time_ms"] >= e["time_ms"] for e in entries)


# ---- 3. host TCP memory, through tunnels nobody reads --------------------------------------

# Runs in a box: N tunnels through the proxy to internet.test:PORT; reads each answer's head a
# byte at a time (nothing of what follows), then never reads again, for HOLD seconds. (A last
# argument, ignored, names the process for pgrep.)
HOLD_TUNNELS = r'''
import os, socket, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
n, port, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held = []
for _ in range(n):
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(f"CONNECT internet.test:{port} HTTP/1.1\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    held.append(s)
print("holding", flush=True)
time.sleep(hold)
'''
SKMEM = re.compile(r"skmem:\(r(\d+),rb(\d+),t(\d+),tb(\d+),f(\d+),w(\d+),")


def sockets_of(netns_path, pid, needle):
    """(r + w + f) of each TCP socket of process pid in the namespace whose line holds needle."""
    out = subprocess.run(["nsenter", f"--net={netns_path}", "ss", "-tmpnHO"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    held = []
    for line in out.splitlines():
        if f"pid={pid}," in line and needle in line:
            r, _rb, _t, _tb, f, w = map(int, SKMEM.search(line).groups())
            held.append(r + w + f)
    return held


def tcp_memory_bytes():
    """The host's TCP memory (every namespace's sockets): /proc/net/sockstat's pages."""
    with open("/proc/net/sockstat") as f:
        pages = int(re.search(r"^TCP: .* mem (\d+)", f.read(), re.M).group(1))
    return pages * 4096


def hold_tunnels(daemon, world, n):
    """Opens n tunnels nobody reads to a flooding origin in the bait; returns the daemon's
    sockets' memory per tunnel (world side + box side) and the host's TCP memory grown."""
    origin = FloodOrigin(listener_in(world.bait_path, INTERNET))
    marker = f"holder-{uuid.uuid4().hex[:8]}"
    with client(daemon, HOLDER) as c:
        sh(c, "true")
        before = tcp_memory_bytes()
        p = run(c, f"exec python3 -c {shlex.quote(HOLD_TUNNELS)} {n} {origin.port} 120 {marker}", wait=0,
                pty=False)
        try:
            assert origin.wait_stalled(n, timeout=60), f"stalled: {origin.stalled}, sent: {origin.sent}"
            time.sleep(1)  # what was in flight has landed
            grown = tcp_memory_bytes() - before
            box_pid = int(subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()[0])
            upstream = sockets_of(world.world_path, daemon.pid, f"{INTERNET}:{origin.port}")
            box_side = sockets_of(f"/proc/{box_pid}/ns/net", daemon.pid, "127.0.0.1:3128")
        finally:
            c.delete(f"/execute/{p['id']}")
            origin.close()
    assert len(upstream) == n and len(box_side) == n, (upstream, box_side)
    return (sum(upstream) + sum(box_side)) / n, grown, sum(origin.sent) / n


TUNNELS = 16


def test_tunnels_nobody_reads_hold_at_most_2_mib_of_host_tcp_memory_each(wdaemon, world):
    per_tunnel, grown, sent = hold_tunnels(wdaemon, world, TUNNELS)
    assert per_tunnel <= 2 * MIB, f"the daemon's sockets hold {per_tunnel / MIB:.1f} MiB per tunnel"
    # The host as a whole: the box's and the origin's small buffers too, and other tests' noise.
    assert grown <= TUNNELS * 2 * MIB + 32 * MIB, f"host TCP memory grew {grown / MIB:.0f} MiB"
    assert sent <= 2 * MIB, f"the origin got {sent / MIB:.1f} MiB per tunnel out before it was stopped"


def test_control_with_the_bound_off_the_same_tunnels_hold_far_more(world_daemon_factory, world, self_address):
    unbounded = world_daemon_factory("shared-unbounded", CONFIG + "[egress]\nsocket_buffer = 0\n")
    per_tunnel, grown, sent = hold_tunnels(unbounded, world, 8)
    assert per_tunnel >= 4 * MIB, f"only {per_tunnel / MIB:.1f} MiB per tunnel with autotuned buffers"
    assert sent >= 4 * MIB


# ---- 6. the host's own addresses -------------------------------------------------------------

# Runs in a box: each request on a connection of its own to the proxy; prints everything each
# got back before the connection ended (a bare CONNECT: up to the end of its answer's head).
THROUGH_PROXY = r'''
import json, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
answers = []
for request in json.loads(sys.argv[1]):
    bare_connect = request.startswith("CONNECT") and request.endswith("\r\n\r\n") and request.count("\r\n\r\n") == 1
    data = b""
    with socket.create_connection((proxy.hostname, proxy.port), timeout=5) as s:
        s.sendall(request.encode())
        try:
            while chunk := s.recv(65536):
                data += chunk
                if bare_connect and b"\r\n\r\n" in data:
                    break
        except socket.timeout:
            data += b"(still open after 5 s)"
    answers.append(data.decode(errors="replace"))
print(json.dumps(answers))
'''


def through_proxy(c, requests):
    code, out, err = sh(c, f"python3 -c {shlex.quote(THROUGH_PROXY)} {shlex.quote(json.dumps(requests))}")
    assert code == 0, err
    return json.loads(out)


def connect(host, port):
    return f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"


def get(host, port, path="/"):
    return f"GET http://{host}:{port}{path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"


HOST_ITSELF = "an address of the host itself this sandbox may not reach"


@pytest.fixture(scope="module")
def host_service(world, self_address):
    """A service of world's (the host's) on 0.0.0.0: it counts whoever reaches it."""
    s = CountingOrigin(listener_in(world.world_path, "0.0.0.0"), "host service")
    yield s
    s.close()


def test_the_hosts_own_addresses_are_refused_by_name_and_literal_and_reach_nothing(wdaemon, host_service):
    port, api = host_service.port, wdaemon.api_port
    cases = [
        (connect("self.test", port), f"agentbox: self.test:{port} resolves to {SELF}, {HOST_ITSELF}"),
        (get("self.test", port), f"agentbox: self.test:{port} resolves to {SELF}, {HOST_ITSELF}"),
        (connect(SELF, port), f"agentbox: {SELF}:{port} is {HOST_ITSELF}"),
        (get(SELF, port), f"agentbox: {SELF}:{port} is {HOST_ITSELF}"),
        # world's veth address, where the daemon's own API listens (0.0.0.0):
        (get(WORLD_ADDRESS, api, "/health"), f"agentbox: {WORLD_ADDRESS}:{api} is {HOST_ITSELF}"),
        (connect(f"[::ffff:{SELF}]", port), f"agentbox: [::ffff:{SELF}]:{port} resolves to {SELF}, {HOST_ITSELF}"),
    ]
    before = host_service.accepted
    with client(wdaemon, STAR) as c:  # any name, and the ranges holding those addresses opened
        answers = through_proxy(c, [request for request, _ in cases])
    for (request, line), answer in zip(cases, answers):
        assert answer.startswith("HTTP/1.1 403 ") and answer.endswith("\r\n\r\n" + line + "\n"), (request, answer)
    time.sleep(0.2)
    assert host_service.accepted == before


def test_an_address_the_host_gains_after_the_start_is_refused_too(wdaemon, world, host_service):
    _ip("-n", world.world, "addr", "add", f"{LATE}/32", "dev", WORLD_IF)
    try:
        time.sleep(0.2)  # the kernel's event, then the daemon's loop
        before = host_service.accepted
        with client(wdaemon, STAR) as c:
            answers = through_proxy(c, [connect(LATE, host_service.port), get(LATE, host_service.port)])
        with client(wdaemon, NAMED) as c:  # the control: named, it is reached
            named = through_proxy(c, [get(LATE, host_service.port, "/late")])
    finally:
        _ip("-n", world.world, "addr", "del", f"{LATE}/32", "dev", WORLD_IF)
    for answer in answers:
        assert answer.startswith("HTTP/1.1 403 ") and answer.endswith(f"{LATE}:{host_service.port} is {HOST_ITSELF}\n")
    assert named[0].startswith("HTTP/1.1 200 ") and named[0].endswith("host service saw /late"), named
    assert host_service.accepted == before + 1


def test_control_an_entry_naming_the_hosts_address_opens_it(wdaemon, host_service):
    before = host_service.accepted
    with client(wdaemon, NAMED) as c:
        answers = through_proxy(c, [get("self.test", host_service.port, "/by-name"),
                                    connect(SELF, host_service.port) + "GET /tunneled HTTP/1.1\r\n\r\n"])
    assert answers[0].startswith("HTTP/1.1 200 ") and answers[0].endswith("host service saw /by-name"), answers
    assert answers[1].startswith("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK\r\n"), answers
    assert answers[1].endswith("host service saw /tunneled"), answers
    time.sleep(0.2)
    assert host_service.accepted == before + 2


def run_in_world(world, flags, command):
    """`agentbox run` in world's namespace: its proxy connects from there."""
    workdir = new_workdir("shared-run")
    try:
        return subprocess.run(world.nsenter() + [agentbox_bin(), "run", "--no-profile", "--home",
                                                 os.path.join(workdir, "home"), *flags, "--", "sh", "-c", command],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                              env={"PATH": "/usr/bin:/bin", "HOME": workdir})
    finally:
        remove_workdir(workdir)


def test_agentbox_run_refuses_its_callers_own_addresses_too(world, host_service):
    url = f"http://{SELF}:{host_service.port}/run"
    before = host_service.accepted
    r = run_in_world(world, ["--allow-net", "*", "--allow-address", "203.0.113.0/24"],
                     f"curl -sS --max-time 10 -w ' %{{http_code}}' {url}")
    assert r.stdout == f"agentbox: {SELF}:{host_service.port} is {HOST_ITSELF}\n 403", r
    assert f"{SELF}:{host_service.port} is {HOST_ITSELF}" in r.stderr
    assert host_service.accepted == before
    named = run_in_world(world, ["--allow-net", "*", "--allow-address", f"{SELF}/32"], f"curl -sS --max-time 10 {url}")
    assert named.stdout == "host service saw /run", named
    assert host_service.accepted == before + 1


# ---- 9. ephemeral ports: new connections a second --------------------------------------------

# Runs in a box: WORKERS processes, each for SECONDS opening a tunnel to internet.test:PORT (or
# trying to), reading the answer's head and closing at once (the box closes first, so the
# daemon's side of the origin connection waits in TIME_WAIT), or every PAUSE seconds when PAUSE
# is not 0. Prints {status: n}.
CHURN_SCRIPT = r'''
import json, os, socket, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
port, seconds, workers, pause = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])

def worker():
    statuses = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.create_connection((proxy.hostname, proxy.port)) as s:
            s.sendall(f"CONNECT internet.test:{port} HTTP/1.1\r\n\r\n".encode())
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                b = s.recv(1)
                if not b:
                    break
                head += b
        code = head[9:12].decode() or "closed"
        statuses[code] = statuses.get(code, 0) + 1
        if pause:
            time.sleep(pause)
    return statuses

r, w = os.pipe()
pids = []
for _ in range(workers):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, (json.dumps(worker()) + "\n").encode())
        os._exit(0)
    pids.append(pid)
os.close(w)
for pid in pids:
    os.waitpid(pid, 0)
total = {}
for line in os.fdopen(r).read().splitlines():
    for code, n in json.loads(line).items():
        total[code] = total.get(code, 0) + n
print(json.dumps(total))
'''
RATE = 20  # the default [egress] connect_rate
BURST = 64  # as many at once as the default [egress] connections
PORTS = (40000, 40499)  # world's ephemeral ports for this test: 500, so churn would show


@contextlib.contextmanager
def narrow_ports(world):
    path = "/proc/sys/net/ipv4/ip_local_port_range"
    with entered(world.world_path):
        with open(path) as f:
            saved = f.read().strip()
        with open(path, "w") as f:
            f.write(f"{PORTS[0]} {PORTS[1]}")
    try:
        yield
    finally:
        with entered(world.world_path), open(path, "w") as f:
            f.write(saved)


def churn(c, port, seconds, workers, pause):
    return run(c, f"python3 -c {shlex.quote(CHURN_SCRIPT)} {port} {seconds} {workers} {pause}", wait=0, pty=False)


def statuses_of(c, p):
    done = wait_done(c, p["id"], timeout=60)
    assert done["status"] == "done" and done["exit_code"] == 0, done
    return json.loads("".join(x["data"] for x in done["output"] if x["type"] == "stdout"))


def time_waits(world, port):
    out = subprocess.run(["nsenter", f"--net={world.world_path}", "ss", "-tanH", "state", "time-wait",
                          "dst", f"{INTERNET}:{port}"], capture_output=True, text=True, timeout=30, check=True)
    return len(out.stdout.splitlines())


def test_a_churning_box_is_held_to_the_rate_and_another_keeps_reaching_the_same_destination(wdaemon, world):
    origin = CountingOrigin(listener_in(world.bait_path, INTERNET), "origin")
    seconds = 8
    try:
        with narrow_ports(world), client(wdaemon, CHURN) as churner, client(wdaemon, OTHER) as other:
            sh(churner, "true")
            sh(other, "true")
            started = time.monotonic()
            p = churn(churner, origin.port, seconds, 4, 0)
            q = churn(other, origin.port, seconds, 1, 0.25)  # another user, 4 a second
            churned, others = statuses_of(churner, p), statuses_of(other, q)
            took = time.monotonic() - started
            waiting = time_waits(world, origin.port)
    finally:
        origin.close()
    assert set(others) == {"200"}, f"another user's connections failed meanwhile: {others}"
    assert others["200"] >= seconds * 2
    assert churned.get("429", 0) > 0 and set(churned) <= {"200", "429"}, churned
    reached = churned["200"]
    assert RATE * seconds * 0.5 <= reached <= RATE * took + BURST + 5, (churned, took)
    assert origin.accepted == reached + others["200"]
    assert waiting < PORTS[1] - PORTS[0] + 1 - 100, f"{waiting} ports in TIME_WAIT toward the origin"


def test_control_below_the_rate_nothing_is_refused(wdaemon, world):
    origin = CountingOrigin(listener_in(world.bait_path, INTERNET), "origin")
    try:
        with client(wdaemon, OTHER) as c:
            calm = statuses_of(c, churn(c, origin.port, 3, 1, 0.2))  # 5 a second
    finally:
        origin.close()
    assert set(calm) == {"200"} and calm["200"] >= 10, calm
    assert origin.accepted == calm["200"]
