"""Moving an account between cluster nodes (`agentbox accounts move`, docs/SCALING.md "Moves"):
the home (bytes, modes, times, symlinks as links), the trash, the process records and their
output go from n1 to n3, re-owned by n3's own uid for the account; n1 keeps a tombstone (421
naming n3); the pin is written and the router reloaded. A crash of either node or of the CLI at
any step leaves a move that running the same command again finishes, with the user refused
(503) in the meantime and never served by two nodes.

Loopback only, as tests/e2e/test_cluster.py (whose Router this reuses): three nodes sharing one
admin key, Debian's nginx in front. Quotas off except in the last test. The daemons' test hook
AGENTBOX_TEST_MOVE_PAUSE="POINT=SECONDS" holds a move at a step so a test can kill a process
there.
"""
import os
import signal
import subprocess
import time
import uuid

import httpx
import pytest

from conftest import agentbox_bin, run, sh, text_of
from test_cluster import CONFIG, NODES, Cluster, running_cluster

HOOK = "AGENTBOX_TEST_MOVE_PAUSE"

# Every kind of entry a home holds, with modes and times that must survive.
POPULATE = r"""
set -e
mkdir -p sub/deeper empty
printf 'hello\n' > a.txt
head -c 300000 /dev/urandom > sub/big.bin
printf '#!/bin/sh\necho hi\n' > run.sh
printf x > sub/deeper/x
chmod 0750 run.sh; chmod 0604 a.txt; chmod 0711 sub/deeper; chmod 0700 empty
ln -s /etc/shadow shadow-link
ln -s sub/big.bin rel-link
touch -d '2019-05-05 05:05:05' sub/deeper/x
touch -h -d '2020-01-02 03:04:05' a.txt shadow-link sub/deeper empty
echo doomed > doomed.txt
"""
# What must be identical after a move: every entry's path, type, mode, mtime, link target, size
# (a directory's depends on its filesystem's block size: not compared), and every file's sha256.
SNAPSHOT = r"""
cd ~ && find . -mindepth 1 -path ./.cache -prune -o -type d -printf '%P|%y|%m|%T@\n' \
  -o -printf '%P|%y|%m|%T@|%l|%s\n' | LC_ALL=C sort
find . -type f -not -path './.cache/*' -exec sha256sum {} + | LC_ALL=C sort -k2
"""
OWNERS = r"""cd ~ && printf '%s\n' "$(id -u)" && find . -printf '%U:%G\n' | sort -u"""


class MoveCluster(Cluster):
    """test_cluster.py's cluster, with what moves need: restarts with the test hook, the daemons'
    logs, the move command."""

    def restart(self, node, hook=None, sig=signal.SIGTERM):
        d = self.nodes[node]
        d.stop(sig)
        d.extra_env.pop(HOOK, None)
        if hook:
            d.extra_env[HOOK] = hook
        d.start()

    def wait_for_log(self, node, needle, timeout=30):
        d = self.nodes[node]
        deadline = time.monotonic() + timeout
        while needle not in d.log_tail(200000):
            assert time.monotonic() < deadline, f"{node} never logged {needle!r}:\n{d.log_tail()}"
            time.sleep(0.05)

    def move_command(self, user, to, *more):
        return [agentbox_bin(), "accounts", "move", user, "--to", to, "--cluster", self.file,
                "--router-dir", self.router.dir, *more]

    def move(self, user, to, *more):
        env = dict(os.environ, AGENTBOX_ADMIN_KEY=self.admin_key)
        return subprocess.run(self.move_command(user, to, *more), capture_output=True, text=True, timeout=180,
                              env=env, stdin=subprocess.DEVNULL)

    def move_in_background(self, user, to):
        env = dict(os.environ, AGENTBOX_ADMIN_KEY=self.admin_key)
        return subprocess.Popen(self.move_command(user, to), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, stdin=subprocess.DEVNULL)

    def users_owned_by(self, node, n):
        """Fresh user ids whose ring owner is node."""
        ids = [f"mv-{uuid.uuid4()}" for _ in range(40 * n)]  # a third each: none of 40 on node is ~1e-7
        out = subprocess.run([agentbox_bin(), "cluster", "owner", "--cluster", self.file, *ids], capture_output=True,
                             text=True, check=True, timeout=60).stdout.splitlines()
        mine = [u for u, line in zip(ids, out) if line.split()[0] == node]
        assert len(mine) >= n
        return mine[:n]


