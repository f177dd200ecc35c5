"""Profiles (`[profiles.NAME]`) and the `/p/{profile}/...` prefix of Open WebUI's orchestrator
connections: every Open Terminal route answers under it as without it, with the same
authentication; an unknown profile is 404 naming those the caller may use, a profile whose
`users` leaves the caller out 403; GET /usage reports the limits of the profile's box; SIGHUP
reloads the profiles. Requests carry Open WebUI's headers (X-User-Id, X-Session-Id,
X-Terminal-Context-Id).
"""
import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.parse
import uuid

import httpx
import pytest
import websockets

from conftest import Origin, agentbox_bin, new_workdir, remove_workdir, run, running_daemon, sh, shell_answers

CONFIG = """
[box]
memory = "1G"
[profiles.open]
[profiles.small]
memory = "256M"
cpu = "0.5"
pids = 200
tmp = "64M"
idle_timeout = 120
[profiles.team]
users = ["alice-{tag}"]
"""
TAG = uuid.uuid4().hex[:8]
ALICE, CAROL = f"alice-{TAG}", f"carol-{TAG}"
WS_TIMEOUT = 15


@pytest.fixture(scope="module")
def daemon():
    with running_daemon("profiles", config_text=CONFIG.format(tag=TAG)) as d:
        yield d


def owui(daemon, profile, user, context="chat:c1", key="default"):
    """A client the way Open WebUI's orchestrator connection calls: base URL {url}/p/{profile}."""
    headers = {"X-User-Id": user, "X-Session-Id": f"s-{user}", "X-Terminal-Context-Id": context}
    if key is not None:
        headers["Authorization"] = f"Bearer {daemon.api_key if key == 'default' else key}"
    return httpx.Client(base_url=f"{daemon.url}/p/{profile}", headers=headers, timeout=30)


def test_openapi_and_config_need_no_user_under_the_prefix_and_list_plain_paths(daemon):
    with httpx.Client(base_url=daemon.url, timeout=30) as anon:
        plain = anon.get("/openapi.json")
        prefixed = anon.get("/p/team/openapi.json")
        assert prefixed.status_code == 200, prefixed.text
        assert prefixed.json() == plain.json()
        assert "/execute" in prefixed.json()["paths"]
        assert not any(p.startswith("/p/") for p in prefixed.json()["paths"])
        assert anon.get("/p/small/api/config").status_code == 200
        # The same authentication as without the prefix: no key, no files.
        assert anon.get("/p/open/files/list", headers={"X-User-Id": ALICE}).status_code == 401
        assert anon.get("/files/list", headers={"X-User-Id": ALICE}).status_code == 401


def test_routes_answer_under_the_prefix(daemon):
    with owui(daemon, "open", ALICE) as c:
        code, out, _ = sh(c, "echo under-the-prefix; id -un")
        assert code == 0 and "under-the-prefix" in out
        r = c.post("/files/write", json={"path": "prefixed.txt", "content": "hello"})
        assert r.status_code == 200, r.text
        r = c.get("/files/read", params={"path": "prefixed.txt"})
        assert r.status_code == 200 and r.json()["content"] == "hello", r.text
        assert c.get("/files/cwd").status_code == 200


def test_terminal_websocket_under_the_prefix(daemon):
    with owui(daemon, "open", ALICE) as c:
        r = c.post("/api/terminals")
        assert r.status_code == 200, r.text
        tid = r.json()["id"]

    async def talk():
        url = (f"ws://127.0.0.1:{daemon.port}/p/open/api/terminals/{urllib.parse.quote(tid)}"
               f"?user_id={urllib.parse.quote(ALICE)}")
        async with websockets.connect(url, open_timeout=WS_TIMEOUT, ping_interval=None) as ws:
            await ws.send(json.dumps({"type": "auth", "token": daemon.api_key}))
            await shell_answers(ws, "ws", WS_TIMEOUT)

    asyncio.run(talk())


