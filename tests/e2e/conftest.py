"""Black-box end-to-end tests of `agentbox serve`: fixtures and helpers.

Every daemon runs under `timeout` (a bounded lifetime even if pytest dies), with its own state
dir under /tmp, and is stopped with SIGTERM at the end; whatever it started and left behind
(boxes, commands) is killed by pid and reported. See README.md.
"""
import asyncio
import contextlib
import ctypes
import itertools
import json
import os
import pathlib
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

# tests/fakes (the scripted Anthropic upstream, fake_anthropic.py) importable by every module here
# and by the red-team modules, which load this file.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "fakes"))

DEFAULT_BIN = "/work/main/build/agentbox"
READY_LINE = re.compile(r"agentbox \S+ serving on (http://127\.0\.0\.1:\d+)")
# The same line for any --listen host the tests use (the port is what matters).
SERVING_PORT = re.compile(r"agentbox \S+ serving on http://(?:127\.0\.0\.1|0\.0\.0\.0):(\d+)")
TIMEOUT = httpx.Timeout(30.0)
# A command and its wait must finish well inside the client's timeout.
EXEC_WAIT = 20


# A running daemon holds its uid range exclusively (box/uid_range_guard.hpp), and several run at
# once (the shared daemon, per-test ones, a parallel ctest, a developer's own on the default
# range): each gets its own range of 65536 uids from 2,000,000 on, through AGENTBOX_UID_BASE.
# This harness takes slots 0-8191 (C++ tests and bench/lib.sh take others, see
# tests/support/uid_range.hpp), starting at a place of its pid's; a start refused because
# another daemon holds the range is retried on the next slot.
UID_RANGE_SIZE = 65536
UID_RANGE_IN_USE = "overlaps that of another agentbox serve"
_uid_slots = itertools.count((os.getpid() * 7919) % 8192)


def next_uid_base():
    return 2_000_000 + UID_RANGE_SIZE * (next(_uid_slots) % 8192)


def agentbox_bin():
    return os.environ.get("AGENTBOX_BIN", DEFAULT_BIN)


