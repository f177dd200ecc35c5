"""Accounts that were never used again (issue 37, [accounts] forget_after_days): the volume of
an account with an empty home and no activity for that many days is deleted (its image gone,
its disk free); the account and its uid stay, so when the user comes back their id maps to a
fresh, empty home, with the same uid, and no new account is counted. A home with anything in it
is never forgotten, whatever its age, nor is a user whose box is running. Each forget is an
Account Change event of the audit trail. `agentbox accounts list --stale` shows beforehand what
would go. Days pass on the test clock
(AGENTBOX_TEST_WORKSPACE_CLOCK, the daemon's clock of days).
"""
import json
import os
import subprocess
import time
import uuid

import pytest

from conftest import agentbox_bin, run, sh
from day_clock import daemon_with_clock, set_clock
from volume_checks import accounts, du_kib, image, metric, volumes_dir, wait_until

IDLE = 4  # seconds before an unused volume is detached: the stale listing is read before
DAY = 86400
CONFIG = f"""
[accounts]
disk = "64M"
inodes = 4000
spare_volumes = 0
volume_idle = {IDLE}
forget_after_days = 1

[audit]
level = "METADATA"
"""
TAG = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def d():
    with daemon_with_clock("forget", CONFIG) as daemon:
        yield daemon


def audit_events(d):
    """The events of the daemon's audit trail so far (STATE/audit/audit.jsonl)."""
    try:
        with open(os.path.join(d.state_dir, "audit", "audit.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def cli(d, *args):
    return subprocess.run([agentbox_bin(), "accounts", *args, "--listen", f"127.0.0.1:{d.port}", "--state",
                           d.state_dir], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def clear_volume(d, name):
    """Empties a mounted volume from the host (home entries, trash items, process logs), so only
    its running box protects it."""
    for sub in ("home", "trash", "daemon/logs"):
        top = os.path.join(volumes_dir(d), name, sub)
        for entry in os.listdir(top):
            subprocess.run(["rm", "-rf", "--one-file-system", os.path.join(top, entry)], check=True, timeout=30)


def test_empty_stale_homes_are_forgotten_and_come_back_fresh_while_others_stay(d):
    users = {k: f"{k}-{TAG}" for k in ("lister", "maker", "deleter", "keeper", "active")}
    clients = {k: d.client(user=u) for k, u in users.items()}
    try:
        c = clients
        r = c["lister"].get("/files/list", params={"directory": "."})
        assert r.status_code == 200 and r.json()["entries"] == [], r.text
        assert c["maker"].post("/files/mkdir", json={"path": "made"}).status_code == 200
        assert c["maker"].delete("/files/delete", params={"path": "made"}).status_code == 200
        assert c["maker"].delete("/files/trash").status_code == 200
        assert c["deleter"].post("/files/write", json={"path": "gone.txt", "content": "x" * 100000}).status_code == 200
        assert c["deleter"].delete("/files/delete", params={"path": "gone.txt"}).status_code == 200
        assert c["deleter"].delete("/files/trash").status_code == 200, "the trash emptied too: nothing left"
        assert c["keeper"].post("/files/write", json={"path": "kept.txt", "content": "one file"}).status_code == 200
        p = run(c["active"], "setsid -f sleep 600", pty=False)
        assert p["status"] == "done" and p["exit_code"] == 0, p
        before = accounts(d)
        names = {k: before[u]["name"] for k, u in users.items()}
        uids = {k: before[u]["uid"] for k, u in users.items()}
        clear_volume(d, names["active"])
        known = metric(d, "agentbox_accounts_known")
        forgotten = metric(d, "agentbox_accounts_forgotten_total")
        for k in users:  # but the lister's: an account that only read has no volume to forget
            assert os.path.exists(image(d, names[k])) == (k != "lister"), k

        # Nothing is stale yet: the listing is empty and nothing goes.
        r = cli(d, "list", "--stale")
        assert r.returncode == 0 and "no account idle for 1 days" in r.stdout, r.stdout + r.stderr

        # Two days on: all four are stale, listed with whether each is empty (what would go).
        volumes_before = du_kib(volumes_dir(d))
        set_clock(d, time.time() + 2 * DAY)
        r = cli(d, "list", "--stale")
        assert r.returncode == 0, r.stderr
        rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[2:]}
        assert set(rows) >= set(names.values()), r.stdout
        for k in ("lister", "maker", "deleter", "active"):
            assert "yes" in rows[names[k]], (k, r.stdout)
        assert "no" in rows[names["keeper"]], r.stdout

        gone = lambda: not os.path.exists(image(d, names["maker"])) and not os.path.exists(image(d, names["deleter"]))
        assert wait_until(gone, IDLE + 30), d.log_tail()
        assert metric(d, "agentbox_accounts_forgotten_total") == forgotten + 2
        # Each forget is in the audit trail, the daemon's own doing; nothing of the others'.
        forgets = lambda: {e["user"]["uid"]: e for e in audit_events(d)
                           if e["class_uid"] == 3001 and e["activity_name"] == "Forget"}
        assert wait_until(lambda: {users["maker"], users["deleter"]} <= set(forgets()), 10), forgets()
        assert not {users["lister"], users["keeper"], users["active"]} & set(forgets()), forgets()
        event = forgets()[users["maker"]]
        assert event["activity_id"] == 99 and event["actor"]["user"]["type"] == "System", event
        assert event["user"]["name"] == names["maker"], event
        assert du_kib(volumes_dir(d)) < volumes_before, "their disk is free"
        assert not os.path.exists(os.path.join(volumes_dir(d), names["maker"]))

        # The control, equally old, keeps its file; the active user's box keeps theirs however empty.
        time.sleep(3)  # a few more passes
        assert os.path.exists(image(d, names["keeper"])) and os.path.exists(image(d, names["active"]))
        r = c["keeper"].get("/files/read", params={"path": "kept.txt"})
        assert r.status_code == 200 and r.json()["content"] == "one file", r.text
        code, out, _ = sh(c["active"], "pgrep -x sleep")
        assert code == 0 and out.strip(), "the active user's process still runs"

        # They come back (today): an empty home, a write works, the same uid, no new account.
        set_clock(d, None)
        for k in ("lister", "maker", "deleter"):
            r = c[k].get("/files/list", params={"directory": "."})
            assert r.status_code == 200 and r.json()["entries"] == [], r.text
            r = c[k].post("/files/write", json={"path": "back.txt", "content": "again"})
            assert r.status_code == 200, r.text
            code, out, _ = sh(c[k], "id -u && cat back.txt")
            assert code == 0 and out.split() == [str(uids[k]), "again"], out
        assert os.path.exists(image(d, names["lister"]))
        assert metric(d, "agentbox_accounts_known") == known
        after = accounts(d)
        assert len(after) == len(before) and {k: after[u]["uid"] for k, u in users.items()} == uids
        assert metric(d, "agentbox_accounts_forgotten_total") == forgotten + 2
    finally:
        for client in clients.values():
            client.close()


def test_stale_listing_takes_days_and_refuses_bad_ones_in_one_line(d):
    with d.client(user=f"days-{TAG}") as c:
        assert c.get("/files/list", params={"directory": "."}).status_code == 200
    set_clock(d, time.time() + 10 * DAY)
    try:
        r = cli(d, "list", "--stale", "--days", "30")
        assert r.returncode == 0 and "no account idle for 30 days" in r.stdout, r.stdout + r.stderr
        r = cli(d, "list", "--stale", "--days", "5", "--json")
        assert r.returncode == 0, r.stderr
        assert f"days-{TAG}" in r.stdout and '"stale_days": 5' in r.stdout
    finally:
        set_clock(d, None)
    for bad in ("0", "-3", "x", "1.5", "36501"):
        r = cli(d, "list", "--stale", "--days", bad)
        assert r.returncode != 0 and r.stdout == "", (bad, r.stdout)
        assert len(r.stderr.strip().splitlines()) == 1 and "--days" in r.stderr, (bad, r.stderr)
    r = cli(d, "list", "--days", "3")
    assert r.returncode != 0 and "--stale" in r.stderr