def test_a_users_key_in_the_auth_frame_is_held_to_the_profiles_users(daemon):
    # A browser opens the socket naming no user, and its auth frame names one with a user's key:
    # the profile's `users` is checked then. Carol may not use "team"; Alice may (the control).
    def admin_key():
        with open(os.path.join(daemon.state_dir, "admin_key")) as f:
            return f.read().strip()

    def user_key(user):
        r = httpx.post(f"{daemon.url}/admin/keys", json={"user": user},
                       headers={"Authorization": f"Bearer {admin_key()}"}, timeout=30)
        assert r.status_code == 201, r.text
        return r.json()["key"]

    with owui(daemon, "team", ALICE) as c:
        r = c.post("/api/terminals")
        assert r.status_code == 200, r.text
        tid = r.json()["id"]

    async def close_code(key):
        url = f"ws://127.0.0.1:{daemon.port}/p/team/api/terminals/{urllib.parse.quote(tid)}"
        async with websockets.connect(url, open_timeout=WS_TIMEOUT, ping_interval=None) as ws:
            await ws.send(json.dumps({"type": "auth", "token": key}))
            try:
                await shell_answers(ws, "ws", WS_TIMEOUT)
                return "attached"
            except websockets.ConnectionClosed as e:
                return (e.rcvd.code, e.rcvd.reason) if e.rcvd else None

    code, reason = asyncio.run(close_code(user_key(CAROL)))
    assert code == 4003 and "not open to user" in reason, (code, reason)
    assert asyncio.run(close_code(user_key(ALICE))) == "attached"


def test_proxy_under_the_prefix(daemon):
    port = 8131
    with owui(daemon, "open", ALICE) as c:
        pid = run(c, f"python3 -m http.server {port} --bind 127.0.0.1", wait=0)["id"]
        try:
            deadline = time.monotonic() + 15
            while True:
                r = c.get(f"/proxy/{port}/")
                if r.status_code == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert r.status_code == 200, r.text
            assert "Directory listing" in r.text
        finally:
            c.delete(f"/execute/{pid}")


def test_an_unknown_profile_is_404_naming_the_callers_profiles(daemon):
    with owui(daemon, "nope", ALICE) as alice, owui(daemon, "nope", CAROL) as carol:
        r = alice.get("/files/list")
        assert r.status_code == 404
        assert r.json()["detail"] == "Unknown profile 'nope': the profiles you may use are 'open', 'small', 'team'"
        r = carol.get("/files/list")
        assert r.status_code == 404
        assert r.json()["detail"] == "Unknown profile 'nope': the profiles you may use are 'open', 'small'"
    with httpx.Client(base_url=daemon.url, timeout=30) as anon:
        # Unauthenticated, it names only the profiles open to everyone, whoever it claims to be.
        r = anon.get("/p/nope/openapi.json", headers={"X-User-Id": ALICE})
        assert r.status_code == 404 and "'team'" not in r.json()["detail"], r.text


def test_a_profile_limited_to_a_group_refuses_another_user(daemon):
    with owui(daemon, "team", CAROL) as carol, owui(daemon, "team", ALICE) as alice:
        r = carol.get("/files/list")
        assert r.status_code == 403
        assert r.json()["detail"] == f"Profile 'team' is not open to user '{CAROL}'"
        assert carol.post("/execute", json={"command": "true"}).status_code == 403
        assert carol.post("/api/terminals").status_code == 403
        # The control: the member is served, and the other user is under another profile.
        assert alice.get("/files/list").status_code == 200
    with owui(daemon, "open", CAROL) as c:
        assert c.get("/files/list").status_code == 200
    # Naming no user is no way round it.
    with httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.api_key}"}, timeout=30) as c:
        assert c.get("/p/team/system").status_code == 403


