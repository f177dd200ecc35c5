"""The mirror of homes ([backup]) and the admin routes, against the real daemon: a change made
through the API reaches the mirror after one interval, a deleted file is kept under .deleted/,
`agentbox backup restore` puts a file back with its bytes and mode, admin routes take only the
admin key, and a SIGKILL in the middle of a pass leaves no partial file in the mirror."""
import json
import os
import secrets
import signal
import subprocess
import time

import httpx
import pytest

from conftest import agentbox_bin, sh

PASS_WAIT = 60  # seconds a pass may take on a loaded machine
TEMP_PREFIX = ".agentbox-mirror-"


def config(interval):
    return f'[backup]\ndir = "mirror"\ninterval = {interval}\nkeep_deleted_days = 7\n'


def admin_key(d):
    with open(os.path.join(d.state_dir, "admin_key")) as f:
        return f.read().strip()


def admin(d, key="admin"):
    key = admin_key(d) if key == "admin" else key
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=d.url, headers=headers, timeout=30)


def mirror_dir(d):
    return os.path.join(d.workdir, "mirror")


def wait_for_pass_after(d, t, key="admin"):
    """The status once a pass that started at or after unix time t has ended."""
    deadline = time.monotonic() + PASS_WAIT
    with admin(d, key) as a:
        while True:
            s = a.get("/admin/backup").json()
            last = s["last_pass"]
            if last and last["started"] >= t:
                return s
            assert time.monotonic() < deadline, f"no pass started after {t}: {s}"
            time.sleep(0.05)


def account_of(write_answer):
    """NAME from the /home/NAME/... a write answers with."""
    return write_answer.json()["path"].split("/")[2]


def cli(d, *args):
    return subprocess.run([agentbox_bin(), "backup", *args, "--listen", f"127.0.0.1:{d.port}", "--state", d.state_dir],
                          capture_output=True, text=True, timeout=120)


def temps_under(root):
    return [os.path.join(dp, n) for dp, dns, fns in os.walk(root) for n in dns + fns if n.startswith(TEMP_PREFIX)]


def big_temp_under(root):
    """A temporary copy of at least 1 MiB (the small files' temporaries live for microseconds)."""
    for t in temps_under(root):
        try:
            if os.path.getsize(t) >= 1 << 20:
                return True
        except FileNotFoundError:  # renamed into place meanwhile
            pass
    return False


@pytest.fixture
def mirrored(make_daemon):
    """A daemon that mirrors every second."""
    return make_daemon(tag="backup", config_text=config(1), api_key=secrets.token_hex(16)).start()


