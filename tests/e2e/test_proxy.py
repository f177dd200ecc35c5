"""Port previews: GET /ports lists what listens in the caller's box, /proxy/{port}/{path} is a
reverse proxy into it. The servers are started through POST /execute inside the box (a small
http.server app and a WebSocket echo), as a user's dev server would be.

The module's daemon has `[proxy] response_timeout = 2` (for the 504) and `[limits] body = "1M"`
(the proxy streams request bodies of any size: the API's body limit is not the proxy's).
"""
import asyncio
import hashlib
import json
import socket
import threading
import time
import uuid

import httpx
import pytest
import websockets

from conftest import raw_request, recv_all, running_daemon, run, sh, status_of_raw, text_of

HTTP_PORT = 8124
WS_PORT = 8125
BLOCK = b"0123456789abcdef" * 65536  # 1 MiB: what /big repeats

# The box's web app: every route answers what the proxy delivered to it.
APP = r'''
import hashlib, json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOME = os.path.expanduser("~")
BLOCK = b"0123456789abcdef" * 65536


class App(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, code, body, ctype="application/json", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def seen(self, **more):
        return json.dumps(dict(method=self.command, path=self.path,
                               headers=[[k.lower(), v] for k, v in self.headers.items()], **more)).encode()

    def body_digest(self):
        h, n = hashlib.sha256(), 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                while size:
                    piece = self.rfile.read(min(size, 1 << 20))
                    h.update(piece); n += len(piece); size -= len(piece)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                piece = self.rfile.read(min(left, 1 << 20))
                if not piece:
                    break
                h.update(piece); n += len(piece); left -= len(piece)
        return n, h.hexdigest()

    def event_stream(self, chunked):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")  # the body ends with the connection
        self.end_headers()

        def send(text):
            data = text.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
            self.wfile.flush()

        go = os.path.join(HOME, "sse-go")
        send("data: one\n\n")
        # The second event waits for the client to have seen the first (it writes sse-go).
        deadline = time.monotonic() + 20
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.02)
        send("data: %s\n\n" % ("two" if os.path.exists(go) else "two-after-timeout"))
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/big":
            args = dict(kv.split("=") for kv in query.split("&"))
            n, sent = int(args["n"]), 0
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            while n:
                piece = BLOCK[:min(n, len(BLOCK))]
                self.wfile.write(piece)
                n -= len(piece)
                sent += len(piece)
                if "progress" in args:  # how far the app got: bytes the proxy took from it
                    with open(os.path.join(HOME, args["progress"]), "w") as f:
                        f.write(str(sent))
        elif path == "/sse":
            self.event_stream(chunked=False)
        elif path == "/sse-chunked":
            self.event_stream(chunked=True)
        elif path == "/never":
            time.sleep(60)
        elif path == "/hop":
            self.answer(200, b"{}", extra=[("Connection", "X-Hop-Field"), ("X-Hop-Field", "1"),
                                          ("Keep-Alive", "timeout=99"), ("Proxy-Authenticate", "Basic"),
                                          ("X-End-To-End", "kept")])
        elif path in ("/", "/index.html"):
            with open(os.path.join(HOME, "site", "index.html"), "rb") as f:
                self.answer(200, f.read(), "text/html")
        else:
            self.answer(200, self.seen())

    do_DELETE = do_OPTIONS = do_GET

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        n, digest = self.body_digest()
        self.answer(200, self.seen(length=n, sha256=digest))

    do_PUT = do_PATCH = do_POST


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), App).serve_forever()
'''

WS_ECHO = r'''
import asyncio, sys
import websockets


async def echo(ws, path=None):
    async for message in ws:
        await ws.send(message)


async def main():
    async with websockets.serve(echo, "127.0.0.1", int(sys.argv[1]), max_size=None):
        await asyncio.Future()

asyncio.run(main())
'''

INDEX = "<html><body>preview of the box " + uuid.uuid4().hex + "</body></html>"


@pytest.fixture(scope="module")
def pdaemon():
    with running_daemon("proxy", config_text='[limits]\nbody = "1M"\n[proxy]\nresponse_timeout = 2\n') as d:
        yield d


