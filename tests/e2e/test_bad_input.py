"""Hostile and broken requests: each is refused cleanly and the daemon keeps serving."""
import socket
import threading
import time

import httpx
import pytest

from conftest import assert_alive, raw_request, recv_all, running_daemon, sh, status_of_raw, text_of


def request_head(daemon, method="GET", path="/health", extra=b""):
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {daemon.api_key}\r\nX-User-Id: badinput\r\n").encode() + extra


# ---- on the shared daemon -------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/execute", "/files/write", "/files/mkdir"])
@pytest.mark.parametrize("raw", [
    b'{"command": "echo \xff\xfe", "path": "x", "content": "x"}',              # invalid UTF-8
    b'{"command": "echo \xc0\xaf", "path": "x", "content": "x"}',              # overlong encoding
    b'{"command": "echo \xed\xa0\x80", "path": "x", "content": "x"}',          # encoded surrogate
    b'{"command": "echo \\ud800", "path": "x", "content": "x"}',               # lone surrogate escape
    b'{"command": "echo x", "path": "x", "content": "x"',                       # unterminated
    pytest.param(b'{"command": "echo x", "path": "x", "content": "x"}\x00{"more": 1}', id="trailing-nul"),
], ids=["invalid", "overlong", "surrogate-bytes", "surrogate-escape", "unterminated", "trailing-nul"])
def test_malformed_json_bodies_are_400(daemon, clients, raw, path):
    c = clients.user("bad")
    r = c.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, (path, r.text)
    assert r.json()["detail"]
    assert_alive(daemon)


@pytest.mark.parametrize("path,body", [
    ("/execute", b'{"command": "true", "timeout": 1e309}'),
    ("/files/write", b'{"path": "f", "content": "x", "n": -1e309}'),
    ("/files/archive", b'{"paths": ["."], "x": [1e400]}'),
    ("/files/move", b'{"source": "a", "destination": "b", "n": 1' + b"0" * 400 + b'}'),
    ("/execute/nosuch/input", b'{"input": "x", "n": 1e309}'),
])
def test_numbers_out_of_range_are_400(daemon, clients, path, body):
    """A number no double holds was a 500 (nlohmann's out_of_range escaped the JSON reader)."""
    c = clients.user("overflow")
    r = c.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, (path, r.status_code, r.text)
    assert r.json()["detail"].startswith("Invalid JSON body: number overflow"), r.text
    assert_alive(daemon)


def test_deeply_nested_json_is_refused(daemon, clients):
    c = clients.user("deep")
    raw = b'{"command": "true", "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    r = c.post("/execute", content=raw, headers={"content-type": "application/json"})
    assert r.status_code in (400, 422)
    assert_alive(daemon)


