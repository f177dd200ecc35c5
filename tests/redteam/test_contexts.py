"""A user's chats are isolated from each other (issue 35's isolation = "context"): under such a
profile, each `X-Terminal-Context-Id` (chat:a, chat:b) gets a box of its own whose home is a
workspace kept in the user's volume, VOLUME/workspaces/PROFILE/HASH. Chat B is the attacker,
knowing everything the host knows (the hash of A's workspace, its host path, A's pids): it must
not read A's files through the API (paths that climb out of its workspace, a symlink it plants
pointing into A's) nor from inside its box (climbing from its home, A's host path, /tmp, /proc),
see or signal A's processes, see A's workspace in its mount table, attach to A's terminal (HTTP
and WebSocket), reach A's server through /proxy or its loopback, or read A's egress log.

Each probe has its control: the same request or command made in chat A (or by root on the host)
reaches the thing, so a probe that could not have worked proves nothing and fails the test.
The daemon helpers are tests/e2e/conftest.py's (`e2e_conftest`, see conftest.py here).
"""
import asyncio
import glob
import json
import os
import time
import urllib.parse
import uuid

import httpx
import pytest
import websockets

from e2e_conftest import home_of, run, running_daemon, sh, shell_answers

CONFIG = """
[profiles.chats]
isolation = "context"
"""
TAG = uuid.uuid4().hex[:8]
USER = f"ctx-{TAG}"
A_SECRET = f"chat-a-secret-{TAG}"
B_SECRET = f"chat-b-secret-{TAG}"
HOME_SECRET = f"home-secret-{TAG}"
WS_TIMEOUT = 15


@pytest.fixture(scope="module")
def daemon():
    with running_daemon("contexts", config_text=CONFIG) as d:
        yield d


def owui(daemon, context, user=USER):
    """A client the way Open WebUI's orchestrator connection calls, in one chat."""
    headers = {"X-User-Id": user, "X-Session-Id": f"s-{user}", "X-Terminal-Context-Id": context,
               "Authorization": f"Bearer {daemon.api_key}"}
    return httpx.Client(base_url=f"{daemon.url}/p/chats", headers=headers, timeout=60)


@pytest.fixture(scope="module")
def chats(daemon):
    """Chat A and chat B of one user, each with a secret file in its workspace, the user's
    default home with one of its own, and where the host keeps each workspace."""
    with owui(daemon, "chat:a") as a, owui(daemon, "chat:b") as b, daemon.client(user=USER) as home:
        for c, secret in ((a, A_SECRET), (b, B_SECRET), (home, HOME_SECRET)):
            r = c.post("/files/write", json={"path": "secret.txt", "content": secret})
            assert r.status_code == 200, r.text
        a.workspace, b.workspace = workspace_of(daemon, "chat:a"), workspace_of(daemon, "chat:b")
        yield a, b, home


def workspace_of(daemon, context):
    """The host path of the user's workspace of `context` (its record names the context)."""
    for record in glob.glob(f"{daemon.state_dir}/volumes/*/workspaces/chats/*.json"):
        with open(record) as f:
            if json.load(f).get("context") == context:
                path = record.removesuffix(".json")
                with open(f"{path}/secret.txt") as s:
                    assert s.read() in (A_SECRET, B_SECRET)
                return path
    raise AssertionError(f"no workspace of {context} under {daemon.state_dir}/volumes")


def read_via_api(c, path):
    """What GET /files/read answered for path: (status, content or detail)."""
    r = c.get("/files/read", params={"path": path})
    return r.status_code, r.json().get("content", r.text) if r.status_code == 200 else r.text


# ---- files -------------------------------------------------------------------------------------