def wait_for_ports(client, wanted, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        r = client.get("/ports")
        assert r.status_code == 200, r.text
        ports = {p["port"]: p for p in r.json()["ports"]}
        if set(wanted) <= set(ports):
            return ports
        assert time.monotonic() < deadline, f"ports {wanted} not listed: {r.json()}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def box(pdaemon):
    """alice's box with the app on 8124 and the WebSocket echo on 8125, both started through
    POST /execute in the background, as a user would."""
    user = f"alice-{uuid.uuid4().hex[:8]}"
    c = pdaemon.client(user=user)
    try:
        for path, content in (("app.py", APP), ("ws.py", WS_ECHO), ("site/index.html", INDEX)):
            r = c.post("/files/write", json={"path": path, "content": content})
            assert r.status_code == 200, r.text
        for script, port in (("app.py", HTTP_PORT), ("ws.py", WS_PORT)):
            p = run(c, f"/usr/bin/python3 ~/{script} {port}", wait=0, pty=False)
            assert p["status"] == "running", p
        wait_for_ports(c, [HTTP_PORT, WS_PORT])
        c.user = user
        yield c
    finally:
        c.close()


def seen_by_app(r):
    assert r.status_code == 200, r.text
    body = r.json()
    body["headers"] = dict(body["headers"])
    return body


# ---- /ports ----------------------------------------------------------------------------------

def test_ports_names_the_servers_started_through_execute(box):
    ports = wait_for_ports(box, [HTTP_PORT, WS_PORT])
    for port in (HTTP_PORT, WS_PORT):
        assert ports[port]["process"] == "python3", ports
        assert isinstance(ports[port]["pid"], int) and ports[port]["pid"] > 1, ports
    # The pid is the one the box's processes see: the app answers to it.
    code, out, _ = sh(box, f"cat /proc/{ports[HTTP_PORT]['pid']}/cmdline | tr '\\0' ' '")
    assert code == 0 and f"app.py {HTTP_PORT}" in out, out


def test_without_a_box_ports_is_empty_and_proxy_is_502(pdaemon):
    with pdaemon.client(user=f"nobox-{uuid.uuid4().hex[:8]}") as c:
        r = c.get("/ports")
        assert r.status_code == 200 and r.json() == {"ports": []}, r.text
        r = c.get(f"/proxy/{HTTP_PORT}/")
        assert r.status_code == 502, r.text
        assert "no box" in r.json()["detail"], r.text
        # Still no box: a preview does not start one.
        assert c.get("/ports").json() == {"ports": []}


# ---- pages, methods, loopback ------------------------------------------------------------------

def test_the_page_comes_through_the_proxy(box):
    for path in (f"/proxy/{HTTP_PORT}/", f"/proxy/{HTTP_PORT}", f"/proxy/{HTTP_PORT}/index.html"):
        r = box.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.text == INDEX, path
        assert r.headers["content-type"] == "text/html"


def test_a_later_command_reaches_the_server_on_the_boxs_loopback(box):
    code, out, err = sh(box, f"/usr/bin/python3 -c \"import urllib.request; "
                             f"print(urllib.request.urlopen('http://127.0.0.1:{HTTP_PORT}/').read().decode())\"")
    assert code == 0, err
    assert out.strip() == INDEX
    # Any port: the WebSocket server's too (its HTTP answer to a plain GET is a 4xx, but it answers).
    code, out, err = sh(box, f"/usr/bin/python3 -c \"import socket; socket.create_connection(('127.0.0.1', {WS_PORT})); print('connected')\"")
    assert (code, out) == (0, "connected\n"), err


def test_methods_path_and_query_reach_the_app(box):
    for method in ("GET", "DELETE", "OPTIONS"):
        seen = seen_by_app(box.request(method, f"/proxy/{HTTP_PORT}/some/where", params={"a": "1", "b": "x y"}))
        assert seen["method"] == method
        assert seen["path"] == "/some/where?a=1&b=x+y"
    # An encoded slash stays encoded; user_id (Open WebUI's way to name the user) is the proxy's.
    seen = seen_by_app(box.get(f"/proxy/{HTTP_PORT}/a%2Fb/c?keep=1&user_id={box.user}"))
    assert seen["path"] == "/a%2Fb/c?keep=1"
    r = box.head(f"/proxy/{HTTP_PORT}/big?n=1000")
    assert r.status_code == 200 and r.headers["content-length"] == "1000" and r.content == b""


def test_the_user_may_come_as_a_query_parameter(box, pdaemon):
    with pdaemon.client() as anonymous:  # the key, no X-User-Id
        r = anonymous.get(f"/proxy/{HTTP_PORT}/", params={"user_id": box.user})
        assert r.status_code == 200 and r.text == INDEX
        # Without any user: refused before anything is proxied.
        r = anonymous.get(f"/proxy/{HTTP_PORT}/")
        assert r.status_code == 400 and "X-User-Id" in r.json()["detail"], r.text


def test_bad_ports_are_422(box):
    for port in ("0", "65536", "abc", "80x"):
        r = box.get(f"/proxy/{port}/")
        assert r.status_code == 422, (port, r.text)


# ---- headers -----------------------------------------------------------------------------------

def test_authorization_and_hop_by_hop_fields_do_not_reach_the_box(box, pdaemon):
    head = (f"GET /proxy/{HTTP_PORT}/headers HTTP/1.1\r\nHost: preview.example\r\n"
            f"Authorization: Bearer {pdaemon.api_key}\r\nX-User-Id: {box.user}\r\n"
            "Connection: keep-alive, X-Drop-Me\r\nX-Drop-Me: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
            "Trailer: X-Checksum\r\nUpgrade: h2c\r\nProxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n"
            "X-Forwarded-For: 6.6.6.6\r\nX-Keep-Me: yes\r\nCookie: app=1\r\n\r\n").encode()
    answer = raw_request(pdaemon.port, head)
    assert status_of_raw(answer) == 200, answer[:300]
    assert b"\r\nConnection: close\r\n" in answer  # one response per connection
    body = answer.split(b"\r\n\r\n", 1)[1]
    headers = dict(json.loads(body)["headers"])
    for gone in ("authorization", "x-drop-me", "keep-alive", "te", "trailer", "upgrade",
                 "proxy-authorization", "proxy-connection"):
        assert gone not in headers, (gone, headers)
    # Controls: end-to-end fields pass; the proxy's own are set.
    assert headers["x-keep-me"] == "yes" and headers["cookie"] == "app=1"
    assert headers["connection"] == "close"
    assert headers["host"] == f"127.0.0.1:{HTTP_PORT}"
    assert headers["x-forwarded-host"] == "preview.example"
    assert headers["x-forwarded-for"] == "127.0.0.1"
    assert headers["x-forwarded-prefix"] == f"/proxy/{HTTP_PORT}"


def test_hop_by_hop_fields_of_the_response_stay_in_the_box(box):
    r = box.get(f"/proxy/{HTTP_PORT}/hop")
    assert r.status_code == 200
    assert r.headers["x-end-to-end"] == "kept"
    for gone in ("x-hop-field", "keep-alive", "proxy-authenticate"):
        assert gone not in r.headers, (gone, r.headers)


# ---- bodies --------------------------------------------------------------------------------------

def test_a_large_download_passes_intact_with_bounded_daemon_memory(box, pdaemon):
    def status_kib(field):
        with open(f"/proc/{pdaemon.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])

    def progress():
        r = box.get("/files/read", params={"path": "big-progress"})
        return int(r.json()["content"] or 0) if r.status_code == 200 else 0

    box.get(f"/proxy/{HTTP_PORT}/big?n=1000000")  # warm: the daemon's pools and buffers exist
    box.delete("/files/delete", params={"path": "big-progress"})
    before, hwm_before = status_kib("VmRSS"), status_kib("VmHWM")
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], status_kib("VmRSS"))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    size = 100 * len(BLOCK)
    h, n = hashlib.sha256(), 0
    try:
        with box.stream("GET", f"/proxy/{HTTP_PORT}/big", params={"n": size, "progress": "big-progress"}) as r:
            assert r.status_code == 200
            assert r.headers["content-length"] == str(size)
            pieces = r.iter_raw()
            first = next(pieces)
            h.update(first)
            n += len(first)
            # The client reads nothing for a while: the proxy must hold the box's app back, not
            # take the body in ahead of the client. Waits until the app's progress stops moving
            # (0.5 s unchanged; there is no event for "blocked in write").
            last, still_since = progress(), time.monotonic()
            while time.monotonic() - still_since < 0.5:
                time.sleep(0.1)
                now = progress()
                if now != last:
                    last, still_since = now, time.monotonic()
                if now >= size:
                    break
            assert last < size // 2, f"the app wrote {last} of {size} bytes while the client read {n}"
            for piece in pieces:
                h.update(piece)
                n += len(piece)
    finally:
        done.set()
        sampler.join()
    assert n == size
    assert h.hexdigest() == hashlib.sha256(BLOCK * 100).hexdigest()
    assert progress() == size
    # VmHWM catches a peak between two samples: if it rose, it rose during the download.
    hwm_after = status_kib("VmHWM")
    top = max(peak[0], hwm_after if hwm_after > hwm_before else 0)
    grew_mib = (top - before) / 1024
    assert grew_mib < 50, f"the daemon's RSS grew {grew_mib:.1f} MiB while relaying 100 MiB"


