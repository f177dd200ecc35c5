"""Open WebUI's terminal pane: /api/terminals (REST) and its WebSocket, as in API.md Part A.

Open WebUI creates a terminal over REST with X-User-Id, then connects the WebSocket to
/api/terminals/{id}?user_id=USER and authenticates with the first frame; keystrokes go in and
output comes out as binary frames. Beyond Open Terminal: the shell is the account's login shell
in its own box, only its owner sees it, a disconnect keeps it (a reattach replays the recent
output), DELETE ends it with everything started from it, and an account has a cap.
"""
import asyncio
import hashlib
import json
import os
import re
import socket
import time
import urllib.parse
import uuid

import pytest
import websockets

from conftest import sh

WS_TIMEOUT = 15


def ws_url(daemon, tid, user=None):
    url = f"ws://127.0.0.1:{daemon.port}/api/terminals/{urllib.parse.quote(tid)}"
    if user is not None:
        url += "?user_id=" + urllib.parse.quote(user)
    return url


def user_of(client):
    return client.headers["X-User-Id"]


def create(client, expect=200):
    r = client.post("/api/terminals")
    assert r.status_code == expect, r.text
    return r.json()


async def connect(daemon, tid, user, *, auth="frame", key=None, headers=None):
    """A WebSocket to the terminal: auth "frame" (Open WebUI's way), "header" (Bearer on the
    upgrade) or None (nothing sent)."""
    extra = dict(headers or {})
    if auth == "header":
        extra["Authorization"] = f"Bearer {key or daemon.api_key}"
    ws = await websockets.connect(ws_url(daemon, tid, user), extra_headers=extra, open_timeout=WS_TIMEOUT,
                                  ping_interval=None, max_size=None)
    if auth == "frame":
        await ws.send(json.dumps({"type": "auth", "token": key or daemon.api_key}))
    return ws


async def read_until(ws, pattern, timeout=WS_TIMEOUT):
    """Output frames until pattern (bytes or a compiled bytes regex) shows; returns all read."""
    seen = b""
    deadline = time.monotonic() + timeout
    found = (lambda: pattern in seen) if isinstance(pattern, bytes) else (lambda: pattern.search(seen))
    while not found():
        left = deadline - time.monotonic()
        assert left > 0, f"{pattern!r} not seen; output so far {seen[-2000:]!r}"
        msg = await asyncio.wait_for(ws.recv(), left)
        assert isinstance(msg, bytes), f"terminal output must be binary frames, got text {msg!r}"
        seen += msg
    return seen


async def closed_with(ws, timeout=WS_TIMEOUT):
    """Reads until the server closes; returns (code, reason)."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), timeout)
    except websockets.ConnectionClosed:
        return ws.close_code, ws.close_reason


def line(text):
    """A whole output line: bash's readline ends its echo with "\\r\\n" and may write an escape
    sequence and "\\r" (bracketed paste off) before the command's output."""
    return re.compile(rb"[\r\n]" + re.escape(text) + rb"\r\n")


def run(coro):
    return asyncio.run(coro)


async def type_and_read(daemon, tid, user, line, pattern, **kw):
    ws = await connect(daemon, tid, user, **kw)
    try:
        await ws.send(line.encode())
        return await read_until(ws, pattern)
    finally:
        await ws.close()


# ---- the Open WebUI flow -------------------------------------------------------------------

def test_create_then_type_and_read_with_first_frame_auth(clients, daemon):
    c = clients.user("term")
    t = create(c)
    assert set(t) == {"id", "created_at", "pid"}
    assert re.fullmatch(r"[0-9a-f]{32}", t["id"]), t["id"]  # 128 random bits, not a counter
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", t["created_at"]), t["created_at"]
    assert isinstance(t["pid"], int) and t["pid"] > 1
    out = run(type_and_read(daemon, t["id"], user_of(c), "echo hi\n", line(b"hi")))
    assert b"echo hi" in out  # the shell echoed the keystrokes, then ran the line


def test_listing_and_describing_show_the_callers_terminals(clients):
    c = clients.user("term")
    a, b = create(c), create(c)
    listed = c.get("/api/terminals")
    assert listed.status_code == 200
    assert listed.json() == [a, b]  # oldest first
    r = c.get(f"/api/terminals/{a['id']}")  # a plain GET of the WebSocket's path
    assert r.status_code == 200 and r.json() == a
    assert c.get(f"/api/terminals/{uuid.uuid4().hex}").status_code == 404