# A profile whose chats have workspaces of their own (issue 35): they live in the volume and move with it.
PROFILES = '[profiles.chats]\nisolation = "context"\n'


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("moves", MoveCluster, config=CONFIG + PROFILES) as c:
        yield c


def populate(c, user):
    """Files of every kind, one in the trash and a finished process; returns what must survive."""
    with c.client(user) as u:
        code, _, err = sh(u, POPULATE)
        assert code == 0, err
        r = u.delete("/files/delete", params={"path": "doomed.txt"})
        assert r.status_code == 200, r.text
        p = run(u, "echo the output of a process; echo on stderr >&2", pty=False)
        assert p["status"] == "done", p
        return {"snapshot": sh(u, SNAPSHOT)[1], "trash": u.get("/files/trash").json()["items"], "process": p,
                "owners": sh(u, OWNERS)[1]}


def assert_moved(c, user, before, to="n3", frm="n1"):
    """Served by `to` through the router with everything as it was, re-owned; `frm` holds a tombstone."""
    with c.client(user) as u:
        # nginx applies a reload when its new workers start (a moment); until then the old ones
        # send the user to the source, whose 421 names the target. An old worker closes its idle
        # keep-alive connections as it goes: a request sent on one just then gets no answer, or
        # cannot even be written.
        deadline = time.monotonic() + 10
        while True:
            try:
                r = u.get("/files/cwd")
            except httpx.TransportError:
                assert time.monotonic() < deadline
                continue
            if r.status_code != 421 or time.monotonic() > deadline:
                break
            assert f"moved to node {to}" in r.json()["detail"], r.text
            time.sleep(0.05)
        assert r.status_code == 200 and r.headers["x-agentbox-node"] == to, (r.status_code, r.text)
    # The rest on connections only the new workers hold.
    c.router.wait_old_workers_gone()
    with c.client(user) as u:
        assert sh(u, SNAPSHOT)[1] == before["snapshot"]
        code, out, _ = sh(u, "readlink shadow-link; test -L shadow-link && echo is-a-link")
        assert out == "/etc/shadow\nis-a-link\n"
        trash = u.get("/files/trash").json()["items"]
        assert [t["id"] for t in trash] == [t["id"] for t in before["trash"]], trash
        p = before["process"]
        r = u.get(f"/execute/{p['id']}/status")
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "done" and text_of(r.json()) == text_of(p)
        uid_line, *owners = sh(u, OWNERS)[1].split()
    on_target = c.accounts(to)
    assert user in on_target and on_target[user]["uid"] == int(uid_line)
    assert owners == [f"{uid_line}:{uid_line}"], owners  # every file is the new uid's
    old_uid = before["owners"].split()[0]
    assert uid_line != old_uid, "the target gave a uid of its own range"
    assert user not in c.accounts_on(frm)
    with c.client(user, node=frm) as direct:
        r = direct.get("/files/cwd")
        assert r.status_code == 421, r.text
        assert r.json()["detail"] == f"user {user} moved to node {to} (127.0.0.1:{c.ports[to]})"
    assert user not in c.accounts_on(frm), "the 421 created nothing"
    live = [n for n in NODES if user in c.accounts_on(n)]
    assert live == [to], live


def assert_refused_while_moving(c, user, node, to="n3"):
    with c.client(user, node=node) as direct:
        r = direct.get("/files/cwd")
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "5"
    assert r.json()["detail"] == f"user {user} is being moved to {to}; retry shortly"