@pytest.mark.parametrize("path", ["sse", "sse-chunked"])
def test_server_sent_events_arrive_one_by_one(box, path):
    box.delete("/files/delete", params={"path": "sse-go"})  # left by the other variant
    with box.stream("GET", f"/proxy/{HTTP_PORT}/{path}") as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        lines = (line.rstrip("\r\n") for line in r.iter_lines())  # httpx 0.23 keeps the line end
        assert next(lines) == "data: one"
        # Only now may the app send the second event: it waits for this file.
        w = box.post("/files/write", json={"path": "sse-go", "content": ""})
        assert w.status_code == 200, w.text
        rest = [line for line in lines if line]
    assert rest == ["data: two"], rest


def test_request_bodies_of_any_size_reach_the_box(box):
    body = BLOCK * 20  # 20 MiB, far over this daemon's 1 MiB API body limit
    for method in ("PUT", "PATCH"):
        seen = seen_by_app(box.request(method, f"/proxy/{HTTP_PORT}/upload", content=b"abc"))
        assert (seen["method"], seen["length"]) == (method, 3)
    seen = seen_by_app(box.post(f"/proxy/{HTTP_PORT}/upload", content=body))
    assert (seen["length"], seen["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    assert seen["headers"]["content-length"] == str(len(body))

    def pieces():  # no length: the client sends it chunked, the proxy passes it on chunked
        for i in range(0, len(body), 3 << 20):
            yield body[i:i + (3 << 20)]
    seen = seen_by_app(box.post(f"/proxy/{HTTP_PORT}/upload", content=pieces()))
    assert (seen["length"], seen["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())
    assert seen["headers"]["transfer-encoding"] == "chunked"
    # An empty POST still says its length (some servers want one).
    seen = seen_by_app(box.post(f"/proxy/{HTTP_PORT}/upload", content=b""))
    assert seen["length"] == 0 and seen["headers"]["content-length"] == "0"


def test_expect_100_continue_is_relayed(box, pdaemon):
    with socket.create_connection(("127.0.0.1", pdaemon.port), timeout=10) as s:
        s.sendall((f"POST /proxy/{HTTP_PORT}/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {pdaemon.api_key}\r\n"
                   f"X-User-Id: {box.user}\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n").encode())
        interim = s.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n"), interim
        s.sendall(b"hello")
        answer = interim.split(b"\r\n\r\n", 1)[1] + recv_all(s, 10)
    assert status_of_raw(answer) == 200, answer
    assert b'"length": 5' in answer


# ---- WebSocket -----------------------------------------------------------------------------------

def test_a_websocket_passes_through(box, pdaemon):
    async def talk(url, headers):
        async with websockets.connect(url, extra_headers=headers, max_size=None) as ws:
            await ws.send("hello")
            assert await ws.recv() == "hello"
            big = bytes(range(256)) * 4096  # 1 MiB frame, both ways
            await ws.send(big)
            assert await ws.recv() == big
            for i in range(20):
                await ws.send(f"m{i}")
            assert [await ws.recv() for _ in range(20)] == [f"m{i}" for i in range(20)]

    base = pdaemon.url.replace("http://", "ws://")
    auth = {"Authorization": f"Bearer {pdaemon.api_key}"}
    asyncio.run(talk(f"{base}/proxy/{WS_PORT}/", {**auth, "X-User-Id": box.user}))
    # Open WebUI's way: the user in the query.
    asyncio.run(talk(f"{base}/proxy/{WS_PORT}/?user_id={box.user}", auth))


# ---- errors ----------------------------------------------------------------------------------------

def test_a_refused_port_is_502_with_a_detail(box):
    r = box.get("/proxy/8999/")
    assert r.status_code == 502, r.text
    detail = r.json()["detail"]
    assert "8999" in detail and "refused" in detail, detail


def test_a_server_that_never_answers_is_504(box):
    started = time.monotonic()
    r = box.get(f"/proxy/{HTTP_PORT}/never")
    took = time.monotonic() - started
    assert r.status_code == 504, r.text
    assert "did not answer within 2 s" in r.json()["detail"]
    assert 1.5 < took < 10, took
    # The app serves on.
    assert box.get(f"/proxy/{HTTP_PORT}/").text == INDEX