def test_usage_reports_the_limits_of_the_callers_box(daemon):
    with owui(daemon, "small", ALICE) as c:
        box = c.get("/usage").json()["box"]
    assert box == {"profile": "small", "isolation": "user", "memory": 256 << 20, "cpu": 500, "pids": 200,
                   "tmp": 64 << 20, "idle_timeout": 120}
    with daemon.client(user=ALICE) as c:
        box = c.get("/usage").json()["box"]
    assert box["profile"] is None and box["memory"] == 1 << 30 and box["idle_timeout"] == 900
    with owui(daemon, "open", ALICE) as c:  # an empty profile is the default box under a name
        assert c.get("/usage").json()["box"] == dict(box, profile="open")


def test_sighup_reloads_the_profiles_and_a_bad_file_changes_nothing(make_daemon):
    d = make_daemon(tag="profiles-reload", config_text="[profiles.first]\n")
    d.start()
    user = f"reload-{TAG}"
    with owui(d, "first", user) as first, owui(d, "late", user) as late:
        assert first.get("/files/list").status_code == 200
        assert late.get("/files/list").status_code == 404
        with open(d.config_path, "w") as f:
            f.write("[profiles.first]\n[profiles.late]\nmemory = \"300M\"\n")
        os.kill(d.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while late.get("/files/list").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert late.get("/usage").json()["box"]["memory"] == 300 << 20

        with open(d.config_path, "w") as f:
            f.write("[profiles.late]\nmemroy = \"1G\"\n")
        os.kill(d.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "policy stays as it was" not in d.log_tail() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "policy stays as it was" in d.log_tail()
        assert first.get("/files/list").status_code == 200
        assert late.get("/usage").json()["box"]["memory"] == 300 << 20


def test_config_check_names_file_key_and_line_of_a_bad_profile():
    workdir = new_workdir("profiles-check")
    try:
        path = os.path.join(workdir, "bad.toml")
        with open(path, "w") as f:
            f.write('[profiles.ok]\nisolation = "context"\n\n[profiles.bad]\nisolation = "chat"\nmemroy = "1G"\n')
        r = subprocess.run([agentbox_bin(), "config", "check", path], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0
        assert f'{path}: profiles.bad.isolation: expected "user" or "context", not "chat" (line 5)' in r.stderr
        assert f'{path}: unknown key "profiles.bad.memroy" (line 6)' in r.stderr
        with open(path, "w") as f:
            f.write('[profiles.ok]\nisolation = "context"\nkeep_days = 3\nreset = "@daily"\nbinds = ["/usr/share"]\n')
        r = subprocess.run([agentbox_bin(), "config", "check", path], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    finally:
        remove_workdir(workdir)


# A profile's own box (isolation "user": one per user and profile): its limits, its binds and its
# egress rules are the profile's, the default profile's box the control each time.
BOX_USER = f"boxes-{TAG}"
BOXES_CONFIG = """
[box]
pids = 4096
[accounts]
disk = "64M"
[hosts]
"ref.test" = "127.0.0.1"
[policy.default]
allow_addresses = ["127.0.0.1/32"]
[policy.users."{user}"]
allow = ["ref.test"]
[profiles.locked]
pids = 321
memory = "300M"
binds = ["{bind}:/ref"]
deny = ["ref.test"]
[profiles.chats]
isolation = "context"
[profiles.lockedchats]
isolation = "context"
deny = ["ref.test"]
"""


@pytest.fixture(scope="module")
def boxes_daemon():
    bind = new_workdir("profiles-bind")
    try:
        os.chmod(bind, 0o755)
        with open(os.path.join(bind, "marker.txt"), "w") as f:
            f.write("from the profile's bind\n")
        os.chmod(os.path.join(bind, "marker.txt"), 0o644)
        with running_daemon("profiles-boxes", config_text=BOXES_CONFIG.format(user=BOX_USER, bind=bind)) as d:
            yield d
    finally:
        remove_workdir(bind)


def host_pid_of(marker):
    """The host pid of the box process running `sleep MARKER`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read() == f"sleep\0{marker}\0".encode():
                        return pid
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError(f"sleep {marker} was not found on the host")


def cgroup_value(pid, v1_controller, name):
    """A cgroup file of the process's own cgroup, read on the host (v1 or v2)."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if v1_controller in controllers.split(","):
                directory = f"/sys/fs/cgroup/{v1_controller}{path}"
                break
            if controllers == "":
                directory = f"/sys/fs/cgroup{path}"
    with open(os.path.join(directory, name)) as f:
        return f.read().strip()


def box_limits(client):
    """pids.max and the memory limit of the box client's commands run in."""
    marker = f"{uuid.uuid4().int % 9000 + 1000}.{uuid.uuid4().int % 900 + 100}"
    p = run(client, f"exec sleep {marker}", wait=0, pty=False)
    try:
        pid = host_pid_of(marker)
        pids = cgroup_value(pid, "pids", "pids.max")
        memory = (cgroup_value(pid, "memory", "memory.limit_in_bytes")
                  if os.path.isdir("/sys/fs/cgroup/memory") else cgroup_value(pid, "memory", "memory.max"))
        return pids, memory
    finally:
        client.delete(f"/execute/{p['id']}")


def test_a_profiles_box_has_the_profiles_limits(boxes_daemon):
    with owui(boxes_daemon, "locked", BOX_USER) as locked, boxes_daemon.client(user=BOX_USER) as plain:
        assert box_limits(locked) == ("321", str(300 << 20))
        pids, memory = box_limits(plain)  # the control: the same user's default box
        assert pids == "4096" and memory != str(300 << 20)


def test_a_profiles_box_is_another_box_of_the_same_user(boxes_daemon):
    with owui(boxes_daemon, "locked", BOX_USER) as locked, boxes_daemon.client(user=BOX_USER) as plain:
        p = run(locked, "exec sleep 1234.5", wait=0, pty=False)
        try:
            assert p["id"] in [q["id"] for q in locked.get("/execute").json()]
            assert p["id"] not in [q["id"] for q in plain.get("/execute").json()]
            assert plain.get(f"/execute/{p['id']}/status").status_code == 404
            _, out, _ = sh(plain, "ps -eo args")
            assert "sleep 1234.5" not in out
            _, out, _ = sh(locked, "ps -eo args; id -un; echo $HOME")
            assert "sleep 1234.5" in out
            # The same user, the same home: a file written in one is there in the other.
            assert f"/home/{out.split()[-2]}" == out.split()[-1]
        finally:
            locked.delete(f"/execute/{p['id']}")
        r = locked.post("/files/write", json={"path": "both.txt", "content": "one home"})
        assert r.status_code == 200, r.text
        assert plain.get("/files/read", params={"path": "both.txt"}).json()["content"] == "one home"


def test_a_profiles_read_only_bind_is_in_its_box_only(boxes_daemon):
    with owui(boxes_daemon, "locked", BOX_USER) as locked, boxes_daemon.client(user=BOX_USER) as plain:
        code, out, _ = sh(locked, "cat /ref/marker.txt")
        assert code == 0 and out == "from the profile's bind\n"
        code, _, err = sh(locked, "echo x > /ref/written.txt")
        assert code != 0, "the bind is read-only"
        code, _, _ = sh(plain, "test -e /ref/marker.txt")
        assert code != 0, "the default profile's box has no such bind"


def test_a_profiles_deny_beats_the_users_allow(boxes_daemon):
    o = Origin()
    try:
        url = f"http://ref.test:{o.port}"
        with owui(boxes_daemon, "locked", BOX_USER) as locked, boxes_daemon.client(user=BOX_USER) as plain:
            code, out, err = sh(plain, f"curl -sS --max-time 10 {url}/allowed")
            assert code == 0 and out.startswith("origin saw /allowed"), out + err  # the control
            code, out, _ = sh(locked, f"curl -s --max-time 10 -w ' %{{http_code}}' {url}/denied")
            assert out.endswith(" 403") and 'denied by this sandbox\'s network policy (rule "ref.test")' in out, out
        assert "/denied" not in o.paths
    finally:
        o.close()


def test_the_system_prompt_states_the_profiles_network(boxes_daemon):
    # What the model is told of its box under /p/locked: the profile's deny rule over the user's allow.
    with owui(boxes_daemon, "locked", BOX_USER) as locked, boxes_daemon.client(user=BOX_USER) as plain:
        under = locked.get("/system")
        assert under.status_code == 200, under.text
        assert 'never ref.test' in under.json()["prompt"], under.json()["prompt"]
        default = plain.get("/system").json()["prompt"]  # the control: the same user's default box
        assert "ref.test" in default and "never ref.test" not in default
    generic = httpx.get(f"{boxes_daemon.url}/p/locked/system",
                        headers={"Authorization": f"Bearer {boxes_daemon.api_key}"}, timeout=30)
    assert generic.status_code == 200, generic.text  # Open WebUI's key-only ask: a generic box of the profile
    assert "ref.test" not in generic.json()["prompt"]  # the user's allow rule is no one else's


# isolation "context": each chat of a user its own box and workspace. That two chats see nothing of
# each other (files, processes, terminals, /proxy, the egress log, mounts) is tests/redteam/test_contexts.py's.
def test_each_chats_egress_follows_the_profile_and_is_logged_per_chat(boxes_daemon):
    # BOX_USER may reach ref.test ([policy.users]); [profiles.lockedchats] denies it in every chat.
    o = Origin()
    try:
        url = f"http://ref.test:{o.port}"
        with owui(boxes_daemon, "lockedchats", BOX_USER, context="chat:x") as x, \
                owui(boxes_daemon, "lockedchats", BOX_USER, context="chat:y") as y, \
                boxes_daemon.client(user=BOX_USER) as plain:
            for c, path in ((x, "/from-x"), (y, "/from-y")):
                _, out, _ = sh(c, f"curl -s --max-time 10 -w ' %{{http_code}}' {url}{path}")
                assert out.endswith(" 403") and 'rule "ref.test"' in out, out
            code, out, err = sh(plain, f"curl -sS --max-time 10 {url}/from-default")
            assert code == 0 and out.startswith("origin saw /from-default"), out + err  # the control
            logged = {name: [e for e in c.get("/network/log").json()["entries"] if e["host"] == "ref.test"]
                      for name, c in (("x", x), ("y", y))}
            assert len(logged["x"]) == 1 and not logged["x"][0]["allowed"], logged
            assert len(logged["y"]) == 1 and not logged["y"][0]["allowed"], logged  # each chat its own log
        assert "/from-x" not in o.paths and "/from-y" not in o.paths and "/from-default" in o.paths
    finally:
        o.close()


def test_the_users_quota_covers_every_workspace(boxes_daemon):
    user = f"chats-quota-{TAG}"
    with owui(boxes_daemon, "chats", user, context="chat:a") as a, \
            owui(boxes_daemon, "chats", user, context="automation:b") as b:
        code, _, err = sh(a, "head -c 40M /dev/zero > ~/big && sync")
        assert code == 0, err
        code, _, _ = sh(b, "head -c 40M /dev/zero > ~/big && sync")
        assert code != 0, "64M for the user, whichever workspace holds it"
        sh(a, "rm ~/big && sync")
        code, _, err = sh(b, "rm -f ~/big; head -c 40M /dev/zero > ~/big && sync")
        assert code == 0, err  # the control: with A's file gone, B has the room


def test_a_malformed_context_id_is_400_naming_the_header(boxes_daemon):
    user = f"chats-bad-{TAG}"
    for bad in ("chat:", "session:1", "chat:" + "x" * 260, "chat:a\tb"):
        with owui(boxes_daemon, "chats", user, context=bad) as c:
            r = c.get("/files/list")
            assert r.status_code == 400, (bad, r.text)
            assert "X-Terminal-Context-Id" in r.json()["detail"]
    with owui(boxes_daemon, "chats", user, context="automation:nightly") as c:
        assert c.get("/files/list").status_code == 200