def test_a_move_carries_home_trash_and_records_and_the_router_follows(cluster):
    c = cluster
    user = c.users_owned_by("n1", 1)[0]
    before = populate(c, user)
    with c.client(user) as u:
        assert u.get("/files/cwd").headers["x-agentbox-node"] == "n1"
        run(u, "sleep 4242", wait=0)  # a running process ends with the box
    r = c.move(user, "n3")
    assert r.returncode == 0, r.stderr
    assert f"moved {user} to node n3" in r.stdout and "router" in r.stdout, r.stdout
    assert_moved(c, user, before)
    owner = subprocess.run([agentbox_bin(), "cluster", "owner", "--cluster", c.file, user], capture_output=True,
                           text=True, check=True).stdout
    assert owner.split()[0] == "n3" and "pinned" in owner
    with c.client(user) as u:  # the running process was lost with the box, and says so
        procs = {p["command"]: p["status"] for p in u.get("/execute").json()}
        assert procs.get("sleep 4242") in ("lost", "killed"), procs
    # Again: nothing to do but make sure the router knows.
    again = c.move(user, "n3")
    assert again.returncode == 0 and "already (pinned)" in again.stdout, again.stdout + again.stderr
    assert_moved(c, user, before)


def test_a_user_moved_away_and_back_is_served_by_the_first_node_again(cluster):
    c = cluster
    user = c.users_owned_by("n1", 1)[0]
    before = populate(c, user)
    assert c.move(user, "n3").returncode == 0
    assert_moved(c, user, before)
    r = c.move(user, "n1")  # from n3 (the pin) back to n1, where a tombstone stands
    assert r.returncode == 0, r.stdout + r.stderr
    assert_moved(c, user, before, to="n1", frm="n3")
    with c.client(user) as u:
        assert sh(u, "echo back > back.txt")[0] == 0


def test_the_user_gets_503_on_both_nodes_while_the_move_runs(cluster):
    c = cluster
    user = c.users_owned_by("n1", 1)[0]
    before = populate(c, user)
    c.restart("n3", hook="committed=3")
    try:
        mover = c.move_in_background(user, "n3")
        c.wait_for_log("n3", "move paused at committed")
        assert_refused_while_moving(c, user, "n1")
        assert_refused_while_moving(c, user, "n3")  # committed there, not activated yet
        for n in ("n1", "n3"):  # nor can the operator delete it on either side meanwhile
            with c.admin(n) as a:
                r = a.delete(f"/admin/accounts/{user}")
                assert r.status_code == 503 and "being moved to n3" in r.json()["detail"], r.text
        with c.client(user) as u:  # the router still sends them to n1
            r = u.get("/files/cwd")
            assert r.status_code == 503 and r.headers["x-agentbox-node"] == "n1", r.text
        out, err = mover.communicate(timeout=60)
        assert mover.returncode == 0, err
    finally:
        c.restart("n3")
    assert_moved(c, user, before)


@pytest.mark.parametrize("victim,point", [("n1", "transfer"), ("n1", "sent"), ("n1", "done"), ("n3", "unpacked"),
                                          ("n3", "committed")])
