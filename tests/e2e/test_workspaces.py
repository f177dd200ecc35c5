"""The lifecycle of a context's workspace (issue 35), with Open WebUI's headers under /p/{profile}:
DELETE /p/{profile}/workspaces/{context} stops the context's box and moves its workspace to the
user's trash as one item, which POST /files/trash/restore puts back where the chat finds it;
`agentbox workspaces list|delete` does the same for the operator; `keep_days` and `reset` move
workspaces to the trash on their own (a test clock moves days ahead), but never one whose box
is running.
"""
import os
import subprocess
import time
import urllib.parse
import uuid

import httpx
import pytest

from conftest import agentbox_bin, run, sh
from day_clock import daemon_with_clock, set_clock

CONFIG = """
[profiles.chats]
isolation = "context"
[profiles.open]
[profiles.more]
isolation = "context"
[profiles.kept]
isolation = "context"
keep_days = 2
[profiles.daily]
isolation = "context"
reset = "@daily"
[profiles.brief]
isolation = "context"
idle_timeout = 1
"""
TAG = uuid.uuid4().hex[:8]
DAY = 86400


@pytest.fixture(scope="module")
def daemon():
    with daemon_with_clock("workspaces", CONFIG) as d:
        yield d


def owui(d, profile, user, context):
    headers = {"X-User-Id": user, "X-Session-Id": f"s-{user}", "X-Terminal-Context-Id": context,
               "Authorization": f"Bearer {d.api_key}"}
    return httpx.Client(base_url=f"{d.url}/p/{profile}", headers=headers, timeout=60)


def admin(d):
    with open(os.path.join(d.state_dir, "admin_key")) as f:
        key = f.read().strip()
    return httpx.Client(base_url=d.url, headers={"Authorization": f"Bearer {key}"}, timeout=90)