def test_invalid_utf8_in_file_content(daemon, clients):
    c = clients.user("badutf")
    r = c.post("/files/write", content=b'{"path": "f", "content": "\xff"}',
               headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert c.get("/files/display", params={"path": "f"}).json()["exists"] is False


@pytest.mark.parametrize("layout", ["one-header", "many-headers", "long-url"])
def test_ten_megabytes_of_header(daemon, layout):
    size = 10 << 20
    if layout == "one-header":
        data = request_head(daemon) + b"X-Big: " + b"a" * size + b"\r\n\r\n"
    elif layout == "many-headers":
        line = b"X-H: " + b"b" * 1000 + b"\r\n"
        data = request_head(daemon) + line * (size // len(line)) + b"\r\n"
    else:
        data = b"GET /health?" + b"q" * size + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    started = time.monotonic()
    answer = raw_request(daemon.port, data, timeout=15)
    assert time.monotonic() - started < 20
    # Refused with 431 (414/400 for the URL), or the connection was simply closed.
    assert status_of_raw(answer) in (None, 400, 414, 431), answer[:200]
    assert answer == b"" or status_of_raw(answer) is not None
    assert_alive(daemon)


@pytest.mark.parametrize("garbage", [b"\x00\x01\x02\x03\r\n\r\n", b"GET\r\n\r\n",
                                     b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                                     b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                                     b"POST /execute HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
                                     b"GET /health HTTP/1.1\r\nBad Header\r\n\r\n"],
                         ids=repr)
def test_malformed_http_is_400_or_closed(daemon, garbage):
    answer = raw_request(daemon.port, garbage, timeout=10)
    assert status_of_raw(answer) in (None, 400, 401, 505), answer[:200]
    assert_alive(daemon)


def test_truncated_body_then_close(daemon):
    head = request_head(daemon, "POST", "/execute",
                        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=5) as s:
        s.sendall(head + b'{"command": "touch /tmp/x"')
    assert_alive(daemon)


def test_pipelined_requests_are_answered_in_order(daemon):
    one = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /api/config HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = raw_request(daemon.port, one + one + last, timeout=10)
    assert answer.count(b"HTTP/1.1 200") == 3
    assert answer.index(b"ok") < answer.index(b"features")


def test_idle_connections_do_not_block_others(daemon):
    socks = [socket.create_connection(("127.0.0.1", daemon.port), timeout=5) for _ in range(100)]
    try:
        started = time.monotonic()
        assert_alive(daemon)
        assert time.monotonic() - started < 10
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("uid", ["../../root", "root", "Ä Ö Ü", "x" * 256, "a;rm -rf /", "0", ".."])
def test_odd_user_ids_get_sane_accounts(daemon, clients, uid):
    c = clients(user=uid.encode())
    code, out, _ = sh(c, 'id -u; printf %s "$HOME"')
    uid_number, home = out.split("\n")
    name = home.removeprefix("/home/")
    assert code == 0 and int(uid_number) != 0
    assert home.startswith("/home/") and "/" not in name and name not in ("root", "..", ".", "")


def test_overlong_user_id_is_400(daemon, clients):
    r = clients(user="x" * 257).get("/execute")
    assert r.status_code == 400


# ---- limits: a daemon with a 1 MB body limit, a 2 s header timeout, 1 MB of output kept --------

@pytest.fixture(scope="module")
def limited():
    with running_daemon("limits", lifetime=300,
                        config_text='[limits]\nbody = "1M"\nheader_timeout = 2\n[exec]\noutput_cap = "1M"\n') as d:
        yield d


def test_body_over_the_limit_is_413(limited):
    with limited.client(user="big") as c:
        big = "x" * (2 << 20)
        r = c.post("/execute", json={"command": "echo " + big})
        assert r.status_code == 413, r.text[:200]
        assert r.json()["detail"]
        assert c.get("/execute").json() == []
        # Just under the limit is accepted.
        r = c.post("/execute", params={"wait": 10}, json={"command": "wc -c", "stdin": "y" * (900 << 10), "pty": False})
        assert r.status_code == 200 and r.json()["output"][0]["data"].strip() == str(900 << 10)
        r = c.post("/files/write", json={"path": "big.txt", "content": big})
        assert r.status_code == 413, r.text[:200]
        # Just under the limit is fine.
        r = c.post("/files/write", json={"path": "ok.txt", "content": "y" * (900 << 10)})
        assert r.status_code == 200, r.text[:200]
        assert c.get("/files/display", params={"path": "big.txt"}).json()["exists"] is False
    assert_alive(limited)


def test_upload_over_the_body_limit_is_413(limited):
    with limited.client(user="bigup") as c:
        r = c.post("/files/upload", params={"directory": "."},
                   files={"file": ("big.bin", b"x" * (2 << 20))})
        assert r.status_code == 413, r.text[:200]
        assert c.get("/files/display", params={"path": "big.bin"}).json()["exists"] is False
    assert_alive(limited)


def test_chunked_body_over_the_limit(limited):
    def chunks():
        yield b'{"command": "touch made; : '
        for _ in range(64):
            yield b"z" * (64 << 10)
        yield b'"}'
    with limited.client(user="chunky") as c:
        try:
            r = c.post("/execute", content=chunks(), headers={"content-type": "application/json"})
            assert r.status_code == 413, r.text[:200]
        except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
            pass  # cut off while sending: also a refusal
        assert c.get("/execute").json() == []
    assert_alive(limited)


def test_expect_continue_over_the_limit_is_refused_before_the_body(limited):
    head = request_head(limited, "POST", "/execute",
                        b"Content-Type: application/json\r\nContent-Length: 50000000\r\n"
                        b"Expect: 100-continue\r\n\r\n")
    with socket.create_connection(("127.0.0.1", limited.port), timeout=5) as s:
        s.sendall(head)
        answer = recv_all(s, 5)
    assert status_of_raw(answer) == 413, answer[:200]
    assert_alive(limited)


def slow_client(port, results, i, deadline_s=15):
    """Sends a request head one byte per second; records (seconds until cut off, answer)."""
    data = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 40 + b"\r\n\r\n"
    started = time.monotonic()
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=deadline_s) as s:
        s.settimeout(1.0)
        for byte in data:
            try:
                s.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                got = s.recv(65536)
                answer += got
                if not got:
                    break
                if b"\r\n\r\n" in answer:
                    answer += recv_all(s, 2)
                    break
            except socket.timeout:
                pass  # ~1 s per byte
            except ConnectionResetError:
                break
            if time.monotonic() - started > deadline_s:
                break
    results[i] = (time.monotonic() - started, answer)


def test_slow_client_is_cut_off_by_the_header_timeout(limited):
    results = {}
    threads = [threading.Thread(target=slow_client, args=(limited.port, results, i)) for i in range(20)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    # Others are served meanwhile.
    started = time.monotonic()
    with limited.client(user="fast") as c:
        for _ in range(5):
            assert c.get("/health").status_code == 200
    assert time.monotonic() - started < 2
    for t in threads:
        t.join(30)
    assert len(results) == 20
    for took, answer in results.values():
        assert took < 6, took  # 2 s header timeout, not the 60 s the request would take
        assert status_of_raw(answer) in (None, 408), answer[:200]
        assert b"HTTP/1.1 200" not in answer
    assert_alive(limited)


def test_output_beyond_the_cap_is_dropped_oldest_first(limited):
    full = "".join(f"{i}\n" for i in range(1, 400001)).encode()  # 2.7 MB
    with limited.client(user="capped") as c:
        r = c.post("/execute", params={"wait": 20}, json={"command": "seq 1 400000", "pty": False})
        p = r.json()
        assert p["status"] == "done" and p["next_offset"] == len(full)
        assert p["truncated"] is True
        assert text_of(p).encode() == full[-(1 << 20):]  # the newest 1 MiB, nothing else
        # Offsets stay absolute: inside the kept window nothing is missing.
        q = c.get(f"/execute/{p['id']}/status", params={"offset": 2_000_000}).json()
        assert q["truncated"] is False and text_of(q).encode() == full[2_000_000:]
        q = c.get(f"/execute/{p['id']}/status", params={"tail": 2}).json()
        assert text_of(q) == "399999\n400000\n"
    assert_alive(limited)