def test_a_node_killed_mid_move_comes_back_refusing_and_the_move_runs_again_to_its_end(cluster, victim, point):
    c = cluster
    user = c.users_owned_by("n1", 1)[0]
    before = populate(c, user)
    c.restart(victim, hook=f"{point}=60")
    mover = c.move_in_background(user, "n3")
    c.wait_for_log(victim, f"move paused at {point}")
    c.nodes[victim].stop(signal.SIGKILL)
    out, err = mover.communicate(timeout=60)
    assert mover.returncode == 1 and err.startswith("agentbox accounts: "), (out, err)
    c.restart(victim)
    # Back up: the user is refused by the source, and by the target if it got as far as a commit;
    # nobody serves them and nothing was lost.
    assert_refused_while_moving(c, user, "n1")
    if point in ("sent", "done", "committed"):
        assert_refused_while_moving(c, user, "n3")
    r = c.move(user, "n3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert_moved(c, user, before)


def test_a_killed_cli_leaves_a_move_the_same_command_finishes(cluster):
    c = cluster
    user = c.users_owned_by("n1", 1)[0]
    before = populate(c, user)
    c.restart("n1", hook="sent=2")
    try:
        mover = c.move_in_background(user, "n3")
        c.wait_for_log("n1", "move paused at sent")
        mover.kill()
        mover.communicate(timeout=10)
        time.sleep(2.5)  # the source finishes its part without the CLI
        with c.client(user) as u:  # not pinned yet: the router sends the user to n1, which names n3
            r = u.get("/files/cwd")
            assert r.status_code == 421 and "moved to node n3" in r.json()["detail"], r.text
        r = c.move(user, "n3")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        c.restart("n1")
    assert_moved(c, user, before)


def test_bad_moves_get_one_line_and_change_nothing(cluster):
    c = cluster
    user, nobody = c.users_owned_by("n1", 2)
    with c.client(user) as u:
        assert sh(u, "echo stays > stays.txt")[0] == 0
    r = c.move(nobody, "n3")
    assert r.returncode == 1 and "Unknown user" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    r = c.move(user, "n9")
    assert r.returncode == 1 and r.stderr.strip() == "agentbox accounts: unknown node n9 (the cluster has n1, n2, n3)"
    r = c.move(user, "n1")
    assert r.returncode == 1 and "is on node n1 already" in r.stderr, r.stderr
    r = c.move(user, "n3", "--from", "n2")  # n2 does not hold them
    assert r.returncode == 1 and "Unknown user" in r.stderr, r.stderr
    with c.admin("n1") as a:
        for body, status, words in [({"user": user}, 422, "to:"), ({"to": "n3"}, 422, "user:"),
                                    ({"user": user, "to": "n9"}, 400, "Unknown node: n9"),
                                    ({"user": user, "to": "n1"}, 400, "already")]:
            r = a.post("/admin/moves", json=body)
            assert r.status_code == status and words in r.json()["detail"], r.text
        r = a.put(f"/admin/moves/{'0' * 32}", content=b"not a tar")
        assert r.status_code == 400 and "user=" in r.json()["detail"], r.text
        r = a.post("/admin/moves/nope/activate")
        assert r.status_code == 404, r.text
    with httpx.Client(base_url=f"http://127.0.0.1:{c.ports['n1']}", headers={"Authorization": f"Bearer {c.key}"}) as k:
        assert k.post("/admin/moves", json={"user": user, "to": "n3"}).status_code == 403  # the API key is no admin key
    with c.client(user) as u:
        r = u.get("/files/view", params={"path": "stays.txt"})
        assert r.status_code == 200 and r.text == "stays\n" and r.headers["x-agentbox-node"] == "n1"
    assert [n for n in NODES if user in c.accounts_on(n)] == ["n1"]


def test_a_move_between_quota_volumes_retires_the_source_volume():
    with running_cluster("moves-vol", MoveCluster, config='[accounts]\ndisk = "64M"\n') as c:
        user, = c.users_owned_by("n1", 1)
        with c.client(user) as u:  # 75 MB of holes: written out they would not fit the target's 64M
            assert sh(u, "truncate -s 25M holes1.bin holes2.bin holes3.bin")[0] == 0
        before = populate(c, user)
        name = c.accounts("n1")[user]["name"]
        r = c.move(user, "n3")
        assert r.returncode == 0, r.stderr
        assert_moved(c, user, before)
        target = c.accounts("n3")[user]
        assert target["disk"] and target["disk"]["limit"] > 0, target  # in a volume of its own there
        volumes = os.path.join(c.nodes["n1"].state_dir, "volumes")
        assert not os.path.exists(os.path.join(volumes, name))
        kept = [e for e in os.listdir(os.path.join(volumes, ".deleted")) if e.endswith("-" + name)]
        assert len(kept) == 1, os.listdir(volumes)  # kept trash_days, as a deleted account's


def test_a_home_too_big_for_the_target_is_refused_mid_stream_and_moves_once_the_target_grows():
    """The target unpacks while the archive arrives: when its volume fills up it answers 507
    before the sender has finished, the move stays resumable (the user refused on both nodes,
    nothing served twice), and once the operator gives the target room the same command ends it."""
    small, big = '[accounts]\ndisk = "64M"\n', '[accounts]\ndisk = "512M"\n'
    with running_cluster("moves-full", MoveCluster, configs={"n1": big, "n2": big, "n3": small}) as c:
        user, = c.users_owned_by("n1", 1)
        with c.client(user) as u:  # 160 MB that does not compress: cannot fit in 64M
            assert sh(u, "head -c 160000000 /dev/urandom > big.bin")[0] == 0
        before = populate(c, user)
        r = c.move(user, "n3")
        assert r.returncode != 0
        assert "do not fit their volume" in r.stderr and "n3" in r.stderr, r.stderr
        assert_refused_while_moving(c, user, "n1")
        assert user in c.accounts_on("n1")
        c.nodes["n3"].stop()
        with open(c.nodes["n3"].config_path, "w") as f:
            f.write(big)
        c.nodes["n3"].start()
        r = c.move(user, "n3")
        assert r.returncode == 0, r.stderr
        assert_moved(c, user, before)


def test_a_move_carries_the_workspaces_of_the_users_chats(cluster):
    c = cluster
    user = c.users_owned_by("n1", 1)[0]

    def chat(context):
        u = c.client(user, via=c.router.url + "/p/chats")
        u.headers["X-Terminal-Context-Id"] = context
        return u

    with chat("chat:mv-a") as a, chat("chat:mv-b") as b:
        assert a.post("/files/write", json={"path": "a.txt", "content": "chat a on n1"}).status_code == 200
        assert b.post("/files/write", json={"path": "b.txt", "content": "chat b on n1"}).status_code == 200
        assert a.get("/files/cwd").headers["x-agentbox-node"] == "n1"
        old_uid = sh(a, "id -u")[1]
        # Chat B's workspace goes to the trash before the move: the item moves too.
        r = b.delete("/workspaces/" + "chat%3Amv-b")
        assert r.status_code == 200, r.text
        trash_id = r.json()["trash_id"]
    r = c.move(user, "n3")
    assert r.returncode == 0, r.stdout + r.stderr
    c.router.wait_old_workers_gone()
    with chat("chat:mv-a") as a, chat("chat:mv-b") as b:
        deadline = time.monotonic() + 10
        while (r := a.get("/files/read", params={"path": "a.txt"})).status_code == 421:
            assert time.monotonic() < deadline, r.text
            time.sleep(0.1)
        assert r.status_code == 200 and r.headers["x-agentbox-node"] == "n3", r.text
        assert r.json()["content"] == "chat a on n1"
        code, out, _ = sh(a, "id -u; stat -c %u ~/a.txt; echo more >> ~/a.txt && cat ~/a.txt")
        uid, owner, *content = out.split("\n")
        assert code == 0 and uid == owner != old_uid.strip(), out  # n3's uid for the account, writable
        assert content[0] == "chat a on n1more", out
        # The trashed workspace restores on n3, where chat B finds it.
        assert b.get("/files/read", params={"path": "b.txt"}).status_code == 404
        r = b.post("/files/trash/restore", json={"id": trash_id})
        assert r.status_code == 200, r.text
        assert sh(b, "cat ~/b.txt")[1] == "chat b on n1"
    with c.admin("n3") as op:
        contexts = [w["context"] for w in op.get(f"/admin/accounts/{user}/workspaces").json()["workspaces"]]
        assert sorted(contexts) == ["chat:mv-a", "chat:mv-b"], contexts