def cli(d, *args):
    return subprocess.run([agentbox_bin(), *args, "--listen", f"127.0.0.1:{d.port}", "--state", d.state_dir],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def path_of(context):
    return "/workspaces/" + urllib.parse.quote(context, safe="")


def trash_items(c):
    r = c.get("/files/trash")
    assert r.status_code == 200, r.text
    return r.json()["items"]


def wait_for_trash(c, context, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for item in trash_items(c):
            if (item.get("workspace") or {}).get("context") == context:
                return item
        time.sleep(0.3)
    raise AssertionError(f"no workspace of {context} reached the trash in {timeout} s: {trash_items(c)}")


def test_delete_moves_the_workspace_to_the_trash_and_restore_brings_it_back(daemon):
    user = f"del-{TAG}"
    gone, kept = "chat:gone-1", "chat:kept-1"
    with owui(daemon, "chats", user, gone) as a, owui(daemon, "chats", user, kept) as b, \
            daemon.client(user=user) as plain:
        assert a.post("/files/write", json={"path": "notes.txt", "content": "chat a's notes"}).status_code == 200
        assert b.post("/files/write", json={"path": "b.txt", "content": "chat b"}).status_code == 200
        p = run(a, "exec sleep 3456.7", wait=0, pty=False)
        _, out, _ = sh(a, "ps -eo args")
        assert "sleep 3456.7" in out

        r = a.delete(path_of(gone))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["context"] == gone and body["profile"] == "chats" and body["trash_id"], body

        # Its box stopped (its command ended) and the chat starts from an empty workspace.
        # (the end reaches the process table from the box loop a moment after the stop)
        deadline = time.monotonic() + 10
        while True:
            r = a.get(f"/execute/{p['id']}/status")
            if r.status_code == 404 or r.json()["status"] != "running" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.status_code == 404 or r.json()["status"] != "running", r.text
        _, out, _ = sh(a, "ps -eo args; ls -A ~")
        assert "sleep 3456.7" not in out and "notes.txt" not in out, out
        # The other chat keeps its workspace: only the context named went.
        assert b.get("/files/read", params={"path": "b.txt"}).json()["content"] == "chat b"

        # One item in the user's trash, seen from the plain API too, naming its context.
        items = [i for i in trash_items(plain) if i["id"] == body["trash_id"]]
        assert len(items) == 1 and items[0]["workspace"] == {"profile": "chats", "context": gone}, items
        assert items[0]["type"] == "directory" and items[0]["size"] >= len("chat a's notes")

        # Restored (from any profile: the item knows where it goes), the chat sees its files again.
        r = plain.post("/files/trash/restore", json={"id": body["trash_id"]})
        assert r.status_code == 200, r.text
        assert r.json()["replaced"], "the empty workspace made since went to the trash, not lost"
        _, out, _ = sh(a, "cat ~/notes.txt")
        assert out == "chat a's notes", out
        assert body["trash_id"] not in [i["id"] for i in trash_items(plain)]
        # And the plain home never held it.
        assert plain.get("/files/read", params={"path": "notes.txt"}).status_code == 404


def test_delete_answers_what_is_wrong(daemon):
    user = f"bad-{TAG}"
    with owui(daemon, "chats", user, "chat:x") as c, owui(daemon, "open", user, "chat:x") as open_, \
            daemon.client(user=user) as plain:
        r = c.delete(path_of("chat:never-used"))
        assert r.status_code == 404 and "chat:never-used" in r.json()["detail"], r.text
        r = c.delete(path_of("session:1"))
        assert r.status_code == 400 and "expected default, chat:<id> or automation:<id>" in r.json()["detail"]
        r = c.delete(path_of("default"))
        assert r.status_code == 409 and "user's home" in r.json()["detail"], r.text
        r = open_.delete(path_of("chat:x"))
        assert r.status_code == 404 and "isolation" in r.json()["detail"], r.text
        r = plain.delete(path_of("chat:x"))
        assert r.status_code == 404 and "/p/{profile}" in r.json()["detail"], r.text
        # The control: the header's own context, once used, is deleted by the same request shape.
        assert c.post("/files/write", json={"path": "x", "content": "x"}).status_code == 200
        assert c.delete(path_of("chat:x")).status_code == 200
        assert c.delete(path_of("chat:x")).status_code == 404, "the DELETE itself made no workspace"


def test_the_operator_lists_and_deletes_workspaces(daemon):
    user = f"op-{TAG}"
    with owui(daemon, "chats", user, "chat:op-a") as a, owui(daemon, "more", user, "chat:op-a") as a2, \
            owui(daemon, "chats", user, "automation:op-b") as b:
        assert a.post("/files/write", json={"path": "f", "content": "12345"}).status_code == 200
        assert a2.post("/files/write", json={"path": "g", "content": "1"}).status_code == 200
        assert b.post("/files/write", json={"path": "h", "content": "1"}).status_code == 200
        with admin(daemon) as op:
            r = op.get(f"/admin/accounts/{user}/workspaces")
            assert r.status_code == 200, r.text
            ws = {(w["profile"], w["context"]): w for w in r.json()["workspaces"]}
            assert set(ws) == {("chats", "chat:op-a"), ("more", "chat:op-a"), ("chats", "automation:op-b")}, ws
            assert ws[("chats", "chat:op-a")]["size"] == 5
            assert ws[("chats", "chat:op-a")]["last_used"] >= time.time() - 120
            accounts = {a["user"]: a for a in op.get("/admin/accounts").json()["accounts"]}
            assert accounts[user]["workspaces"] == 3

        r = cli(daemon, "workspaces", "list", user)
        assert r.returncode == 0, r.stderr
        assert "chat:op-a" in r.stdout and "automation:op-b" in r.stdout and "more" in r.stdout, r.stdout
        r = cli(daemon, "accounts", "list")
        assert r.returncode == 0 and "CONTEXTS" in r.stdout, r.stdout + r.stderr
        # Two profiles hold chat:op-a: the operator names one.
        r = cli(daemon, "workspaces", "delete", user, "chat:op-a")
        assert r.returncode == 1 and "--profile" in r.stderr, r.stdout + r.stderr
        r = cli(daemon, "workspaces", "delete", user, "chat:op-a", "--profile", "chats")
        assert r.returncode == 0 and "moved to the trash" in r.stdout, r.stdout + r.stderr
        assert a.get("/files/read", params={"path": "f"}).status_code == 404
        assert a2.get("/files/read", params={"path": "g"}).status_code == 200, "the other profile's is kept"
        r = cli(daemon, "workspaces", "delete", user, "chat:nope", "--profile", "chats")
        assert r.returncode == 1 and "No workspace" in r.stderr, r.stderr


def test_keep_days_trashes_unused_workspaces_but_not_one_whose_box_runs(daemon):
    user = f"keep-{TAG}"
    idle, busy = "chat:idle-1", "chat:busy-1"
    with owui(daemon, "kept", user, idle) as a, owui(daemon, "kept", user, busy) as b, \
            daemon.client(user=user) as plain:
        assert a.post("/files/write", json={"path": "keep.txt", "content": "old work"}).status_code == 200
        assert b.post("/files/write", json={"path": "busy.txt", "content": "running"}).status_code == 200
        p = run(b, "exec sleep 4567.8", wait=0, pty=False)
        try:
            set_clock(daemon, time.time() + 1 * DAY)  # a day on: within keep_days, nothing goes
            time.sleep(3)
            assert not [i for i in trash_items(plain) if i.get("workspace")], trash_items(plain)
            set_clock(daemon, time.time() + 3 * DAY)  # past keep_days = 2
            item = wait_for_trash(plain, idle)
            time.sleep(2)  # passes enough for the busy one, had it been taken
            assert b.get("/files/read", params={"path": "busy.txt"}).status_code == 200, "its box runs: kept"
            assert busy not in [(i.get("workspace") or {}).get("context") for i in trash_items(plain)]
        finally:
            set_clock(daemon, None)
            b.delete(f"/execute/{p['id']}")
        r = plain.post("/files/trash/restore", json={"id": item["id"]})
        assert r.status_code == 200, r.text
        _, out, _ = sh(a, "cat ~/keep.txt")
        assert out == "old work", out


def test_reset_daily_empties_workspaces_made_before_midnight(daemon):
    user = f"reset-{TAG}"
    chat = "chat:daily-1"
    with owui(daemon, "daily", user, chat) as a, daemon.client(user=user) as plain:
        assert a.post("/files/write", json={"path": "today.txt", "content": "today"}).status_code == 200
        try:
            set_clock(daemon, time.time() + DAY)  # tomorrow: after the next midnight
            item = wait_for_trash(plain, chat)
        finally:
            set_clock(daemon, None)
        # The chat starts clean...
        assert a.get("/files/read", params={"path": "today.txt"}).status_code == 404
        # ...and the trash gives yesterday's work back.
        assert plain.post("/files/trash/restore", json={"id": item["id"]}).status_code == 200
        _, out, _ = sh(a, "cat ~/today.txt")
        assert out == "today", out


def test_a_profiles_idle_timeout_stops_its_boxes_and_not_the_others(daemon):
    # [profiles.brief] idle_timeout = 1: its context's box stops within seconds; the same user's
    # box in a profile without one ([accounts]' 900 s) keeps running (the control).
    user = f"idle-{TAG}"
    with owui(daemon, "brief", user, "chat:short") as brief, owui(daemon, "chats", user, "chat:long") as chats:
        for c in (brief, chats):
            code, out, _ = sh(c, "echo started > mark; echo ok")
            assert code == 0 and out == "ok\n"
        states = {}
        deadline = time.monotonic() + 20
        with admin(daemon) as op:
            while time.monotonic() < deadline:
                r = op.get(f"/admin/accounts/{user}/workspaces")
                assert r.status_code == 200, r.text
                states = {w["profile"]: w["box"] for w in r.json()["workspaces"]}
                if states.get("brief") == "stopped":
                    break
                time.sleep(0.25)
        assert states.get("brief") == "stopped", states
        assert states.get("chats") == "running", states
        assert brief.get("/files/read", params={"path": "mark"}).json()["content"] == "started\n"  # the workspace stays
