"""The audit trail (issue 36): with `[audit] level = "REQUEST"`, a scripted session (two users,
an /execute, a file write, a refused key, a denied egress to a listener of ours, a gateway call
to the fake upstream, a new account, an admin request, a quota refusal, a box start that fails;
the last two as test_metrics.py takes them) leaves one OCSF event of the right class with the
right actor and outcome for each action; every line parses; no API key, admin key,
upstream credential, JWT or cookie value appears anywhere in the file's bytes; a SIGKILL during
a burst of requests leaves no torn line; level NONE writes nothing; and a disk that fills stops
the trail, not the API, and says so in /metrics.
"""
import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid

import httpx
import pytest
import websockets

from conftest import running_daemon, sh
from scripted_session import (ACCOUNTS_CONFIG, FAILED_START_COMMAND, HOLD_START_ENV, fail_a_box_start,
                              refuse_a_write_for_quota)

UPSTREAM_KEY = "sk-ant-api03-AUDIT-" + uuid.uuid4().hex
COOKIE_VALUE = "cookie-" + uuid.uuid4().hex
BODY_SECRET = "body-secret-" + uuid.uuid4().hex
BAD_KEY = "not-the-key-" + uuid.uuid4().hex


def read_events(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw == b"" or raw.endswith(b"\n"), raw[-200:]
    return raw, [json.loads(line) for line in raw.splitlines()]  # every line parses, or this fails


def wait_events(path, predicate, timeout=15):
    """The file's events once predicate(events) holds (the writer is off the request path)."""
    deadline = time.monotonic() + timeout
    while True:
        _, events = read_events(path) if os.path.exists(path) else (b"", [])
        if predicate(events):
            return events
        assert time.monotonic() < deadline, [e.get("class_name") for e in events][-40:]
        time.sleep(0.2)


def admin_key_of(d):
    with open(os.path.join(d.state_dir, "admin_key")) as f:
        return f.read().strip()


def metric(d, name):
    r = httpx.get(f"{d.url}/metrics", headers={"Authorization": f"Bearer {admin_key_of(d)}"}, timeout=10)
    assert r.status_code == 200, r.text
    m = re.search(rf"^{re.escape(name)} (\S+)$", r.text, re.M)
    assert m, (name, r.text[-2000:])
    return float(m.group(1))


@pytest.fixture(scope="module")
def adaemon(fake):
    config = f"""
[audit]
level = "REQUEST"
{ACCOUNTS_CONFIG}
[inference.anthropic]
upstream = "{fake.url}"
"""
    with running_daemon("audit", lifetime=600, config_text=config,
                        env={**HOLD_START_ENV, "AGENTBOX_ANTHROPIC_API_KEY": UPSTREAM_KEY}) as d:
        d.audit_path = os.path.join(d.state_dir, "audit", "audit.jsonl")
        yield d


def test_a_scripted_session_leaves_one_event_per_action(adaemon, origin, fake):
    d = adaemon
    alice_id, bob_id = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    with d.client(user=alice_id, cookies={"session": COOKIE_VALUE}) as alice, d.client(user=bob_id) as bob:
        assert sh(alice, "echo one-$((20+22))")[1] == "one-42\n"  # a new account, a box, a command
        assert sh(bob, "exit 3")[0] == 3
        r = alice.post("/files/write", json={"path": "note.txt", "content": "hello", "password": BODY_SECRET})
        assert r.status_code in (200, 422), r.text
        # A denied egress: no policy allows the host's 127.0.0.1, where our listener is.
        # (NO_PROXY names 127.0.0.1: the proxy is asked for it explicitly.)
        code, out, _ = sh(alice, f"curl -s --max-time 10 -x \"$HTTP_PROXY\" --noproxy '' -w ' %{{http_code}}' "
                                 f"http://127.0.0.1:{origin.port}/x")
        assert out.endswith(" 403"), out
        assert not any(p == "/x" for p in origin.paths)
        # A gateway call, relayed to the fake upstream with the operator's credential.
        code, out, err = sh(alice, 'curl -sS --max-time 20 -o /dev/null -w "%{http_code}" '
                                   '"$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" '
                                   '-H "anthropic-version: 2023-06-01" -H "content-type: application/json" '
                                   """-d '{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'""")
        assert out == "200", (out, err)
        # A quota refusal: bob's volume filled from his box, then his write through the API (507).
        refuse_a_write_for_quota(bob)
    # A box start that fails: a new user whose box's init never answers (503 after 3 s).
    stuck_id = fail_a_box_start(d)
    # A refused key, from our address.
    with d.client(user=alice_id, key=BAD_KEY) as mallory:
        assert mallory.get("/files/list", params={"directory": "."}).status_code == 401
    # The operator's request on an admin route.
    admin = httpx.get(f"{d.url}/admin/accounts", headers={"Authorization": f"Bearer {admin_key_of(d)}"}, timeout=10)
    assert admin.status_code == 200, admin.text

    def by_class(events, uid):
        return [e for e in events if e["class_uid"] == uid]

    def launch_failed(events):
        return [e for e in by_class(events, 1007) if e["activity_id"] == 1 and e["status_id"] == 2]

    events = wait_events(d.audit_path, lambda ev: by_class(ev, 3002) and by_class(ev, 4002) and launch_failed(ev) and
                         any(e.get("api", {}).get("operation") == "/admin/accounts" for e in ev))
    for e in events:  # the base of every event
        assert e["metadata"]["version"] == "1.3.0"
        assert e["metadata"]["product"]["name"] == "agentbox"
        assert e["type_uid"] == e["class_uid"] * 100 + e["activity_id"]
        assert isinstance(e["time"], int) and e["time"] > 1_600_000_000_000  # milliseconds
        for field in ("category_uid", "severity_id", "status_id"):
            assert field in e, (field, e)

    # API Activity: the user, the key's kind, the route's pattern, the status.
    api = by_class(events, 6003)
    writes = [e for e in api if e["api"]["operation"] == "/files/write" and e["actor"]["user"].get("uid") == alice_id]
    assert len(writes) == 1, writes
    w = writes[0]
    assert w["actor"]["user"]["uid"] == alice_id and w["unmapped"]["key_kind"] == "shared"
    assert w["http_request"]["http_method"] == "POST" and w["api"]["response"]["code"] in (200, 422)
    assert w["actor"]["user"]["account"]["name"].startswith("alice-")
    assert '"content":"hello"' in w["http_request"]["body"] and "[REDACTED]" in w["http_request"]["body"]
    assert w["http_request"]["http_headers"]["authorization"] == "[REDACTED]"
    assert w["http_request"]["http_headers"]["cookie"] == "[REDACTED]"
    execs = [e for e in api if e["api"]["operation"] == "/execute" and e["actor"]["user"].get("uid") == bob_id]
    assert len(execs) == 2 and all(e["status_id"] == 1 for e in execs), execs  # `exit 3` and the fill
    adm = [e for e in api if e["api"]["operation"] == "/admin/accounts"]
    assert len(adm) == 1 and adm[0]["unmapped"]["key_kind"] == "admin" and adm[0]["actor"]["user"]["type"] == "Admin"

    # Authentication: the refused key, failed, from 127.0.0.1, its value nowhere.
    auth = by_class(events, 3002)
    assert len(auth) == 1, auth
    assert auth[0]["status_id"] == 2 and auth[0]["src_endpoint"]["ip"] == "127.0.0.1"
    assert auth[0]["user"]["uid"] == alice_id and auth[0]["status_code"] == "401"

    # Network Activity: the refusal, with the rule, to our listener's port.
    net = by_class(events, 4001)
    refused = [e for e in net if e["dst_endpoint"]["port"] == origin.port]
    assert len(refused) == 1, net
    assert refused[0]["activity_name"] == "Refuse" and refused[0]["disposition"] == "Blocked"
    assert refused[0]["firewall_rule"]["name"] and refused[0]["status_id"] == 2
    assert refused[0]["actor"]["user"]["uid"] == alice_id

    # HTTP Activity: the gateway call, allowed, with the bytes.
    gw = by_class(events, 4002)
    assert len(gw) == 1 and gw[0]["disposition"] == "Allowed" and gw[0]["traffic"]["bytes_in"] > 0, gw
    assert gw[0]["actor"]["user"]["uid"] == alice_id

    # Process Activity: launched and ended, with the exit status.
    procs = by_class(events, 1007)
    launched = [e for e in procs if e["activity_id"] == 1 and "one-$((20+22))" in e["process"].get("cmd_line", "")]
    assert len(launched) == 1, procs
    bob_end = [e for e in procs if e["activity_id"] == 2 and e.get("exit_code") == 3]
    assert len(bob_end) == 1 and bob_end[0]["actor"]["user"]["name"].startswith("bob"), procs

    # The quota refusal: bob's write, answered 507, a failure, his own.
    refused = [e for e in api if e["api"]["operation"] == "/files/write" and e["actor"]["user"].get("uid") == bob_id]
    assert len(refused) == 1, refused
    assert refused[0]["api"]["response"]["code"] == 507 and refused[0]["status_code"] == "507"
    assert refused[0]["status_id"] == 2 and refused[0]["status"] == "Failure"
    assert refused[0]["unmapped"]["key_kind"] == "shared" and refused[0]["http_request"]["http_method"] == "POST"
    assert refused[0]["actor"]["user"]["account"]["name"].startswith("bob-")

    # The failed box start: the request a failure (503), as the stuck user...
    stuck = [e for e in api if e["actor"]["user"].get("uid") == stuck_id]
    assert [(e["api"]["operation"], e["api"]["response"]["code"], e["status_id"]) for e in stuck] == \
        [("/execute", 503, 2)], stuck
    # ...and its command's launch a failure naming why, in the stuck user's box, with no pid.
    failed = launch_failed(events)
    assert len(failed) == 1, failed
    f = failed[0]
    assert FAILED_START_COMMAND in f["process"]["cmd_line"] and "pid" not in f["process"], f
    assert f["actor"]["user"]["name"].startswith("stuck-") and f["device"]["name"].startswith("stuck-"), f
    assert "did not start within 3 s" in f["status_detail"] and f["severity_id"] == 3, f
    assert not [e for e in procs if e["device"]["name"] == f["device"]["name"] and e is not f], procs

    # Account Change: the three accounts created, each once, as their users.
    created = [e for e in by_class(events, 3001) if e["activity_id"] == 1]
    assert sorted(e["user"]["uid"] for e in created) == sorted([alice_id, bob_id, stuck_id]), created


def test_takeovers_are_audited_with_their_caller(adaemon):
    # The terminal WebSocket and /proxy take the connection over from the HTTP layer; they are
    # audited as every other request, and a key refused in the WebSocket's auth frame is an
    # Authentication failure.
    d = adaemon
    user = f"carol-{uuid.uuid4().hex[:8]}"
    with d.client(user=user) as c:
        r = c.post("/api/terminals")
        assert r.status_code == 200, r.text
        tid = r.json()["id"]
        url = f"ws://127.0.0.1:{d.port}/api/terminals/{tid}"

        async def sessions():
            async with websockets.connect(url, extra_headers={"X-User-Id": user}, open_timeout=15,
                                          ping_interval=None) as ws:
                await ws.send(json.dumps({"type": "auth", "token": d.api_key}))
                await ws.send(b"echo audited-$((40+2))\n")
                seen = b""
                while b"audited-42" not in seen:
                    seen += await asyncio.wait_for(ws.recv(), 15)
            async with websockets.connect(url, extra_headers={"X-User-Id": user}, open_timeout=15,
                                          ping_interval=None) as ws:
                await ws.send(json.dumps({"type": "auth", "token": BAD_KEY}))
                with pytest.raises(websockets.ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), 15)
                return ws.close_code

        assert asyncio.run(sessions()) == 4001
        proxied = c.get("/proxy/1/somewhere").status_code  # nothing listens on port 1 in the box

    def mine(ev, uid, route):
        return [e for e in ev if e["class_uid"] == uid and e.get("api", {}).get("operation") == route]

    def refusals(ev):
        return [e for e in ev if e["class_uid"] == 3002 and e.get("user", {}).get("uid") == user]

    events = wait_events(d.audit_path, lambda ev: mine(ev, 6003, "/proxy/{port}/{path:path}") and refusals(ev))
    ws = [e for e in mine(events, 6003, "/api/terminals/{id}") if e["actor"]["user"].get("uid") == user]
    assert len(ws) == 1, ws  # the accepted session; the refused one is no API Activity
    assert ws[0]["api"]["response"]["code"] == 101 and ws[0]["unmapped"]["key_kind"] == "shared"
    assert ws[0]["http_request"]["http_method"] == "GET"
    px = [e for e in mine(events, 6003, "/proxy/{port}/{path:path}") if e["actor"]["user"].get("uid") == user]
    assert len(px) == 1 and px[0]["api"]["response"]["code"] == proxied, px
    auth = refusals(events)
    assert len(auth) == 1 and auth[0]["status_id"] == 2, auth
    assert auth[0]["http_request"]["url"]["path"] == "/api/terminals/{id}"
    assert auth[0]["status_detail"] == "the key presented is not valid here"  # in the frame, not a header
    assert tid not in json.dumps(ws + px + auth)  # the route's pattern, never the path