def _die_with_parent():
    # The `timeout` wrapper gets SIGTERM when pytest dies, and forwards it to the daemon.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _children(pid):
    """Direct children of pid (all threads)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


def descendants(pid):
    seen, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            if child not in seen:
                seen.append(child)
                todo.append(child)
    return seen


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# Every Daemon made, so that a failing test can say which one died on its own (and why).
_daemons = weakref.WeakSet()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails while a daemon has died unasked gets that daemon's last log lines
    (a crash otherwise shows only as "connection refused")."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for d in list(_daemons):
        rc = d.proc.poll() if d.proc is not None else None
        if rc is not None:
            report.sections.append((f"daemon {d.workdir} exited on its own with {rc}", d.log_tail(8000)))


class Daemon:
    """`agentbox serve --listen 127.0.0.1:0 --state DIR` with a bounded lifetime.

    api_key=None lets the daemon generate one into STATE/api_key (read back after start).
    listen: another address to listen on (port 0); url still names 127.0.0.1.
    wrap: a command prefix that execs the rest (e.g. nsenter into a network namespace).
    own_uid_range=False: the range is the config's (or the default), not one of the harness's.
    args: more `agentbox serve` arguments.
    """

    def __init__(self, workdir, *, state_dir=None, config_text=None, api_key=None, lifetime=600, env=None,
                 listen="127.0.0.1:0", wrap=(), own_uid_range=True, args=()):
        self.workdir = workdir
        self.state_dir = state_dir or os.path.join(workdir, "state")
        self.config_path = None
        if config_text is not None:
            self.config_path = os.path.join(workdir, "config.toml")
            with open(self.config_path, "w") as f:
                f.write(config_text)
        self.api_key = api_key
        self.extra_env = dict(env or {})  # e.g. a test hook (AGENTBOX_TEST_HOLD_START)
        # Kept across restarts: the accounts in the state directory have uids from it.
        self.own_uid_range = own_uid_range and "AGENTBOX_UID_BASE" not in self.extra_env
        if self.own_uid_range:
            self.extra_env["AGENTBOX_UID_BASE"] = str(next_uid_base())
        self.lifetime = lifetime
        self.listen = listen
        self.wrap = list(wrap)
        self.args = list(args)  # more `serve` arguments (e.g. --cluster FILE --node NAME)
        self.proc = None
        self.url = None
        self.starts = 0
        _daemons.add(self)
        self.leftovers = []  # pids still alive after a stop (killed by us), for assertions

    @property
    def log_path(self):
        return os.path.join(self.workdir, f"daemon.{self.starts}.log")

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def start(self, timeout=30):
        """Starts the daemon and waits until it serves. A first start refused because another
        daemon holds its uid range tries the next range."""
        for _ in range(20):
            try:
                return self._start(timeout)
            except RuntimeError as e:
                if not (self.own_uid_range and self.starts == 1 and UID_RANGE_IN_USE in str(e)):
                    raise
                self.extra_env["AGENTBOX_UID_BASE"] = str(next_uid_base())
                self.starts = 0
        raise RuntimeError("no free uid range after 20 tries")

    def _start(self, timeout):
        assert self.proc is None
        self.starts += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
        if self.api_key:
            env["AGENTBOX_API_KEY"] = self.api_key
        env.update(self.extra_env)
        cmd = self.wrap + ["timeout", "--foreground", "-k", "10", str(self.lifetime), agentbox_bin(), "serve",
                           "--listen", self.listen, "--state", self.state_dir]
        if self.config_path:
            cmd += ["--config", self.config_path]
        cmd += self.args
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=env,
                                         preexec_fn=_die_with_parent)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, "rb") as f:
                m = SERVING_PORT.search(f.read().decode(errors="replace"))
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                break
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                raise RuntimeError(f"agentbox serve exited with {rc} before serving:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"agentbox serve not ready after {timeout} s:\n{self.log_tail()}")
            time.sleep(0.05)
        if not self.api_key:
            with open(os.path.join(self.state_dir, "api_key")) as f:
                self.api_key = f.read().strip()
        return self

    @property
    def pid(self):
        """The daemon itself (the child of `timeout`; a wrap execs, so it adds no process)."""
        kids = _children(self.proc.pid) if self.proc else []
        return kids[0] if kids else None

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """SIGTERM (graceful), SIGKILL after timeout; returns the daemon's exit code. Anything
        it started that is still alive afterwards is killed and recorded in self.leftovers."""
        if self.proc is None:
            return None
        tree = descendants(self.proc.pid)
        daemon = self.pid
        try:
            os.kill(daemon or self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            for pid in [self.proc.pid] + tree:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            rc = self.proc.wait(10)
        # Give boxes a moment to finish their own teardown before calling anything a leftover.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(p) for p in tree):
            time.sleep(0.05)
        for pid in tree:
            if _alive(pid):
                self.leftovers.append(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc = None
        return rc

    def client(self, user=None, session=None, key="default", **kw):
        headers = {}
        key = self.api_key if key == "default" else key
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if user is not None:
            headers["X-User-Id"] = user
        if session is not None:
            headers["X-Session-Id"] = session
        return httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", TIMEOUT), **kw)

    @property
    def port(self):
        return int(self.url.rsplit(":", 1)[1])


def new_workdir(tag):
    return tempfile.mkdtemp(prefix=f"agentbox-e2e-{tag}-", dir="/tmp")


def unmount_under(path):
    """Unmounts what a daemon killed with SIGKILL left mounted below path (account volumes),
    deepest first; a clean stop unmounts them itself."""
    prefix = os.path.realpath(path) + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, timeout=30)


def remove_workdir(path):
    unmount_under(path)
    # rm -rf, not shutil.rmtree: a test may leave trees deeper than Python's recursion limit.
    subprocess.run(["rm", "-rf", "--one-file-system", path], check=False, timeout=120)


@contextlib.contextmanager
def running_daemon(tag, **kw):
    """A started daemon with its own workdir and API key, stopped and removed afterwards (for
    module- and session-wide fixtures; Daemon's keyword arguments pass through)."""
    workdir = new_workdir(tag)
    kw.setdefault("api_key", secrets.token_hex(16))
    d = Daemon(workdir, **kw)
    try:
        d.start()
        yield d
    finally:
        d.stop()
        remove_workdir(workdir)


@pytest.fixture(scope="session")
def daemon():
    """The daemon most tests share (API key from the environment)."""
    with running_daemon("main", lifetime=3600) as d:
        yield d


@pytest.fixture
def make_daemon():
    """Separate daemons for tests that need their own config or a restart."""
    made = []

    def make(**kw):
        workdir = new_workdir(kw.pop("tag", "own"))
        d = Daemon(workdir, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop()
        remove_workdir(d.workdir)


class Clients:
    """Makes httpx clients for a daemon and closes them at the end of the test."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.open = []

    def __call__(self, user=None, session=None, **kw):
        c = self.daemon.client(user=user, session=session, **kw)
        self.open.append(c)
        return c

    def user(self, prefix="u", session=None):
        """A client for a fresh user (ids are unique per test)."""
        return self(user=f"{prefix}-{uuid.uuid4().hex[:10]}", session=session)

    def close(self):
        for c in self.open:
            c.close()


@pytest.fixture
def clients(daemon):
    c = Clients(daemon)
    yield c
    c.close()


# ---- helpers used across the test files -------------------------------------------------

def text_of(proc, types=None):
    return "".join(c["data"] for c in proc["output"] if types is None or c["type"] in types)


def run(client, command, *, wait=EXEC_WAIT, expect=200, **body):
    """POST /execute?wait=... and return the process object."""
    body["command"] = command
    r = client.post("/execute", params={"wait": wait}, json=body)
    assert r.status_code == expect, r.text
    return r.json()


def wait_done(client, pid, *, timeout=EXEC_WAIT):
    """Long-polls status (without offset: waits for the end) until the process finished."""
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"/execute/{pid}/status", params={"wait": 10})
        assert r.status_code == 200, r.text
        p = r.json()
        if p["status"] != "running" or time.monotonic() > deadline:
            return p


def sh(client, command, **body):
    """Runs a short command without a terminal; asserts it finished; returns (exit, stdout, stderr)."""
    body.setdefault("pty", False)
    p = run(client, command, **body)
    if p["status"] == "running":
        p = wait_done(client, p["id"])
    assert p["status"] == "done", p
    return p["exit_code"], text_of(p, ("stdout",)), text_of(p, ("stderr",))


def home_of(client):
    code, out, _ = sh(client, 'printf %s "$HOME"')
    assert code == 0 and out.startswith("/home/"), out
    return out


def wait_for_output(client, pid, needle, *, timeout=15):
    """Pages status with offsets until needle appears in the output; returns everything read."""
    seen, offset = "", 0
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{needle!r} not seen; output so far {seen!r}"
        r = client.get(f"/execute/{pid}/status", params={"offset": offset, "wait": min(left, 5)})
        assert r.status_code == 200, r.text
        p = r.json()
        seen += text_of(p)
        offset = p["next_offset"]
        if p["status"] != "running" and needle not in seen:
            raise AssertionError(f"process ended before {needle!r}: {p}")
    return seen


async def shell_answers(ws, word, timeout):
    """Types `echo WORD-$((6*7))` into a terminal's WebSocket and reads until the shell's answer
    WORD-42 comes (computed, so the echo of the keystrokes does not count), within timeout."""
    await ws.send(f"echo {word}-$((6*7))\n".encode())
    seen = b""
    deadline = time.monotonic() + timeout
    while f"{word}-42".encode() not in seen:
        seen += await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))


def assert_alive(daemon):
    """The daemon still serves: /health and a command in a box."""
    with daemon.client(user=f"alive-{uuid.uuid4().hex[:8]}", timeout=httpx.Timeout(30.0)) as c:
        r = c.get("/health")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        code, out, _ = sh(c, "echo alive")
        assert (code, out) == (0, "alive\n")


def raw_request(port, data, *, timeout=10.0):
    """Sends raw bytes, returns what the server answered before closing (or timing out)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return recv_all(s, timeout)


def recv_all(s, timeout):
    s.settimeout(timeout)
    chunks = []
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    except (ConnectionResetError, socket.timeout):
        pass
    return b"".join(chunks)


def status_of_raw(answer):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    return int(m.group(1)) if m else None


def parse_sse(lines):
    """Yields (event, data, id) from an iterator of SSE lines."""
    event, data, ident = None, [], None
    for line in lines:
        if line == "":
            if data or event:
                yield event or "message", json.loads("\n".join(data)) if data else None, ident
            event, data, ident = None, [], None
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                ident = value


def sse_lines(response):
    """The lines of an SSE response body, as they arrive, without line ends."""
    buf = ""
    for text in response.iter_text():
        buf += text
        while "\n" in buf:
            line, buf = buf.split("\n", 1)
            yield line.rstrip("\r")
    if buf:
        yield buf


def sse_events(response):
    return parse_sse(sse_lines(response))


class Origin:
    """An HTTP server on the host's 127.0.0.1 that answers what it was asked and counts."""

    def __init__(self):
        self.paths = []
        self.posts = []  # (path, bytes of the body that arrived)
        self.release = threading.Event()  # lets /stream send its second part
        origin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                origin.paths.append(self.path)
                if self.path == "/stream":  # the first part now, the second once the test says
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(b"first part\nsecond part\n")))
                    self.end_headers()
                    self.wfile.write(b"first part\n")
                    self.wfile.flush()
                    origin.release.wait(30)
                    self.wfile.write(b"second part\n")
                    return
                body = f"origin saw {self.path} host={self.headers.get('Host')}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                wanted = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(wanted)  # short if the sender's connection ends first
                origin.posts.append((self.path, len(body)))
                self.close_connection = True
                if len(body) == wanted:
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def origin():
    """A recording HTTP origin on the host's 127.0.0.1 (Origin), one per test module."""
    o = Origin()
    yield o
    o.close()


@pytest.fixture(scope="module")
def fake():
    """The scripted Anthropic upstream (tests/fakes/fake_anthropic.py), one per test module."""
    from fake_anthropic import FakeAnthropic
    f = FakeAnthropic()
    yield f
    f.close()