def test_the_shell_is_the_accounts_login_shell_in_its_home(clients, daemon):
    c = clients.user("term")
    _, uid, _ = sh(c, "id -u")
    _, home, _ = sh(c, 'printf %s "$HOME"')
    assert uid.strip() != "0"
    t = create(c)
    out = run(type_and_read(daemon, t["id"], user_of(c), "echo U=$(id -u) D=$(pwd) T=$TERM L=$(shopt -q login_shell && echo yes)\n",
                            re.compile(rb"U=\d+ D=\S+ T=\S+ L=\S+\r\n")))
    m = re.search(rb"U=(\d+) D=(\S+) T=(\S+) L=(\S+)\r\n", out)
    assert m.group(1).decode() == uid.strip()
    assert m.group(2).decode() == home
    assert m.group(3) == b"xterm-256color"
    assert m.group(4) == b"yes"  # a login shell


def test_the_shell_starts_in_the_sessions_cwd(clients, daemon):
    session = f"chat-{uuid.uuid4().hex[:8]}"
    c = clients.user("term", session=session)
    assert c.post("/files/mkdir", json={"path": "project/sub"}).status_code == 200
    assert c.post("/files/cwd", json={"path": "project/sub"}).status_code == 200
    t = create(c)
    out = run(type_and_read(daemon, t["id"], user_of(c), "echo D=$(pwd)\n", re.compile(rb"D=/\S*\r\n")))
    assert re.search(rb"D=/home/[^/\s]+/project/sub\r\n", out), out


def test_resize_changes_the_terminal_size(clients, daemon):
    c = clients.user("term")
    t = create(c)

    async def scenario():
        ws = await connect(daemon, t["id"], user_of(c))
        await ws.send(b"stty size\n")
        await read_until(ws, line(b"24 80"))  # the size it was created with
        await ws.send(json.dumps({"type": "resize", "cols": 123, "rows": 45}))
        await ws.send(b"stty size\n")
        await read_until(ws, line(b"45 123"))
        await ws.close()

    run(scenario())


def test_bearer_header_on_the_upgrade_needs_no_auth_frame(clients, daemon):
    c = clients.user("term")
    t = create(c)
    out = run(type_and_read(daemon, t["id"], user_of(c), "echo $((6*7))\n", line(b"42"), auth="header"))
    assert b"42" in out


def test_user_id_in_the_query_names_the_user(clients, daemon):
    alice, bob = clients.user("alice"), clients.user("bob")
    t = create(alice)

    async def scenario():
        # The same terminal, named by ?user_id= alone (no user header): alice's.
        out = await type_and_read(daemon, t["id"], user_of(alice), "echo me=$(id -u)\n", re.compile(rb"me=\d+\r\n"))
        ws = await connect(daemon, t["id"], user_of(bob))
        code = await closed_with(ws)
        return out, code

    out, (code, _) = run(scenario())
    _, alice_uid, _ = sh(alice, "id -u")
    assert f"me={alice_uid.strip()}".encode() in out
    assert code == 4004


def test_a_websocket_without_a_user_is_refused(clients, daemon):
    t = create(clients.user("term"))

    async def scenario():
        # The Bearer key on the upgrade: refused before it (400), as HTTP.
        with pytest.raises(websockets.InvalidStatusCode) as e:
            await connect(daemon, t["id"], None, auth="header")
        # The shared key in the auth frame names no one either (a user's key would: test_keys.py).
        ws = await connect(daemon, t["id"], None)
        return e.value.status_code, await closed_with(ws)

    status, (code, reason) = run(scenario())
    assert status == 400
    assert code == 4001 and "Missing user" in reason, reason


# ---- auth and ownership --------------------------------------------------------------------

def test_a_wrong_key_closes_with_4001(clients, daemon):
    c = clients.user("term")
    t = create(c)

    async def scenario():
        results = []
        ws = await connect(daemon, t["id"], user_of(c), key="wrong-key")
        results.append(await closed_with(ws))
        ws = await connect(daemon, t["id"], user_of(c), auth=None)
        await ws.send(b"echo typed-before-auth\n")  # keystrokes are no auth frame
        results.append(await closed_with(ws))
        ws = await connect(daemon, t["id"], user_of(c), auth=None)
        await ws.send(json.dumps({"type": "resize", "cols": 1, "rows": 1}))
        results.append(await closed_with(ws))
        return results

    for code, reason in run(scenario()):
        assert code == 4001, reason
    # A wrong Bearer on the upgrade is no key either: the first frame still decides.
    out = run(type_and_read(daemon, t["id"], user_of(c), "echo ok\n", line(b"ok"),
                            headers={"Authorization": "Bearer wrong-key"}))
    assert b"ok" in out