def test_the_files_api_of_one_chat_reads_nothing_of_another(chats):
    a, b, home = chats
    a_hash = os.path.basename(a.workspace)
    # The control: every path below names A's file from B's workspace on the host.
    climbs = [f"../{a_hash}/secret.txt", f"../../chats/{a_hash}/secret.txt",
              f"../../../workspaces/chats/{a_hash}/secret.txt", f"{a.workspace}/secret.txt"]
    for path in climbs[:3]:
        with open(os.path.join(b.workspace, path)) as f:
            assert f.read() == A_SECRET, path
    assert read_via_api(a, "secret.txt") == (200, A_SECRET)  # and A reads it by the API
    for path in climbs + ["../../../home/secret.txt", "/home/secret.txt"]:
        status, body = read_via_api(b, path)
        assert A_SECRET not in body and HOME_SECRET not in body, (path, status, body)
        assert status in (400, 403, 404), (path, status, body)
    r = b.get("/files/list", params={"directory": ".."})
    assert a_hash not in r.text, r.text
    assert "secret.txt" in b.get("/files/list").text  # the control: B lists its own
    # A search from above its home finds only B's own secret (the control: A's search finds A's).
    for path in ("..", "../..", "/"):
        r = b.get("/files/grep", params={"query": "chat-a-secret", "path": path, "regex": "false"})
        assert A_SECRET not in r.text, (path, r.text)
    assert A_SECRET in a.get("/files/grep", params={"query": "chat-a-secret", "regex": "false"}).text


def test_a_symlink_planted_in_one_chat_does_not_lead_the_api_into_another(chats):
    a, b, home = chats
    a_hash = os.path.basename(a.workspace)
    links = {"rel": f"../{a_hash}/secret.txt", "abs": f"{a.workspace}/secret.txt",
             "home": "../../../home/secret.txt", "own": "secret.txt"}
    script = "; ".join(f"ln -sfn '{target}' ~/link-{name}" for name, target in links.items())
    code, _, err = sh(b, script)
    assert code == 0, err
    # The control: on the host, each link leads where it was meant to, and the API follows a
    # link that stays in B's workspace.
    for name, target in links.items():
        with open(os.path.join(b.workspace, f"link-{name}")) as f:
            assert f.read() == {"own": B_SECRET, "home": HOME_SECRET}.get(name, A_SECRET), name
    assert read_via_api(b, "link-own") == (200, B_SECRET)
    b_home = home_of(b).lstrip("/")  # /files/serve/ takes the box's absolute path
    for name in ("rel", "abs", "home"):
        status, body = read_via_api(b, f"link-{name}")
        assert A_SECRET not in body and HOME_SECRET not in body, (name, status, body)
        assert status in (400, 403, 404), (name, status, body)
        for r in (b.get("/files/view", params={"path": f"link-{name}"}), b.get(f"/files/serve/{b_home}/link-{name}")):
            assert A_SECRET.encode() not in r.content and HOME_SECRET.encode() not in r.content, (name, r.url)
            assert r.status_code in (400, 403, 404), (r.url, r.status_code, r.text)
    for r in (b.get("/files/view", params={"path": "link-own"}), b.get(f"/files/serve/{b_home}/link-own")):
        assert r.status_code == 200 and B_SECRET.encode() in r.content, (r.url, r.status_code)  # the control


def test_a_chats_commands_find_nothing_of_another_chat_on_disk_or_in_tmp(chats):
    a, b, home = chats
    a_hash = os.path.basename(a.workspace)
    code, _, err = sh(a, f"echo {A_SECRET} > /tmp/a-tmp.txt && echo {A_SECRET} > /dev/shm/a-shm.txt")
    assert code == 0, err
    # The control: A finds its own file and its /tmp, and sees its workspace as its home.
    code, out, err = sh(a, "cat ~/secret.txt /tmp/a-tmp.txt /dev/shm/a-shm.txt")
    assert code == 0 and out.count(A_SECRET) == 3, out + err
    probe = ("cat ~/../*/secret.txt ~/../../workspaces/chats/{h}/secret.txt ~/../{h}/secret.txt "
             "{host}/secret.txt /tmp/a-tmp.txt /dev/shm/a-shm.txt; ls -A ~/.. /tmp /dev/shm; "
             "grep -rsl {secret} /home /tmp /dev/shm /var /run /mnt /opt /srv /root /workspaces; true"
             ).format(h=a_hash, host=a.workspace, secret=A_SECRET)
    _, out, err = sh(b, probe)
    assert A_SECRET not in out + err, out + err
    assert a_hash not in out, out  # listed nowhere (stderr repeats the paths the probe tried)
    assert B_SECRET in out, "B's own home is what ~/.. holds: the probe looked"
    # One secret.txt in B's whole tree: its own (A's and the home's are nowhere).
    _, out, _ = sh(b, "find / -name secret.txt -not -path '/proc/*' 2>/dev/null; true")
    assert len(out.split()) == 1 and out.startswith("/home/"), out