def test_no_secret_reaches_the_file(adaemon):
    # After the session: search the raw bytes, every field of every line at once.
    raw, events = read_events(adaemon.audit_path)
    assert len(events) > 10
    for secret in (adaemon.api_key, admin_key_of(adaemon), UPSTREAM_KEY, COOKIE_VALUE, BODY_SECRET, BAD_KEY):
        assert secret.encode() not in raw, secret[:12]
    # The control: the same search finds what was sent in the clear (the users' ids).
    assert b"alice-" in raw and b"/files/write" in raw


def test_a_sigkill_during_a_burst_leaves_no_torn_line(adaemon):
    d = adaemon
    stop = threading.Event()
    sent = [0]

    def burst(n):
        with d.client(user=f"burst-{n}") as c:
            body = {"path": "x.txt", "content": "y" * 6000}  # lines past one page
            while not stop.is_set():
                try:
                    c.post("/files/write", json=body)
                    sent[0] += 1
                except httpx.HTTPError:
                    return

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(3)
    d.stop(sig=signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(15)
    assert sent[0] > 10
    raw, events = read_events(d.audit_path)  # every line whole: each parses, the file ends in \n
    assert any(e.get("api", {}).get("operation") == "/files/write" and
               e["actor"]["user"].get("uid", "").startswith("burst-") for e in events)


def test_level_none_writes_nothing(make_daemon):
    d = make_daemon(tag="audit-none", config_text='[audit]\nlevel = "NONE"\n').start()
    with d.client(user="nobody-" + uuid.uuid4().hex[:6]) as c:
        assert sh(c, "true")[0] == 0
    with d.client(user="x", key=BAD_KEY) as bad:
        assert bad.get("/files/list").status_code == 401
    assert not os.path.exists(os.path.join(d.state_dir, "audit"))
    assert metric(d, "agentbox_audit_writing") == 0


def test_a_full_disk_stops_the_trail_not_the_api(make_daemon, tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mnt)], check=True)
    try:
        # Nearly full from the start: a few events fit, then the disk refuses.
        subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/ballast", "bs=1k", "count=56"], check=True,
                       capture_output=True)
        path = mnt / "audit.jsonl"
        d = make_daemon(tag="audit-full", config_text=f'[audit]\nlevel = "METADATA"\npath = "{path}"\n').start()
        assert metric(d, "agentbox_audit_writing") == 1
        user = "full-" + uuid.uuid4().hex[:6]
        with d.client(user=user) as c:
            for i in range(60):  # far more than 8 KiB of events: every one answered all the same
                r = c.get("/files/list", params={"directory": "."})
                assert r.status_code == 200, (i, r.text)
            deadline = time.monotonic() + 10
            while metric(d, "agentbox_audit_writing") != 0:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert c.get("/files/list", params={"directory": "."}).status_code == 200
            assert sh(c, "echo still")[1] == "still\n"
        assert metric(d, 'agentbox_audit_dropped_total{reason="write_error"}') > 0
        assert metric(d, 'agentbox_audit_events_total{class="api_activity"}') > 0
        raw, events = read_events(path)  # what was written before the disk filled is whole
        assert events and all(e["class_uid"] in (6003, 3001, 1007) for e in events)
        d.stop()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