def test_an_unknown_terminal_closes_with_4004(clients, daemon):
    c = clients.user("term")

    async def scenario():
        ws = await connect(daemon, uuid.uuid4().hex, user_of(c))
        return await closed_with(ws)

    code, reason = run(scenario())
    assert code == 4004 and reason == "Session not found"


def test_another_user_can_neither_see_attach_to_nor_delete_it(clients, daemon):
    alice, bob = clients.user("alice"), clients.user("bob")
    t = create(alice)
    bob_own = create(bob)
    assert bob.get("/api/terminals").json() == [bob_own]
    assert bob.get(f"/api/terminals/{t['id']}").status_code == 404
    assert bob.delete(f"/api/terminals/{t['id']}").status_code == 404

    async def scenario():
        ws = await connect(daemon, t["id"], user_of(bob))
        return await closed_with(ws)

    code, _ = run(scenario())
    assert code == 4004
    # Still alice's, alive and listed for her.
    assert alice.get(f"/api/terminals/{t['id']}").json() == t
    assert run(type_and_read(daemon, t["id"], user_of(alice), "echo still\n", line(b"still")))


# ---- the life of a terminal ----------------------------------------------------------------

def test_a_disconnect_keeps_the_shell_and_a_reattach_replays_its_output(clients, daemon):
    c = clients.user("term")
    t = create(c)

    async def scenario():
        ws = await connect(daemon, t["id"], user_of(c))
        await ws.send(b"X=41; echo marker-$((X+1))\n")
        await read_until(ws, b"marker-42\r\n")
        await ws.close()
        ws = await connect(daemon, t["id"], user_of(c))
        replay = await read_until(ws, b"marker-42\r\n")  # before anything was typed
        await ws.send(b"echo again-$X\n")  # the same shell: its variable is still there
        await read_until(ws, b"again-41\r\n")
        await ws.close()
        return replay

    run(scenario())


def test_several_clients_all_see_the_output(clients, daemon):
    c = clients.user("term")
    t = create(c)

    async def scenario():
        a = await connect(daemon, t["id"], user_of(c))
        b = await connect(daemon, t["id"], user_of(c), auth="header")
        await a.send(b"echo both-$((2+3))\n")
        await asyncio.gather(read_until(a, b"both-5\r\n"), read_until(b, b"both-5\r\n"))
        await b.send(b"echo from-b-$((3+4))\n")
        await asyncio.gather(read_until(a, b"from-b-7\r\n"), read_until(b, b"from-b-7\r\n"))
        await a.close()
        await b.close()

    run(scenario())


def test_a_message_over_64_kib_closes_with_1009_and_the_shell_stays(clients, daemon):
    c = clients.user("term")
    t = create(c)

    async def scenario():
        ws = await connect(daemon, t["id"], user_of(c))
        await ws.send(b"X=9; echo big-$((X*2))\n")
        await read_until(ws, line(b"big-18"))
        await ws.send(b"y" * (64 * 1024 + 1))
        code, _ = await closed_with(ws)
        assert code == 1009
        ws = await connect(daemon, t["id"], user_of(c))  # the same shell lives on
        await ws.send(b"\x15echo still-$X\n")  # Ctrl-U: a line the shell holds is dropped
        await read_until(ws, line(b"still-9"))
        await ws.close()

    run(scenario())


def test_a_paste_larger_than_the_pty_takes_reaches_the_shell_whole_and_in_order(clients, daemon):
    """A megabyte sent as fast as the client can: the pty takes a few KiB at a time, so most of
    it waits in the daemon (and, past its bound, in the client's socket) until the program reads
    on; every byte arrives once, in order, and the terminal types normally after."""
    c = clients.user("term")
    t = create(c)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    data = bytes(alphabet[b % len(alphabet)] for b in os.urandom(1_000_000))

    async def scenario():
        ws = await connect(daemon, t["id"], user_of(c))
        # printf's output, not the echo of the typed line, says head is about to read.
        await ws.send(f"stty raw -echo; printf 'R%sY\\n' EAD; head -c {len(data)} | sha256sum; stty sane\n".encode())
        await read_until(ws, b"READY")
        for i in range(0, len(data), 32 * 1024):
            await ws.send(data[i:i + 32 * 1024])
        await read_until(ws, hashlib.sha256(data).hexdigest().encode(), timeout=60)
        await ws.send(b"echo after-$((20+3))\n")
        await read_until(ws, line(b"after-23"))
        await ws.close()

    run(scenario())


