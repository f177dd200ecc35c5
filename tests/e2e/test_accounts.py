"""Accounts administration (issue 16): GET /admin/accounts shows every account with its uid,
disk and inode usage (read from an idle account's image without mounting it), last activity and
box state; DELETE /admin/accounts/{user} stops the box for good, moves the volume away and frees
the user id for a new, empty account that never gets the old uid; `agentbox accounts list|delete`
do the same from the command line. Only the admin key opens these routes."""
import glob
import os
import secrets
import subprocess
import time

import httpx
import pytest

from conftest import agentbox_bin, home_of, run, sh

MB = 1 << 20
CONFIG = """
[accounts]
disk = "64M"
inodes = 4000
"""


def admin(d, key="admin"):
    if key == "admin":
        with open(os.path.join(d.state_dir, "admin_key")) as f:
            key = f.read().strip()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=d.url, headers=headers, timeout=90)


def accounts_of(d):
    with admin(d) as a:
        r = a.get("/admin/accounts")
        assert r.status_code == 200, r.text
        return {x["user"]: x for x in r.json()["accounts"]}


def uids_running():
    """Real uids of every process on the host."""
    uids = set()
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status) as f:
                for line in f:
                    if line.startswith("Uid:"):
                        uids.add(int(line.split()[1]))
                        break
        except OSError:
            pass
    return uids


def cli(d, *args, **kw):
    return subprocess.run([agentbox_bin(), "accounts", *args, "--listen", f"127.0.0.1:{d.port}", "--state",
                           d.state_dir], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, **kw)


@pytest.fixture
def quota_daemon(make_daemon):
    return make_daemon(tag="accounts", config_text=CONFIG, api_key=secrets.token_hex(16)).start()


def test_the_list_shows_uid_usage_activity_and_box_state_even_for_idle_volumes(quota_daemon):
    d = quota_daemon
    before = time.time()
    with d.client(user="list-alice") as c:
        assert sh(c, "head -c 5000000 /dev/urandom > five-mb && touch a b c")[0] == 0
    with d.client(user="list-bob") as c:
        home_of(c)
    accounts = accounts_of(d)
    alice, bob = accounts["list-alice"], accounts["list-bob"]
    assert alice["name"].startswith("list-alice-") and bob["uid"] != alice["uid"]
    assert alice["box"] == "running" and bob["box"] == "running"  # both ran a command just now
    assert alice["last_active"] >= int(before) - 1 and alice["created"] <= alice["last_active"]
    disk = alice["disk"]
    assert 5_000_000 <= disk["used"] < 6 * MB, disk
    assert 56 * MB <= disk["limit"] <= 64 * MB, disk  # less the metadata
    assert 3900 <= disk["inodes_limit"] <= 4000 and disk["inodes_used"] >= 14, disk
    assert bob["disk"]["used"] < disk["used"] - 4 * MB

    # After a restart no volume is mounted: usage comes from the images as they were left.
    d.stop()
    d.start()
    again = accounts_of(d)
    assert again["list-alice"]["box"] == "stopped"
    assert again["list-alice"]["disk"] == disk, "an idle volume's usage is read without mounting it"
    assert not os.path.ismount(os.path.join(d.state_dir, "volumes", alice["name"]))


def test_delete_stops_the_box_moves_the_files_away_and_the_id_starts_afresh(quota_daemon):
    d = quota_daemon
    with d.client(user="del-carol") as c:
        old_home = home_of(c)
        assert sh(c, "echo precious > keep.txt")[0] == 0
        run(c, "sleep 4242", wait=0)  # left running in the box
    carol = accounts_of(d)["del-carol"]
    assert carol["uid"] in uids_running(), "control: the box runs as the account's uid"
    with d.client(user="del-dave") as c:
        assert sh(c, "echo mine > mine.txt")[0] == 0

    with admin(d) as a:
        r = a.delete(f"/admin/accounts/{carol['name']}")
        assert r.status_code == 200, r.text
        gone = r.json()
        assert gone["user"] == "del-carol" and gone["name"] == carol["name"] and gone["uid"] == carol["uid"]
        assert gone["purge_after"] - gone["deleted"] == 7 * 86400  # trash_days
        r = a.delete(f"/admin/accounts/{carol['name']}")
        assert r.status_code == 404 and "Unknown user" in r.json()["detail"], r.text

    assert carol["uid"] not in uids_running(), "every process of the deleted account is gone"
    accounts = accounts_of(d)
    assert "del-carol" not in accounts and "del-dave" in accounts
    volumes = os.path.join(d.state_dir, "volumes")
    assert not os.path.exists(os.path.join(volumes, carol["name"]))
    kept = glob.glob(os.path.join(volumes, ".deleted", f"*-{carol['name']}", carol["name"] + ".img"))
    assert len(kept) == 1, os.listdir(volumes)

    # The same user id again: a new account, empty, with a uid never used before.
    with d.client(user="del-carol") as c:
        new_home = home_of(c)
        assert new_home != old_home
        code, out, _ = sh(c, "ls -A; id -u")
        assert out.split() == [str(accounts_of(d)["del-carol"]["uid"])], out
    fresh = accounts_of(d)["del-carol"]
    assert fresh["uid"] > max(carol["uid"], accounts["del-dave"]["uid"])
    with d.client(user="del-dave") as c:  # the other user noticed nothing
        assert sh(c, "cat mine.txt")[1] == "mine\n"


def test_admin_account_routes_refuse_the_api_key(quota_daemon):
    d = quota_daemon
    with d.client(user="guarded") as c:
        home_of(c)
    with admin(d, key=d.api_key) as a:
        r = a.get("/admin/accounts")
        assert r.status_code == 403 and "admin key" in r.json()["detail"], r.text
        assert a.delete("/admin/accounts/guarded").status_code == 403
    with admin(d, key=None) as a:
        assert a.delete("/admin/accounts/guarded").status_code == 401
    with admin(d, key=secrets.token_hex(16)) as a:
        assert a.get("/admin/accounts").status_code == 401
    assert "guarded" in accounts_of(d), "control: the account is still there, and the admin key lists it"


def test_the_cli_lists_and_deletes_only_when_told_to(quota_daemon):
    d = quota_daemon
    with d.client(user="cli-erin") as c:
        home_of(c)
    name = accounts_of(d)["cli-erin"]["name"]
    r = cli(d, "list")
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "UID", "BOX"]
    row = next(x for x in rows if x.startswith(name))
    assert " running " in row and "K of 5" in row and row.endswith(" cli-erin"), row  # ~57M usable of 64M

    r = cli(d, "delete", "cli-erin")  # no terminal to ask, no --yes
    assert r.returncode == 1 and "needs --yes" in r.stderr, r.stderr
    assert "cli-erin" in accounts_of(d)
    r = cli(d, "delete", "cli-erin", "--yes")
    assert r.returncode == 0 and f"deleted {name}" in r.stdout, r.stdout + r.stderr
    assert "cli-erin" not in accounts_of(d)
    r = cli(d, "delete", "nobody-at-all", "--yes")
    assert r.returncode == 1 and r.stderr.strip() == "agentbox accounts: Unknown user: nobody-at-all", r.stderr