def test_the_default_context_is_the_users_home_holding_no_chats_workspace(daemon, chats):
    a, b, home = chats
    volume = os.path.dirname(os.path.dirname(os.path.dirname(a.workspace)))
    climb = f"../workspaces/chats/{os.path.basename(a.workspace)}/secret.txt"
    with open(os.path.join(volume, "home", climb)) as f:  # the control: the path names A's file
        assert f.read() == A_SECRET
    with owui(daemon, "default") as default:
        for c in (default, home):
            # The control: the user's home, its file there.
            assert read_via_api(c, "secret.txt") == (200, HOME_SECRET)
            _, out, _ = sh(c, "cat ~/secret.txt; ls -A ~ ~/..; find / -name secret.txt -not -path '/proc/*' "
                              "2>/dev/null; ls -A /workspaces 2>&1; true")
            assert HOME_SECRET in out and A_SECRET not in out and B_SECRET not in out, out
            assert os.path.basename(a.workspace) not in out and os.path.basename(b.workspace) not in out, out
            status, body = read_via_api(c, climb)
            assert status in (400, 403, 404) and A_SECRET not in body, (status, body)
    # And no chat sees the home's file (the chats' own files are theirs: the control above).
    for c in (a, b):
        _, out, _ = sh(c, "cat ~/secret.txt")
        assert HOME_SECRET not in out, out


# ---- processes ---------------------------------------------------------------------------------