def masked_frame(opcode, payload):
    """A client's WebSocket frame (RFC 6455): FIN, opcode, masked."""
    key = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_a_client_that_stops_reading_is_dropped_and_the_daemon_holds_no_more_than_its_bound(clients, daemon):
    """A client that never reads while its shell prints 200 MB: once 4 MiB of output wait for
    it (TerminalSocketOptions::max_queued_bytes), the daemon drops it instead of growing; the
    shell stays for a reattach, and another client of the same terminal is served meanwhile."""
    c = clients.user("term")
    t = create(c)
    before = rss_kib(daemon.pid)
    s = socket.create_connection(("127.0.0.1", daemon.port), timeout=WS_TIMEOUT)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # small: the daemon's queue fills soon
    s.sendall((f"GET /api/terminals/{t['id']}?user_id={user_of(c)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    s.sendall(masked_frame(0x1, json.dumps({"type": "auth", "token": daemon.api_key}).encode()))
    s.sendall(masked_frame(0x2, b"head -c 200000000 /dev/zero | tr '\\0' x; echo; echo slow-done\n"))
    try:
        deadline = time.monotonic() + 60
        while "client too slow" not in daemon.log_tail(20000):
            assert time.monotonic() < deadline, "a client that never reads was not dropped"
            assert rss_kib(daemon.pid) < before + 64 * 1024, "the daemon grew with the unread output"
            time.sleep(0.1)
        assert rss_kib(daemon.pid) < before + 64 * 1024

        async def reattach():
            # The shell stayed and finishes. A client reading the rest of the 200 MB may fall
            # behind by the same bound and be dropped too: it attaches again (the replay holds
            # the end once the shell is done), as a browser would.
            deadline = time.monotonic() + 90
            while True:
                ws = await connect(daemon, t["id"], user_of(c))
                tail = b""
                try:
                    while b"slow-done\r\n" not in tail:  # keep the tail only
                        tail = (tail + await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))[-64:]
                    break
                except websockets.ConnectionClosed:
                    assert "client too slow" in daemon.log_tail(20000)
            await ws.send(b"echo still-$((6*7))\n")
            await read_until(ws, b"still-42\r\n")
            await ws.close()

        run(reattach())
    finally:
        s.close()


def test_delete_ends_the_shell_and_its_background_jobs(clients, daemon):
    c = clients.user("term")
    t = create(c)
    # Two jobs: an ordinary one, and one that ignores the hangup (as nohup would make it).
    jobs = b"sleep 300 & echo job-$!; (trap '' HUP; exec sleep 301) & echo deaf-$!\n"

    async def start_jobs():
        ws = await connect(daemon, t["id"], user_of(c))
        await ws.send(jobs)
        out = await read_until(ws, re.compile(rb"deaf-\d+\r\n"))
        return ws, {int(re.search(rb"job-(\d+)\r\n", out).group(1)), int(re.search(rb"deaf-(\d+)\r\n", out).group(1))}

    async def scenario():
        ws, started = await start_jobs()
        # The jobs run, in the same box as the account's commands ([0] keeps pgrep's own
        # bash -c line from matching).
        code, out, _ = sh(c, "pgrep -f 'sleep 30[01]'")
        assert code == 0 and started <= {int(p) for p in out.split()}, (started, out)
        r = c.delete(f"/api/terminals/{t['id']}")
        assert r.status_code == 200 and r.json() == {"status": "deleted"}
        return await closed_with(ws)

    code, reason = run(scenario())
    assert code == 1000 and "deleted" in reason, (code, reason)
    deadline = time.monotonic() + 10
    while True:
        code, out, _ = sh(c, f"pgrep -f 'sleep 30[01]'; kill -0 {t['pid']} 2>/dev/null && echo shell-alive")
        if code != 0 and "shell-alive" not in out:
            break
        assert time.monotonic() < deadline, f"still running after DELETE: {out!r}"
        time.sleep(0.2)
    assert c.get(f"/api/terminals/{t['id']}").status_code == 404
    assert c.delete(f"/api/terminals/{t['id']}").status_code == 404
    assert t not in c.get("/api/terminals").json()


def test_a_shell_that_exits_ends_its_terminal(clients, daemon):
    c = clients.user("term")
    t = create(c)

    async def scenario():
        ws = await connect(daemon, t["id"], user_of(c))
        await ws.send(b"echo bye-$((1+1)); exit 3\n")
        out = await read_until(ws, b"bye-2\r\n")
        return out, await closed_with(ws)

    _, (code, reason) = run(scenario())
    assert code == 1000 and "exited with status 3" in reason, (code, reason)
    deadline = time.monotonic() + 5
    while c.get(f"/api/terminals/{t['id']}").status_code != 404:
        assert time.monotonic() < deadline, "an ended terminal is still listed"
        time.sleep(0.1)

    async def attach_after():
        ws = await connect(daemon, t["id"], user_of(c))
        return await closed_with(ws)

    assert run(attach_after())[0] == 4004


# ---- limits ----------------------------------------------------------------------------------

@pytest.fixture
def limited(make_daemon):
    return make_daemon(tag="term-cap", api_key=uuid.uuid4().hex,
                       config_text="[terminals]\nmax_per_account = 2\nidle_timeout = 3\n").start()


def test_the_per_account_cap_is_429_and_frees_on_delete(limited):
    with limited.client(user=f"cap-{uuid.uuid4().hex[:8]}") as c, \
            limited.client(user=f"other-{uuid.uuid4().hex[:8]}") as other:
        a, _ = create(c), create(c)
        r = c.post("/api/terminals")
        assert r.status_code == 429
        assert "2" in r.json()["detail"], r.json()
        assert len(create(other)["id"]) == 32  # another account has its own cap
        assert c.delete(f"/api/terminals/{a['id']}").status_code == 200
        create(c)
        assert c.post("/api/terminals").status_code == 429


def test_an_idle_terminal_ends_but_an_attached_one_stays(limited):
    user = f"idle-{uuid.uuid4().hex[:8]}"
    with limited.client(user=user) as c:
        idle, watched = create(c), create(c)

        async def scenario():
            ws = await connect(limited, watched["id"], user)
            # idle_timeout = 3 s: the unwatched one ends once quiet that long...
            deadline = time.monotonic() + 20
            while c.get(f"/api/terminals/{idle['id']}").status_code != 404:
                assert time.monotonic() < deadline, "an idle terminal was not ended"
                await asyncio.sleep(0.2)
            # ...while the one with a client, created with it and as quiet, still runs.
            await ws.send(b"echo watched-$((5*5))\n")
            await read_until(ws, b"watched-25\r\n")
            await ws.close()

        started = time.monotonic()
        run(scenario())
        assert time.monotonic() - started >= 2.5  # not before its timeout
        assert c.get(f"/api/terminals/{watched['id']}").status_code == 200


# ---- the daemon's stop ------------------------------------------------------------------------

async def stop_while_typing(d, sockets, *, settle, timeout):
    """Stops d (SIGTERM, off the event loop) while the client of every socket keeps typing into
    its terminal, settle seconds after they start, so the terminals' loop is busy to the last
    moment; d.stop()'s exit status. test_daemon_stop.py stops its daemon this way too."""
    async def keep_typing(ws):
        try:
            while True:
                await ws.send(b"x")
                await asyncio.wait_for(ws.recv(), timeout)
        except (websockets.ConnectionClosed, ConnectionError, asyncio.TimeoutError):
            return

    typing = [asyncio.ensure_future(keep_typing(ws)) for ws in sockets]
    await asyncio.sleep(settle)
    rc = await asyncio.get_running_loop().run_in_executor(None, d.stop)
    await asyncio.wait(typing, timeout=timeout)
    return rc


def test_a_daemon_stopped_while_terminals_stream_and_type_exits_cleanly_and_leaves_no_mount(make_daemon):
    """SIGTERM while two attached terminals print without a pause and their clients keep typing:
    the terminals' loop is busy to the last moment, and the daemon still stops as it should
    (status 0, no crash report, no process and no volume mount of it left)."""
    d = make_daemon(tag="term-stop", api_key=uuid.uuid4().hex).start()
    users = [f"stop-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    tids = []
    for u in users:
        with d.client(user=u) as c:
            tids.append(create(c)["id"])

    async def scenario():
        sockets = [await connect(d, tid, u) for tid, u in zip(tids, users)]
        for ws in sockets:
            await ws.send(b"yes flood-$((6*7)) | head -c 2000000000\n")
        for ws in sockets:
            await read_until(ws, b"flood-42\r\nflood-42\r\n")
        return await stop_while_typing(d, sockets, settle=0.5, timeout=WS_TIMEOUT)

    rc = run(scenario())
    assert rc == 0, d.log_tail()
    assert "crash" not in d.log_tail(20000).lower(), d.log_tail()
    assert d.leftovers == [], d.log_tail()
    with open("/proc/self/mounts") as f:
        left = [line.split()[1] for line in f if line.split()[1].startswith(os.path.realpath(d.state_dir) + "/")]
    assert left == [], left
