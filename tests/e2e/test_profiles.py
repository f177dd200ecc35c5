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

from conftest import agentbox_bin, new_workdir, remove_workdir, run, running_daemon, sh

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
            await ws.send(b"echo ws-$((6*7))\n")
            seen = b""
            deadline = time.monotonic() + WS_TIMEOUT
            while b"ws-42" not in seen:
                seen += await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))

    asyncio.run(talk())


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
