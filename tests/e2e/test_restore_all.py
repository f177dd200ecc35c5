"""A lost disk (docs/SCALING.md): the mirror of homes ([backup] dir, on another volume) records
whose each home is, so a node whose whole state directory is gone is rebuilt by starting a fresh
daemon with the same configuration and running `agentbox backup restore --all`: every user gets
their account back (same user id, same name, a uid of the new daemon's range) with their files
byte-identical (modes, times, symlinks as links), re-owned; a second run restores nothing; a run
killed mid-way is finished by the next. On a cluster node, users that the cluster places on
another node are skipped, and the restored users reach their files through the router.

Loopback only. The cluster reuses tests/e2e/test_cluster.py's running_cluster and Router.
"""
import json
import os
import secrets
import signal
import subprocess
import time

import httpx
import pytest

from conftest import agentbox_bin, next_uid_base, remove_workdir, sh
from test_backup import admin, mirror_dir, wait_for_pass_after
from test_cluster import CONFIG as CLUSTER_CONFIG, node_of, running_cluster
from test_cluster_moves import HOOK, OWNERS, POPULATE, SNAPSHOT

# Passes only at start and when asked: the test decides what the mirror holds.
BACKUP = '[backup]\ndir = "mirror"\ninterval = 3600\nkeep_deleted_days = 7\n'
USERS = ["alice@example.org", "with space", "Ünïcødé-用户", "bob+restore@example.org"]


def client(d, user):
    return d.client(user=user.encode())  # UTF-8 ids go as bytes, as a front end sends them