def host_pid_of(marker):
    """The host pid of the box process running `sleep MARKER`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read() == f"sleep\0{marker}\0".encode():
                        return int(pid)
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError(f"sleep {marker} was not found on the host")


def box_pid_of(host_pid):
    """The pid the process has in its box's pid namespace (NSpid's last)."""
    with open(f"/proc/{host_pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    raise AssertionError("no NSpid")


@pytest.fixture
def a_sleeper(chats):
    """A `sleep MARKER` running in chat A: (its process id in the API, host pid, pid in A's box)."""
    a, _, _ = chats
    marker = f"{uuid.uuid4().int % 9000 + 1000}.{uuid.uuid4().int % 900 + 100}"
    p = run(a, f"exec sleep {marker}", wait=0, pty=False)
    try:
        host_pid = host_pid_of(marker)
        yield p["id"], marker, host_pid, box_pid_of(host_pid)
    finally:
        a.delete(f"/execute/{p['id']}")


def test_a_chat_neither_sees_nor_signals_anothers_processes(chats, a_sleeper):
    a, b, _ = chats
    pid_id, marker, host_pid, box_pid = a_sleeper
    assert box_pid != host_pid  # A's box has a pid namespace of its own
    # The marker is put together by the shell: the script's own command line does not hold it.
    whole, fraction = marker.split(".")
    script = (f"m={whole}.{fraction[0]}; m=$m{fraction[1:]}; ps -eo pid,args; "
              f"grep -a \"sleep.$m\" /proc/[0-9]*/cmdline; "
              f"for p in {host_pid} {box_pid}; do "
              f"  if kill -0 $p; then echo signalled=$p; tr '\\0' ' ' < /proc/$p/cmdline; echo; fi; done; "
              f"kill -CONT {host_pid}; echo cont=$?")
    # The control: in A, the same script finds it in ps and /proc and signals it by its pid there;
    # the host signals it by its host pid.
    _, out, err = sh(a, script)
    assert f"sleep {marker}" in out and f"signalled={box_pid}" in out, out + err
    os.kill(host_pid, 0)
    _, out, err = sh(b, script)
    assert marker not in out, out + err  # not listed, not in /proc, and no pid that B signals is it
    assert "cont=1" in out and "No such process" in err, out + err
    # And through the API: not in B's list, status and input 404, B's DELETE stops nothing.
    assert pid_id in [q["id"] for q in a.get("/execute").json()]
    assert pid_id not in [q["id"] for q in b.get("/execute").json()]
    assert b.get(f"/execute/{pid_id}/status").status_code == 404
    assert b.post(f"/execute/{pid_id}/input", json={"input": "x"}).status_code == 404
    assert b.delete(f"/execute/{pid_id}").status_code == 404
    os.kill(host_pid, 0)  # still running
    assert a.get(f"/execute/{pid_id}/status").json()["status"] == "running"


def test_a_chats_mount_table_names_no_other_workspace(chats):
    a, b, home = chats
    a_hash, b_hash = os.path.basename(a.workspace), os.path.basename(b.workspace)
    views = {}
    for name, c in (("a", a), ("b", b), ("home", home)):
        code, out, err = sh(c, "cat /proc/self/mountinfo")
        assert code == 0, err
        views[name] = out
    # The control: a box's mount table names its own workspace (the root of its home's mount).
    assert a_hash in views["a"] and b_hash in views["b"], (a_hash, views["a"])
    assert a_hash not in views["b"] and b_hash not in views["a"], views
    assert a_hash not in views["home"] and b_hash not in views["home"], views["home"]


# ---- terminals, /proxy, the egress log ---------------------------------------------------------

async def attach(daemon, tid, context):
    """Attaches to terminal tid as chat `context` over the WebSocket: "attached" once an echo
    comes back, else the close code."""
    url = (f"ws://127.0.0.1:{daemon.port}/p/chats/api/terminals/{urllib.parse.quote(tid)}"
           f"?user_id={urllib.parse.quote(USER)}")
    async with websockets.connect(url, open_timeout=WS_TIMEOUT, ping_interval=None,
                                  extra_headers={"X-Terminal-Context-Id": context}) as ws:
        await ws.send(json.dumps({"type": "auth", "token": daemon.api_key}))
        try:
            await shell_answers(ws, "term", WS_TIMEOUT)
            return "attached"
        except websockets.ConnectionClosed as e:
            return e.rcvd.code if e.rcvd else None


def test_a_chats_terminal_is_not_anothers(daemon, chats):
    a, b, _ = chats
    r = a.post("/api/terminals")
    assert r.status_code == 200, r.text
    tid = r.json()["id"]
    try:
        assert tid in [t["id"] for t in a.get("/api/terminals").json()]
        assert a.get(f"/api/terminals/{tid}").status_code == 200
        assert asyncio.run(attach(daemon, tid, "chat:a")) == "attached"  # the control
        assert tid not in [t["id"] for t in b.get("/api/terminals").json()]
        assert b.get(f"/api/terminals/{tid}").status_code == 404
        assert asyncio.run(attach(daemon, tid, "chat:b")) == 4004  # B's socket finds no such terminal
        assert b.delete(f"/api/terminals/{tid}").status_code == 404
        assert a.get(f"/api/terminals/{tid}").status_code == 200, "B's DELETE ended nothing"
    finally:
        a.delete(f"/api/terminals/{tid}")


def test_proxy_and_loopback_reach_a_server_of_its_own_chat_only(chats):
    a, b, _ = chats
    port = 8133
    code, _, err = sh(a, f"mkdir -p ~/served && echo {A_SECRET} > ~/served/index.html")
    assert code == 0, err
    pid = run(a, f"cd ~/served && exec python3 -m http.server {port} --bind 127.0.0.1", wait=0)["id"]
    try:
        deadline = time.monotonic() + 15
        while (r := a.get(f"/proxy/{port}/")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert r.status_code == 200 and A_SECRET in r.text, r.text  # the control: its own chat reaches it
        code, out, _ = sh(a, f"curl -s --noproxy '*' --max-time 3 http://127.0.0.1:{port}/")
        assert code == 0 and A_SECRET in out  # and its own loopback
        r = b.get(f"/proxy/{port}/")
        assert r.status_code != 200 and A_SECRET not in r.text, (r.status_code, r.text)
        code, out, _ = sh(b, f"curl -s --noproxy '*' --max-time 3 http://127.0.0.1:{port}/")
        assert code != 0 and A_SECRET not in out, out
    finally:
        a.delete(f"/execute/{pid}")


def test_a_chats_egress_log_is_its_own(chats):
    a, b, _ = chats
    host = f"from-a-{TAG}.test"
    _, out, _ = sh(a, f"curl -s --max-time 10 -w ' %{{http_code}}' http://{host}/")
    assert out.endswith(" 403"), out  # refused (no policy allows it), and logged
    logged = a.get("/network/log")
    assert logged.status_code == 200 and host in logged.text, logged.text  # the control
    theirs = b.get("/network/log")
    assert theirs.status_code == 200 and host not in theirs.text, theirs.text
