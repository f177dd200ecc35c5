"""Storage one user cannot exhaust (issue 16): every account's files live in a volume of its own
disk and inode quota (an ext4 image on a loop device), enforced by the kernel for the box and
for everything the daemon writes for it (uploads, spool, process logs); deletes go to a trash
that is charged to the account and gives way, oldest first, when the quota is reached.

A daemon with a 64M / 4000-inode quota per account; each test uses fresh users.
"""
import contextlib
import os
import socket
import signal
import subprocess
import time
import uuid

import pytest

from conftest import home_of, run, running_daemon, sh, wait_done, text_of

MB = 1 << 20
QUOTA = 64 * MB
CONFIG = """
[accounts]
disk = "64M"
inodes = 4000
[exec]
output_cap = "1M"
"""


@pytest.fixture(scope="module")
def small(request):
    # No trash upkeep pass during the tests: one that ran while a test fills a volume on purpose
    # would make room by purging the trash the test then looks at.
    with running_daemon("storage", config_text=CONFIG, env={"AGENTBOX_TEST_TRASH_UPKEEP_SECONDS": "3600"}) as d:
        yield d


@contextlib.contextmanager
def user_of(daemon, prefix="q"):
    """A client for a fresh user, with .home (as the box sees it) and .name (the account)."""
    with daemon.client(user=f"{prefix}-{uuid.uuid4().hex[:10]}") as c:
        c.home = home_of(c)
        c.name = c.home.rsplit("/", 1)[1]
        yield c


def volume_of(daemon, client):
    return os.path.join(daemon.state_dir, "volumes", client.name)