def test_change_appears_in_mirror_after_one_interval(mirrored):
    d = mirrored
    with d.client(user="mirror-change") as c:
        r = c.post("/files/write", json={"path": "notes/today.md", "content": "first draft\n"})
        assert r.status_code == 200, r.text
        name = account_of(r)
        written = time.time()
        s = wait_for_pass_after(d, written)
        copy = os.path.join(mirror_dir(d), name, "home", "notes", "today.md")
        with open(copy) as f:
            assert f.read() == "first draft\n"
        mine = [a for a in s["last_pass"]["accounts"] if a["name"] == name]
        assert mine and mine[0]["errors"] == 0, s

        # Overwritten: the new bytes in the copy, the old ones kept under .deleted/DAY/.
        assert c.post("/files/write", json={"path": "notes/today.md", "content": "second draft\n"}).status_code == 200
        wait_for_pass_after(d, time.time())
        with open(copy) as f:
            assert f.read() == "second draft\n"
        deleted = os.path.join(mirror_dir(d), name, ".deleted")
        (day,) = os.listdir(deleted)
        with open(os.path.join(deleted, day, "notes", "today.md")) as f:
            assert f.read() == "first draft\n"

    r = cli(d, "status", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["enabled"] is True
    r = cli(d, "status")
    assert r.returncode == 0 and "last pass:" in r.stdout and name in r.stdout, r.stdout + r.stderr


def test_deleted_file_is_kept_under_deleted(mirrored):
    d = mirrored
    with d.client(user="mirror-delete") as c:
        r = c.post("/files/write", json={"path": "doomed.txt", "content": "keep me somewhere"})
        name = account_of(r)
        wait_for_pass_after(d, time.time())
        home_copy = os.path.join(mirror_dir(d), name, "home", "doomed.txt")
        assert os.path.exists(home_copy)
        assert c.delete("/files/delete", params={"path": "doomed.txt"}).status_code == 200
        wait_for_pass_after(d, time.time())
    assert not os.path.exists(home_copy)
    deleted = os.path.join(mirror_dir(d), name, ".deleted")
    (day,) = os.listdir(deleted)
    with open(os.path.join(deleted, day, "doomed.txt")) as f:
        assert f.read() == "keep me somewhere"


def test_restore_brings_back_bytes_and_mode_through_the_cli(mirrored):
    d = mirrored
    with d.client(user="mirror-restore") as c:
        r = c.post("/files/write", json={"path": "bin/run.sh", "content": "#!/bin/sh\necho restored\n"})
        name = account_of(r)
        assert sh(c, "chmod 750 bin/run.sh")[0] == 0
        wait_for_pass_after(d, time.time())
        assert c.delete("/files/delete", params={"path": "bin/run.sh"}).status_code == 200
        wait_for_pass_after(d, time.time())
        (day,) = os.listdir(os.path.join(mirror_dir(d), name, ".deleted"))

        r = cli(d, "restore", name, "bin/run.sh", "--date", day)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "1 files" in r.stdout, r.stdout
        assert c.get("/files/read", params={"path": "bin/run.sh"}).json()["content"] == "#!/bin/sh\necho restored\n"
        code, out, _ = sh(c, "stat -c '%a %u' bin/run.sh && id -u && ./bin/run.sh")
        mode_owner, uid, said = out.splitlines()
        assert (code, mode_owner, said) == (0, f"750 {uid}", "restored"), out

        # An overwritten version over the file that replaced it: put back in place, atomically.
        assert c.post("/files/write", json={"path": "kept.txt", "content": "good"}).status_code == 200
        wait_for_pass_after(d, time.time())
        assert c.post("/files/write", json={"path": "kept.txt", "content": "broken"}).status_code == 200
        wait_for_pass_after(d, time.time())
        r = cli(d, "restore", name, "kept.txt", "--date", day)
        assert r.returncode == 0, r.stdout + r.stderr
        assert c.get("/files/read", params={"path": "kept.txt"}).json()["content"] == "good"

    r = cli(d, "restore", "nobody-at-all", "x")
    assert r.returncode == 1 and r.stderr.strip() == "agentbox backup: Unknown user: nobody-at-all", r.stderr
    r = cli(d, "restore", name, "never/was/here.txt")
    assert r.returncode == 1 and "Not in the mirror: /home/" in r.stderr, r.stderr


def test_cli_says_when_the_daemon_is_not_running_or_the_key_is_wrong(mirrored, tmp_path):
    d = mirrored
    r = subprocess.run([agentbox_bin(), "backup", "status", "--listen", "127.0.0.1:1", "--state", d.state_dir],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "agentbox is not running at http://127.0.0.1:1" in r.stderr, r.stderr
    wrong = tmp_path / "config.toml"
    wrong.write_text(f'admin_key = "{secrets.token_hex(16)}"\n')
    r = subprocess.run([agentbox_bin(), "backup", "status", "--config", str(wrong), "--listen", f"127.0.0.1:{d.port}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "refused the admin key" in r.stderr, r.stderr


def test_admin_routes_take_only_the_admin_key(mirrored):
    d = mirrored
    with admin(d, key=d.api_key) as a:
        r = a.get("/admin/backup")
        assert r.status_code == 403 and "admin key" in r.json()["detail"], r.text
        assert a.post("/admin/backup/restore", json={"user": "x"}).status_code == 403
    with admin(d, key=None) as a:
        assert a.get("/admin/backup").status_code == 401
    with admin(d, key=secrets.token_hex(16)) as a:
        assert a.get("/admin/backup").status_code == 401
    with admin(d) as a:  # control: the admin key opens it
        r = a.get("/admin/backup")
        assert r.status_code == 200 and r.json()["enabled"] is True
        # ... and nothing else: the admin key is not an API key.
        r = a.get("/files/list", params={"path": "."}, headers={"X-User-Id": "admin-probe"})
        assert r.status_code == 401, r.text


def test_sigkill_during_a_pass_leaves_no_partial_file(make_daemon):
    # Passes only when asked (and at start), so the test decides when the big copy runs.
    d = make_daemon(tag="backup-kill", config_text=config(3600), api_key=secrets.token_hex(16)).start()
    size = 400 << 20
    with d.client(user="mirror-kill") as c:
        name = account_of(c.post("/files/write", json={"path": "small.txt", "content": "small"}))
        assert sh(c, f"head -c {size} /dev/urandom > big.bin && sha256sum big.bin > big.sum")[0] == 0
        want = sh(c, "cut -d' ' -f1 big.sum")[1].strip()
    home_copy = os.path.join(mirror_dir(d), name, "home")
    with admin(d) as a:
        assert a.post("/admin/backup/run").status_code == 202
    deadline = time.monotonic() + PASS_WAIT
    while not big_temp_under(home_copy):  # the big file is being copied under a temporary name
        assert time.monotonic() < deadline, "never saw the copy in progress"
        time.sleep(0.001)
    d.stop(sig=signal.SIGKILL)
    assert not os.path.exists(os.path.join(home_copy, "big.bin"))  # not published half-copied
    assert temps_under(home_copy)  # control: the kill did land mid-copy

    restarted = time.time()
    d.start()
    s = wait_for_pass_after(d, restarted)  # the pass at start
    assert s["last_pass"]["errors"] == 0, s
    assert temps_under(mirror_dir(d)) == []
    assert os.path.getsize(os.path.join(home_copy, "big.bin")) == size
    got = subprocess.run(["sha256sum", os.path.join(home_copy, "big.bin")], capture_output=True, text=True,
                         check=True).stdout.split()[0]
    assert got == want
    with open(os.path.join(home_copy, "small.txt")) as f:
        assert f.read() == "small"
