"""One soak user's mixed workload, as Open WebUI and a model drive it: commands with output,
file writes, reads and uploads, a terminal typed into over the WebSocket, downloads through
`/proxy` from a server in the box, egress through the box's proxy to the soak's origin, and
agent turns against the fake upstream. Each operation checks its own answer and records what
was acknowledged in the ledger.

Runs on: one thread per user (User.run); the harness pauses it between phases.
"""
import asyncio
import hashlib
import json
import random
import re
import threading
import time

import httpx
import websockets

from conftest import text_of
from ledger import DOCUMENTED

SERVER_PORT = 8765
# The box's download server: /blob/SEED/SIZE answers SIZE bytes derived from SEED (the soak
# computes the same), /sent/SEED how many of them it has written so far (what the slow-reader fault
# reads: a relay that buffers without bound lets it write everything), /ping answers pong. Bounded
# life: `timeout` around it.
SERVER = r"""
import hashlib, http.server, sys
SENT = {}
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts[0] == "blob":
            seed, size = parts[1], int(parts[2])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block = hashlib.sha256(seed.encode()).digest() * 2048
            while size > 0:
                self.wfile.write(block[:size])
                SENT[seed] = SENT.get(seed, 0) + min(size, len(block))
                size -= len(block)
            return
        body = str(SENT.get(parts[1], 0)).encode() if parts[0] == "sent" else b"pong"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def blob(seed, size):
    block = hashlib.sha256(seed.encode()).digest() * 2048
    return (block * (size // len(block) + 1))[:size]


class DaemonDown(Exception):
    """The daemon went away under an operation (a fault the harness made)."""


class User:
    def __init__(self, harness, name, seed):
        self.h = harness
        self.name = name
        self.rng = random.Random(seed)
        self.client = None
        self.generation = -1
        self.counter = 0
        self.server_started = 0.0

    # ---- plumbing
    def http(self):
        """The user's client for the daemon running now (a new one after each restart)."""
        if self.generation != self.h.generation:
            if self.client is not None:
                self.client.close()
            self.client = self.h.daemon.client(user=self.name, timeout=httpx.Timeout(60.0))
            self.h.accounts.add(self.name)
            self.generation = self.h.generation
        return self.client

    def call(self, what, method, url, **kw):
        """An HTTP call whose status is checked against the documented ones. A transport error
        while the harness is killing the daemon raises DaemonDown; any other is a violation."""
        generation = self.h.generation
        try:
            r = self.http().request(method, url, **kw)
        except httpx.TransportError as e:
            if self.h.generation != generation or not self.h.up.is_set():
                raise DaemonDown() from e
            self.h.ledger.violation(f"{self.name}: {what}: no answer ({type(e).__name__}: {e})")
            raise DaemonDown() from e
        self.h.ledger.status(f"{self.name}: {what}", r)
        return r

    def sh(self, command, what="command", wait=30, **body):
        body.setdefault("pty", False)
        r = self.call(what, "POST", "/execute", params={"wait": wait}, json={"command": command, **body})
        if r.status_code != 200:
            return r.status_code, None
        self.h.ledger.started(self.name, r.json()["id"])
        return 200, r.json()

    def token(self):
        self.counter += 1
        return f"{self.name}-{self.counter}-{self.rng.randrange(10**9)}"

    def close(self):
        if self.client is not None:
            self.client.close()
            self.client = None

    # ---- the operations
    def op_command(self):
        tok = self.token()
        code, p = self.sh(f"echo {tok}; echo err-{tok} >&2; exit {len(tok) % 7}")
        if code != 200:
            return
        if p["status"] == "running":
            r = self.call("status", "GET", f"/execute/{p['id']}/status", params={"wait": 30})
            if r.status_code != 200:
                return
            p = r.json()
        out = text_of(p, ("stdout",))
        if p["status"] != "done" or p["exit_code"] != len(tok) % 7 or out != f"{tok}\n":
            self.h.ledger.violation(f"{self.name}: command {p['id']} answered {p['status']} "
                                    f"{p['exit_code']} {out!r}, wanted {tok!r}")
            return
        self.h.ledger.finished(self.name, p, out)

    def op_write(self):
        path = f"soak/w{self.rng.randrange(12)}.txt"
        data = (self.token() + "\n") * self.rng.randrange(1, 2000)
        try:
            r = self.call("write", "POST", "/files/write", json={"path": path, "content": data})
        except DaemonDown:
            self.h.ledger.wrote(self.name, path, data.encode(), certain=False)
            raise
        if r.status_code == 200:
            self.h.ledger.wrote(self.name, path, data.encode(), certain=True)
        elif r.status_code in DOCUMENTED and r.status_code not in (503, 507):
            self.h.ledger.violation(f"{self.name}: write {path} answered {r.status_code}: {r.text[:200]}")

    def op_upload(self):
        name = f"u{self.rng.randrange(6)}.bin"
        data = self.rng.randbytes(self.rng.randrange(1, 300_000))
        try:
            r = self.call("upload", "POST", "/files/upload", params={"directory": "soak"},
                          files={"file": (name, data, "application/octet-stream")})
        except DaemonDown:
            self.h.ledger.wrote(self.name, f"soak/{name}", data, certain=False)
            raise
        if r.status_code == 200:
            self.h.ledger.wrote(self.name, f"soak/{name}", data, certain=True)
        elif r.status_code in DOCUMENTED and r.status_code not in (503, 507):
            self.h.ledger.violation(f"{self.name}: upload answered {r.status_code}: {r.text[:200]}")

    def op_read(self):
        files, _ = self.h.ledger.snapshot()
        mine = sorted(files.get(self.name, {}).items())
        if not mine:
            return
        path, wanted = self.rng.choice(mine)
        r = self.call("view", "GET", "/files/view", params={"path": path})
        got = hashlib.sha256(r.content).hexdigest() if r.status_code == 200 else None
        if r.status_code in (200, 404) and got not in wanted:
            self.h.ledger.violation(f"{self.name}: read {path}: {r.status_code}, not what was acknowledged")

    def op_terminal(self):
        r = self.call("terminal create", "POST", "/api/terminals")
        if r.status_code != 200:
            return
        tid = r.json()["id"]
        a, b = self.rng.randrange(10**5, 10**6), self.rng.randrange(10**5, 10**6)
        generation = self.h.generation
        try:
            asyncio.run(self._type(tid, f"echo $(({a}+{b}))\n", str(a + b).encode()))
        except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
            if self.h.generation != generation or not self.h.up.is_set():
                raise DaemonDown() from e
            self.h.ledger.violation(f"{self.name}: terminal {tid}: {type(e).__name__}: {e}")
        self.call("terminal delete", "DELETE", f"/api/terminals/{tid}")

    async def _type(self, tid, line, wanted):
        url = f"ws://127.0.0.1:{self.h.daemon.port}/api/terminals/{tid}?user_id={self.name}"
        async with websockets.connect(url, open_timeout=20, ping_interval=None, max_size=None) as ws:
            await ws.send(json.dumps({"type": "auth", "token": self.h.daemon.api_key}))
            await ws.send(line.encode())
            seen = b""
            deadline = time.monotonic() + 20
            while not re.search(rb"(?<![\d+])" + wanted + rb"(?!\d)", seen):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise asyncio.TimeoutError(f"{wanted!r} not typed back; saw {seen[-200:]!r}")
                frame = await asyncio.wait_for(ws.recv(), left)
                seen += frame if isinstance(frame, bytes) else frame.encode()

    def ensure_server(self):
        r = self.call("proxy ping", "GET", f"/proxy/{SERVER_PORT}/ping")
        if r.status_code == 200:
            return True
        if r.status_code != 502:
            return False
        r = self.call("write server", "POST", "/files/write", json={"path": ".soak_server.py", "content": SERVER})
        if r.status_code != 200:
            return False
        self.sh(f"setsid -f timeout 1200 python3 $HOME/.soak_server.py {SERVER_PORT} >/dev/null 2>&1", wait=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.call("proxy ping", "GET", f"/proxy/{SERVER_PORT}/ping").status_code == 200:
                return True
            time.sleep(0.2)
        self.h.ledger.violation(f"{self.name}: the box's server never answered through /proxy")
        return False

    def op_download(self):
        if not self.ensure_server():
            return
        seed, size = self.token(), self.rng.randrange(1, 4 << 20)
        r = self.call("proxy download", "GET", f"/proxy/{SERVER_PORT}/blob/{seed}/{size}")
        if r.status_code == 200 and r.content != blob(seed, size):
            self.h.ledger.violation(f"{self.name}: /proxy download of {size} bytes came back different "
                                    f"({len(r.content)} bytes)")

    def op_egress(self):
        tok = self.token()
        url = f"http://origin.test:{self.h.origin.port}/{tok}"
        code, p = self.sh(f"curl -sS --max-time 20 '{url}'", what="egress")
        if code == 200 and p["status"] == "done":
            out = text_of(p, ("stdout",))
            if p["exit_code"] != 0 or f"origin saw /{tok}" not in out:
                self.h.ledger.violation(f"{self.name}: egress to the origin: exit {p['exit_code']} {out!r} "
                                        f"{text_of(p, ('stderr',))!r}")

    def op_agent(self):
        tok = self.token()
        body = {"model": "claude-code", "messages": [{"role": "user", "content": f"soak {tok}"}]}
        r = self.call("agent turn", "POST", "/v1/chat/completions", json=body,
                      headers={"X-OpenWebUI-Chat-Id": f"soak-{self.rng.randrange(3)}"},
                      timeout=httpx.Timeout(120.0))
        if r.status_code == 200:
            content = r.json()["choices"][0]["message"]["content"] or ""
            # A turn that cannot start answers why as its reply (a model's answer is what a chat
            # shows): expected only while the state disk is full.
            could_not_start = "Claude Code could not start" in content
            if tok not in content and not (could_not_start and self.h.in_full_state()):
                self.h.ledger.violation(f"{self.name}: agent turn answered {content[:200]!r}")

    # ---- the loop
    def run(self, stop):
        weights = {self.op_command: 4, self.op_write: 4, self.op_read: 3, self.op_upload: 2,
                   self.op_terminal: 1, self.op_download: 1, self.op_egress: 1}
        if self.h.agent:
            weights[self.op_agent] = 0.3
        ops, w = list(weights), list(weights.values())
        while not stop.is_set():
            if not self.h.running.wait(0.5):
                self.h.idle(self.name, True)
                continue
            self.h.idle(self.name, False)
            op = self.rng.choices(ops, w)[0]
            try:
                op()
                self.h.ledger.op(op.__name__[3:])
            except DaemonDown:
                self.h.up.wait(120)
            except Exception as e:  # a bug of the soak or an answer it cannot parse: report, go on
                self.h.ledger.violation(f"{self.name}: {op.__name__}: {type(e).__name__}: {e}")
        self.h.idle(self.name, True)
        self.close()


def start(user, stop):
    t = threading.Thread(target=user.run, args=(stop,), name=f"soak-{user.name}", daemon=True)
    t.start()
    return t