def used_bytes(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def test_a_full_account_gets_enospc_in_its_box_and_507_from_the_api_and_no_one_else_notices(small):
    with user_of(small, "full") as alice, user_of(small, "other") as bob:
        # One file larger than the whole quota: refused by RLIMIT_FSIZE before the disk is touched.
        code, out, err = sh(alice, "fallocate -l 200M big; echo rc=$?; stat -c %s big; rm -f big")
        assert "rc=0\n" not in out and out.split("\n")[1] == "0", (out, err)
        # Two that fit one by one but not together: the filesystem says no.
        code, out, err = sh(alice, "fallocate -l 40M a && fallocate -l 40M b; echo rc=$?; rm -f a b")
        assert "rc=1" in out and "No space left" in err, (out, err)
        code, out, err = sh(alice, "dd if=/dev/zero of=fill bs=1M count=200 2>&1; echo rc=$?")
        assert "No space left on device" in out and "rc=1" in out, out
        code, out, _ = sh(alice, "stat -c %s fill")
        assert int(out) <= QUOTA

        r = alice.post("/files/write", json={"path": "note.txt", "content": "x" * (2 * MB)})
        assert r.status_code == 507, r.text
        detail = r.json()["detail"]
        assert "Disk quota exceeded" in detail and "quota: 64M and 4000 files" in detail, detail
        assert small.state_dir not in detail
        r = alice.post("/files/upload", params={"directory": "."}, files={"file": ("up.bin", b"u" * (2 * MB))})
        assert r.status_code == 507, r.text
        assert "Disk quota" in r.json()["detail"]
        listing = alice.get("/files/list", params={"directory": "."}).json()
        names = {e["name"] for e in listing["entries"]}
        assert "note.txt" not in names and "up.bin" not in names, names  # no partial file

        # Another user writes, runs and is created while alice is full: nothing is shared.
        r = bob.post("/files/write", json={"path": "ok.txt", "content": "y" * MB})
        assert r.status_code == 200, r.text
        assert sh(bob, "cat ok.txt | wc -c")[1].strip() == str(MB)
        with small.client(user=f"late-{uuid.uuid4().hex[:8]}") as late:
            assert sh(late, "echo committed")[1] == "committed\n"

        # Freed space is usable again.
        assert alice.delete("/files/delete", params={"path": "fill"}).status_code == 200
        assert alice.delete("/files/trash").status_code == 200
        assert alice.post("/files/write", json={"path": "note.txt", "content": "x" * MB}).status_code == 200


def test_an_inode_bomb_stops_at_the_inode_quota(small):
    with user_of(small, "inodes") as c:
        code, out, _ = sh(c, 'mkdir b && cd b && i=0; while [ $i -lt 6000 ]; do : > f$i 2>/dev/null || break; '
                             'i=$((i+1)); done; echo made=$i')
        made = int(out.split("made=")[1])
        assert 3000 < made < 4100, out
        r = c.post("/files/mkdir", json={"path": "more"})
        assert r.status_code == 507, r.text
        # Every route that needs an inode answers 507 like the others, never 500 (issue 37): the
        # upload's spool file, a write over an existing file (its temporary file), an archive
        # being built.
        r = c.post("/files/upload", params={"directory": "."}, files={"file": ("up.bin", b"u" * 1000)})
        assert r.status_code == 507, r.text
        assert "Disk quota exceeded" in r.json()["detail"], r.text
        r = c.post("/files/write", json={"path": "b/f1", "content": "x"})
        assert r.status_code == 507, r.text
        r = c.post("/files/archive", json={"paths": ["b/f1"]})
        assert r.status_code == 507, r.text
        assert small.state_dir not in r.text
        r = c.post("/execute", params={"wait": 10}, json={"command": "echo hi", "pty": False})
        assert r.status_code in (200, 507), r.text  # its output log needs an inode too
        # Freed (from the host: the box may have no inode for a command's log), the same
        # requests succeed (the control).
        subprocess.run(["rm", "-rf", os.path.join(volume_of(small, c), "home", "b")], check=True, timeout=60)
        r = c.post("/files/upload", params={"directory": "."}, files={"file": ("up.bin", b"u" * 1000)})
        assert r.status_code == 200, r.text
        assert c.post("/files/write", json={"path": "w.txt", "content": "x"}).status_code == 200
        assert c.post("/files/archive", json={"paths": ["up.bin"]}).status_code == 200


def test_no_single_file_outgrows_the_quota_and_the_daemon_lacks_cap_sys_resource(small):
    with user_of(small, "fsize") as c:
        assert sh(c, "ulimit -f")[1].strip() == str(QUOTA // 1024)
    with open(f"/proc/{small.pid}/status") as f:
        caps = {k: int(v, 16) for k, v in (line.split(":\t") for line in f if line.startswith("Cap"))}
    CAP_SYS_ADMIN, CAP_SYS_RESOURCE = 21, 24
    assert caps["CapEff"] & (1 << CAP_SYS_ADMIN), caps  # control: it is root with capabilities
    assert not caps["CapEff"] & (1 << CAP_SYS_RESOURCE), caps
    assert not caps["CapPrm"] & (1 << CAP_SYS_RESOURCE), caps


def test_a_flood_of_output_is_capped_in_the_accounts_own_volume(small):
    with user_of(small, "flood") as c:
        p = run(c, "head -c 40000000 /dev/zero | tr '\\0' x; echo; echo end", pty=False, wait=30)
        if p["status"] == "running":
            p = wait_done(c, p["id"], timeout=60)
        assert p["status"] == "done", p
        logs = os.path.join(volume_of(small, c), "daemon", "logs")
        total = sum(os.path.getsize(os.path.join(logs, f)) for f in os.listdir(logs))
        assert 0 < total <= 1.5 * MB + 64 * 1024, total
        tail = c.get(f"/execute/{p['id']}/status", params={"tail": 1}).json()
        assert "end" in text_of(tail)


def test_a_whole_volume_belongs_to_one_account(small):
    with user_of(small, "vol") as c:
        volume = volume_of(small, c)
        assert os.stat(volume).st_dev != os.stat(os.path.dirname(volume)).st_dev  # its own filesystem
        st = os.statvfs(volume)
        assert st.f_blocks * st.f_frsize <= QUOTA
        assert sorted(os.listdir(volume)) == ["daemon", "home", "lost+found", "trash"]


# ---- trash ------------------------------------------------------------------------------------

def test_delete_goes_to_the_trash_and_restore_brings_it_back(small):
    with user_of(small, "del") as c:
        assert sh(c, "mkdir -p docs && printf 'v1\\n' > docs/a.txt && chmod 604 docs/a.txt")[0] == 0
        r = c.delete("/files/delete", params={"path": "docs/a.txt"})
        assert r.status_code == 200, r.text
        item = r.json()["trash"]
        assert r.json()["path"] == f"{c.home}/docs/a.txt" and item
        assert sh(c, "test -e docs/a.txt; echo $?")[1] == "1\n"
        # The box cannot see the trash: it is outside the home.
        assert "trash" not in sh(c, "ls -a ~ /home")[1]

        listing = c.get("/files/trash").json()
        assert [i["id"] for i in listing["items"]] == [item]
        i = listing["items"][0]
        assert i["path"] == f"{c.home}/docs/a.txt" and i["type"] == "file" and i["size"] == 3
        assert i["expires_at"] - i["deleted_at"] == 7 * 86400 and listing["retention_days"] == 7

        r = c.post("/files/trash/restore", json={"id": item})
        assert r.status_code == 200, r.text
        assert r.json() == {"path": f"{c.home}/docs/a.txt", "replaced": None}
        assert sh(c, "cat docs/a.txt; stat -c %a docs/a.txt")[1] == "v1\n604\n"
        assert c.get("/files/trash").json()["items"] == []

        # Over a name that exists again: the newer one goes to the trash, nothing is lost.
        item = c.delete("/files/delete", params={"path": "docs/a.txt"}).json()["trash"]
        assert sh(c, "printf 'v2\\n' > docs/a.txt")[0] == 0
        r = c.post("/files/trash/restore", json={"id": item})
        replaced = r.json()["replaced"]
        assert replaced and sh(c, "cat docs/a.txt")[1] == "v1\n"
        r = c.post("/files/trash/restore", json={"id": replaced, "path": "docs/a-v2.txt"})
        assert r.status_code == 200 and sh(c, "cat docs/a-v2.txt")[1] == "v2\n"

        # Directories go whole; unknown ids are 404; one item or all can be deleted for good.
        assert sh(c, "mkdir -p p/q && echo x > p/q/f")[0] == 0
        d = c.delete("/files/delete", params={"path": "p"}).json()
        assert d["type"] == "directory"
        assert c.post("/files/trash/restore", json={"id": "0000000000001-deadbeef"}).status_code == 404
        assert c.post("/files/trash/restore", json={"id": "../home"}).status_code == 404
        assert c.post("/files/trash/restore", json={}).status_code == 422
        assert c.delete("/files/trash", params={"id": d["trash"]}).json() == {"deleted": 1}
        assert c.delete("/files/trash", params={"id": d["trash"]}).status_code == 404
        c.delete("/files/delete", params={"path": "docs"})
        assert c.delete("/files/trash").json() == {"deleted": 1}
        assert c.get("/files/trash").json()["items"] == []


def test_the_trash_is_charged_to_the_account_and_gives_way_oldest_first(small):
    with user_of(small, "pressure") as c:
        assert sh(c, "head -c 20000000 /dev/urandom > old && head -c 20000000 /dev/urandom > new")[0] == 0
        old = c.delete("/files/delete", params={"path": "old"}).json()["trash"]
        new = c.delete("/files/delete", params={"path": "new"}).json()["trash"]
        # Still charged: the box cannot use what the trash holds.
        code, out, _ = sh(c, "dd if=/dev/zero of=fill bs=1M count=40 2>&1; echo rc=$?; rm -f fill")
        assert "rc=1" in out, out
        # A write that needs the room: the oldest item goes, the newer one stays.
        r = c.post("/files/write", json={"path": "big.txt", "content": "z" * (25 * MB)})
        assert r.status_code == 200, r.text
        ids = [i["id"] for i in c.get("/files/trash").json()["items"]]
        assert ids == [new], (ids, old, new)


def test_a_full_volume_can_always_be_freed_by_deleting(small):
    with user_of(small, "free") as c:
        sh(c, "dd if=/dev/zero of=fill bs=1M count=200 2>/dev/null; : > a; : > b")
        r = c.delete("/files/delete", params={"path": "fill"})
        assert r.status_code == 200, r.text
        # Trashed when there was room for the item's bookkeeping, else deleted outright.
        if r.json()["trash"] is not None:
            assert c.delete("/files/trash").status_code == 200
        assert c.post("/files/write", json={"path": "after.txt", "content": "x" * MB}).status_code == 200


# ---- crashes -----------------------------------------------------------------------------------

def test_sigkill_during_an_upload_leaves_no_partial_file_and_usage_comes_back(make_daemon):
    d = make_daemon(tag="storage-kill", config_text=CONFIG)
    d.start()
    with d.client(user="killed-upload") as c:
        c.home = home_of(c)
        c.name = c.home.rsplit("/", 1)[1]
    volume = os.path.join(d.state_dir, "volumes", c.name)
    before = used_bytes(volume)

    boundary = "b0undary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode()
    size = 40 * MB
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall((f"POST /files/upload?directory=. HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {d.api_key}\r\n"
               f"X-User-Id: killed-upload\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
               f"Content-Length: {len(head) + size + 100}\r\n\r\n").encode() + head)
    sent = 0
    chunk = b"k" * MB
    while sent < 20 * MB:  # half of it: the daemon is spooling it into the account's volume
        s.sendall(chunk)
        sent += len(chunk)
    deadline = time.monotonic() + 10
    while used_bytes(volume) < before + 10 * MB:
        assert time.monotonic() < deadline, "the upload never reached the account's volume"
        time.sleep(0.05)
    d.stop(sig=signal.SIGKILL)
    s.close()

    d.start()
    with d.client(user="killed-upload") as c:
        names = {e["name"] for e in c.get("/files/list", params={"directory": "."}).json()["entries"]}
        assert "big.bin" not in names, names
        assert sh(c, "ls | wc -l")[1].strip() == "0"
    assert used_bytes(volume) < before + MB, (before, used_bytes(volume))


def test_output_printed_while_the_volume_was_full_survives_a_sigkill_once_there_is_room(make_daemon):
    """A command that prints while its account's volume is full has its output in the daemon's
    memory only (its log file cannot grow); once there is room the log is written, so a daemon
    SIGKILLed afterwards still answers with it (the 60-minute soak found such output empty)."""
    d = make_daemon(tag="storage-full-log", config_text=CONFIG)
    d.start()
    with d.client(user="full-log") as c:
        name = home_of(c).rsplit("/", 1)[1]
        # Full to the last block: what a first ENOSPC leaves (ext4 gives back blocks it had held
        # for delayed allocation once they are written) taken too, one 1 KiB block at a time.
        avail = sh(c, "mkdir fill; dd if=/dev/zero of=fill/big bs=1M count=200 2>/dev/null; sync; i=0; "
                      "while dd if=/dev/zero of=fill/$i bs=1k count=1 2>/dev/null && [ $i -lt 4000 ]; do "
                      "i=$((i+1)); done; sync; df -k --output=avail . | tail -1")[1]
        assert avail.strip() == "0", avail
        done = run(c, "echo printed-while-full", pty=False)
        assert (done["status"], text_of(done)) == ("done", "printed-while-full\n")
        log = os.path.join(d.state_dir, "volumes", name, "daemon", "logs", done["id"] + ".log.0")

        def on_disk():
            try:
                with open(log, "rb") as f:
                    return b"printed-while-full" in f.read()
            except FileNotFoundError:
                return False
        assert not on_disk(), "the full volume took the output: the test shows nothing"
        assert c.delete("/files/delete", params={"path": "fill"}).status_code == 200
        assert c.delete("/files/trash").status_code == 200
        deadline = time.monotonic() + 15
        while not on_disk():
            assert time.monotonic() < deadline, "the output never reached the volume once it had room"
            time.sleep(0.1)
    d.stop(sig=signal.SIGKILL)

    d.start()
    with d.client(user="full-log") as c:
        q = c.get(f"/execute/{done['id']}/status").json()
        assert (q["status"], text_of(q)) == ("done", "printed-while-full\n"), q