def restore_all(d, key=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    if key:
        env["AGENTBOX_ADMIN_KEY"] = key
    return subprocess.run([agentbox_bin(), "backup", "restore", "--all", "--listen", f"127.0.0.1:{d.port}",
                           "--state", d.state_dir], capture_output=True, text=True, timeout=300, env=env)


def populate(c, user):
    """Every kind of entry plus a file of the user's own; returns what must come back."""
    code, _, err = sh(c, POPULATE + f"\nprintf '%s' '{user.replace(chr(39), '')} only' > mine.txt\n")
    assert code == 0, err
    r = c.get("/files/read", params={"path": "mine.txt"})
    assert r.status_code == 200, r.text
    return {"snapshot": sh(c, SNAPSHOT)[1], "name": r.json()["path"].split("/")[2], "owners": sh(c, OWNERS)[1]}


def assert_back(c, user, before):
    """The user's files as they were, every entry owned by the account's uid now."""
    assert sh(c, SNAPSHOT)[1] == before["snapshot"]
    r = c.get("/files/read", params={"path": "mine.txt"})
    assert r.status_code == 200 and r.json()["content"] == f"{user} only", r.text
    assert r.json()["path"] == f"/home/{before['name']}/mine.txt"  # the same account name
    code, out, _ = sh(c, "readlink shadow-link; test -L shadow-link && echo is-a-link; stat -c %a run.sh")
    assert (code, out) == (0, "/etc/shadow\nis-a-link\n750\n"), out
    uid, *owners = sh(c, OWNERS)[1].split()
    assert owners == [f"{uid}:{uid}"], owners
    assert uid != before["owners"].split()[0], "re-owned to a uid of the new daemon's range"


def lose_the_disk(d):
    """SIGKILL, then the whole state directory is gone; the next start gets a new uid range."""
    d.stop(sig=signal.SIGKILL)
    remove_workdir(d.state_dir)
    assert not os.path.exists(d.state_dir)
    d.extra_env["AGENTBOX_UID_BASE"] = str(next_uid_base())


def mirror_pass(d, key="admin"):
    t = time.time()
    with admin(d, key) as a:
        assert a.post("/admin/backup/run").status_code == 202
    s = wait_for_pass_after(d, t, key)
    assert s["last_pass"]["errors"] == 0, s


def test_a_lost_state_directory_is_rebuilt_from_the_mirror(make_daemon):
    d = make_daemon(tag="restore-all", config_text=BACKUP, api_key=secrets.token_hex(16)).start()
    before = {}
    for u in USERS:
        with client(d, u) as c:
            before[u] = populate(c, u)
    # The attack: the first user links to the second's home as the host names it, hoping that the
    # restore (root, on the host) copies through the link and hands over the other's bytes.
    victim = before[USERS[1]]["name"]
    bait = os.path.join(d.state_dir, "volumes", victim, "home", "mine.txt")
    with client(d, USERS[0]) as c:
        assert sh(c, f"ln -s {bait} bait-link")[0] == 0
        before[USERS[0]]["snapshot"] = sh(c, SNAPSHOT)[1]  # the link is part of what must come back
    mirror_pass(d)
    for u in USERS:  # the mirror says whose each home is
        with open(os.path.join(mirror_dir(d), before[u]["name"], "account.json")) as f:
            assert json.load(f)["user"] == u

    lose_the_disk(d)
    d.start()
    # The fresh daemon's pass at start (no accounts yet) puts away no copy: it deleted none of them.
    wait_for_pass_after(d, 0)
    for u in USERS:
        assert os.path.isdir(os.path.join(mirror_dir(d), before[u]["name"], "home"))
    r = restore_all(d)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for u in USERS:
        assert any(line.startswith(f"restored  {u} as {before[u]['name']} (uid ") for line in lines), r.stdout
    assert lines[-1] == f"total: {len(USERS)} restored, 0 skipped, 0 failed", r.stdout

    for u in USERS:
        with client(d, u) as c:
            assert_back(c, u, before[u])
    # Nobody sees another's files: each home is its owner's alone.
    with client(d, USERS[0]) as c:
        other = before[USERS[1]]["name"]
        code, _, _ = sh(c, f"cat /home/{other}/mine.txt")
        assert code != 0
        r = c.get("/files/read", params={"path": f"/home/{other}/mine.txt"})
        assert r.status_code in (400, 403, 404), r.text
        # The link came back as a link (the restore followed nothing): no bytes of the other's.
        code, out, _ = sh(c, "test -L bait-link && readlink bait-link; cat bait-link")
        assert code != 0 and out == bait + "\n", out

    # Idempotent: the second run restores nothing and says so.
    r = restore_all(d)
    assert r.returncode == 0, r.stdout + r.stderr
    for u in USERS:
        assert f"skipped   {u} ({before[u]['name']}): held by this node already" in r.stdout, r.stdout
    assert r.stdout.splitlines()[-1] == f"nothing to restore: 0 restored, {len(USERS)} skipped, 0 failed"

    # A user who never existed gets a new, empty home.
    with client(d, "never-seen@example.org") as c:
        code, out, _ = sh(c, "ls ~ | wc -l")
        assert (code, out.strip()) == (0, "0"), out
        assert c.get("/files/read", params={"path": "mine.txt"}).status_code == 404


def test_a_restore_killed_mid_way_is_finished_by_the_next_run(make_daemon):
    d = make_daemon(tag="restore-kill", config_text=WORKSPACES, api_key=secrets.token_hex(16)).start()
    u = "kill me@example.org"
    with client(d, u) as c:
        before = populate(c, u)
    with chat(d, u, "chat:a") as a:  # its workspace is staged with the home, and finished with it
        assert a.post("/files/write", json={"path": "notes.txt", "content": "chat a's"}).status_code == 200
    mirror_pass(d)
    lose_the_disk(d)
    d.extra_env[HOOK] = "restore-staged=60"
    d.start()
    run = subprocess.Popen([agentbox_bin(), "backup", "restore", "--all", "--listen", f"127.0.0.1:{d.port}",
                            "--state", d.state_dir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while "move paused at restore-staged" not in d.log_tail(100000):
            assert time.monotonic() < deadline, d.log_tail()
            time.sleep(0.05)
        # Mid-restore: the account exists with its copy staged; the user is refused, not shown half a home.
        with client(d, u) as c:
            r = c.get("/files/list", params={"path": "."})
            assert r.status_code == 503 and "being restored" in r.json()["detail"], r.text
            assert r.headers["retry-after"] == "5"
        with chat(d, u, "chat:a") as a:
            assert a.get("/files/read", params={"path": "notes.txt"}).status_code == 503
        d.stop(sig=signal.SIGKILL)
    finally:
        run.kill()
        run.wait()
    d.extra_env.pop(HOOK)
    d.start()
    # The pass at start leaves the account being restored alone: its home here is empty.
    wait_for_pass_after(d, 0)
    with client(d, u) as c:  # still refused after the restart: the marker outlived the daemon
        r = c.get("/files/list", params={"path": "."})
        assert r.status_code == 503 and "being restored" in r.json()["detail"], r.text
    r = restore_all(d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"restored  {u} as {before['name']}" in r.stdout and "an interrupted restore finished" in r.stdout, r.stdout
    with client(d, u) as c:
        assert_back(c, u, before)
    with chat(d, u, "chat:a") as a:
        r = a.get("/files/read", params={"path": "notes.txt"})
        assert r.status_code == 200 and r.json()["content"] == "chat a's", r.text
    assert "nothing to restore" in restore_all(d).stdout


def test_restore_all_bad_input_and_a_mirror_that_is_off(make_daemon, daemon):
    d = make_daemon(tag="restore-input", config_text=BACKUP, api_key=secrets.token_hex(16)).start()
    with admin(d) as a:
        for body, detail in (({"all": True, "user": "x"}, "Field 'all' restores whole accounts: it takes no 'user'"),
                             ({"all": True, "path": "a"}, "Field 'all' restores whole accounts: it takes no 'path'"),
                             ({"all": "yes"}, "Field 'all' must be true (or left out, with 'user')"),
                             ({"all": False}, None)):
            r = a.post("/admin/backup/restore", json=body)
            assert r.status_code == 422, r.text
            if detail:
                assert r.json()["detail"] == detail
        r = a.post("/admin/backup/restore", json={"all": True})  # an empty mirror: nothing to do
        assert r.status_code == 200 and r.json()["total"] == {"restored": 0, "skipped": 0, "errors": 0}, r.text
    with admin(d, key=d.api_key) as a:
        assert a.post("/admin/backup/restore", json={"all": True}).status_code == 403
    with admin(daemon) as a:  # no [backup] dir
        r = a.post("/admin/backup/restore", json={"all": True})
        assert r.status_code == 409 and "mirror of homes is off" in r.json()["detail"], r.text
    r = subprocess.run([agentbox_bin(), "backup", "restore", "--all", "someone", "--listen", f"127.0.0.1:{d.port}",
                        "--state", d.state_dir], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--all restores whole accounts" in r.stderr, r.stderr


# --- A cluster node's lost disk -------------------------------------------------------------

@pytest.fixture(scope="module")
def backed_up_cluster():
    with running_cluster("cluster-restore", config=CLUSTER_CONFIG + BACKUP) as c:
        yield c


def users_on(c, node, bases):
    """One id per base, made unique, whose ring owner is node."""
    out = []
    for base in bases:
        for i in range(200):
            u = f"{base}-{i}"
            if c.owners([u])[u] == node:
                out.append(u)
                break
    assert len(out) == len(bases)
    return out


def test_a_cluster_nodes_lost_disk_is_restored_and_its_users_reach_their_files_through_the_router(
        backed_up_cluster):
    c = backed_up_cluster
    n2 = c.nodes["n2"]
    users = users_on(c, "n2", ["ann@example.org", "with space", "Ünïcødé-用户"])
    (pinned_away,) = users_on(c, "n2", ["pinned-away"])
    before = {}
    for u in users + [pinned_away]:
        with c.client(u) as cl:
            before[u] = populate(cl, u)
            assert node_of(cl.get("/files/cwd")) == "n2"
    mirror_pass(n2, key=c.admin_key)

    lose_the_disk(n2)
    # Meanwhile the operator pins one of n2's users to n1 (e.g. to serve them at once, empty).
    with open(os.path.join(os.path.dirname(c.file), "pins.toml"), "w") as f:
        f.write(f'{json.dumps(pinned_away)} = "n1"\n')
    try:
        n2.start()
        r = restore_all(n2, key=c.admin_key)
        assert r.returncode == 0, r.stdout + r.stderr
        for u in users:
            assert f"restored  {u} as {before[u]['name']}" in r.stdout, r.stdout
        assert f"skipped   {pinned_away} ({before[pinned_away]['name']}): belongs to node n1 (pinned there)" \
            in r.stdout, r.stdout
        assert r.stdout.splitlines()[-1] == f"total: {len(users)} restored, 1 skipped, 0 failed"
        assert pinned_away not in c.accounts_on("n2")

        for u in users:  # through the router, as before the loss
            with c.client(u) as cl:
                assert node_of(cl.get("/files/cwd")) == "n2"
                assert_back(cl, u, before[u])
        assert "nothing to restore: 0 restored, 4 skipped" in restore_all(n2, key=c.admin_key).stdout
    finally:
        os.unlink(os.path.join(os.path.dirname(c.file), "pins.toml"))
        for d in c.nodes.values():
            if d.proc:
                os.kill(d.pid, signal.SIGHUP)


WORKSPACES = BACKUP + '[profiles.chats]\nisolation = "context"\n'


def chat(d, user, context):
    """Open WebUI's headers for a chat of the context profile `chats`."""
    headers = {"Authorization": f"Bearer {d.api_key}", "X-User-Id": user, "X-Terminal-Context-Id": context,
               "X-Session-Id": f"s-{context}"}
    return httpx.Client(base_url=f"{d.url}/p/chats", headers=headers, timeout=60)


def test_contexts_workspaces_are_mirrored_and_restored_with_the_home(make_daemon):
    d = make_daemon(tag="restore-ws", config_text=WORKSPACES, api_key=secrets.token_hex(16)).start()
    user = "ws-owner@example.org"
    with client(d, user) as c:  # the control: the default home
        assert c.post("/files/write", json={"path": "home.txt", "content": "the home's"}).status_code == 200
        name = c.get("/files/read", params={"path": "home.txt"}).json()["path"].split("/")[2]
    with chat(d, user, "chat:a") as a:
        for path, text in (("notes.txt", "chat a's notes"), ("gone.txt", "deleted later")):
            assert a.post("/files/write", json={"path": path, "content": text}).status_code == 200, path
        old_uid = sh(a, "id -u")[1].strip()
    mirror_pass(d)
    copies = os.path.join(mirror_dir(d), name, "workspaces", "chats")
    hashes = os.listdir(copies)
    [ws] = [h for h in hashes if os.path.isdir(os.path.join(copies, h))]
    assert ws + ".json" in hashes, hashes  # its record beside it
    with open(os.path.join(copies, ws, "notes.txt")) as f:
        assert f.read() == "chat a's notes"
    assert os.stat(os.path.join(copies, ws)).st_uid == int(old_uid)  # owners kept in the mirror
    # A file deleted in the workspace is kept under .deleted, apart from the home's.
    with chat(d, user, "chat:a") as a:
        assert sh(a, "rm gone.txt")[0] == 0
    mirror_pass(d)
    assert not os.path.exists(os.path.join(copies, ws, "gone.txt"))
    days = os.listdir(os.path.join(mirror_dir(d), name, ".deleted"))
    assert any(os.path.isfile(os.path.join(mirror_dir(d), name, ".deleted", day, ".account-workspaces", "chats", ws,
                                           "gone.txt")) for day in days), days

    lose_the_disk(d)
    d.start()
    wait_for_pass_after(d, 0)
    r = restore_all(d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"restored  {user} as {name} (uid " in r.stdout, r.stdout
    with client(d, user) as c:
        r = c.get("/files/read", params={"path": "home.txt"})
        assert r.status_code == 200 and r.json()["content"] == "the home's", r.text
    with chat(d, user, "chat:a") as a:
        r = a.get("/files/read", params={"path": "notes.txt"})
        assert r.status_code == 200 and r.json()["content"] == "chat a's notes", r.text
        assert a.get("/files/read", params={"path": "gone.txt"}).status_code == 404
        # Re-owned to the new uid: the chat's box writes where it did.
        code, out, err = sh(a, "id -u; stat -c %u notes.txt .; echo more >> notes.txt")
        assert code == 0, err
        uid, *owners = out.split()
        assert uid != old_uid and owners == [uid, uid], out
    with chat(d, user, "chat:b") as b:  # another chat still sees its own workspace only
        assert b.get("/files/read", params={"path": "notes.txt"}).status_code == 404
    vol = os.path.join(d.state_dir, "volumes", name, "workspaces")
    if os.path.isdir(vol):  # a plain directory volume: the parents and the record are the daemon's
        for p in (vol, os.path.join(vol, "chats"), os.path.join(vol, "chats", ws + ".json")):
            assert os.stat(p).st_uid == os.geteuid(), p
