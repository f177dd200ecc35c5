"""Many users: the daemon's resources stay bounded however many user ids it has seen.

Every X-User-Id gets an account and a home on first sight. The daemon keeps only a bounded
number of those homes open (`[accounts] open_homes`, LRU). Before that bound, 20,000 users
meant 20,000 open directory descriptors: at the fd limit every request that needed one failed
with 500, whoever sent it.
"""
import http.client
import os
import tempfile
import threading
import time
import uuid

import pytest

from conftest import remove_workdir, sh

USERS = 20_000
THREADS = 8
# Descriptors the daemon holds besides homes: listener, database, log, client connections
# (THREADS here), a box for the final checks. Generous: the point is "not one per user".
SLACK = 200
DEFAULT_OPEN_HOMES = 256


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def touch_users(daemon, ids):
    """GET /files/list once for each id, on THREADS keep-alive connections. Returns
    (number of non-200 answers, the first few of them, seconds taken)."""
    failures, lock = [], threading.Lock()
    host, port = "127.0.0.1", daemon.port

    def worker(part):
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            for user in part:
                try:
                    conn.request("GET", "/files/list", headers={
                        "Authorization": f"Bearer {daemon.api_key}", "X-User-Id": user})
                    r = conn.getresponse()
                    body = r.read()
                    status = r.status
                except (OSError, http.client.HTTPException) as e:
                    conn.close()  # reconnects on the next request
                    status, body = None, repr(e).encode()
                if status != 200:
                    with lock:
                        failures.append((user, status, body[:200]))
        finally:
            conn.close()

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(ids[i::THREADS],)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(failures), failures[:5], time.monotonic() - started


def assert_serves(daemon, user):
    """/health and a known user's /files/list and POST /execute still work."""
    with daemon.client(user=user) as c:
        r = c.get("/health")
        assert r.status_code == 200 and r.json() == {"status": "ok"}, r.text
        r = c.get("/files/list")
        assert r.status_code == 200, r.text
        assert sh(c, "echo still here") == (0, "still here\n", "")


@pytest.fixture
def tmpfs_dir():
    """A directory on tmpfs when there is one: removing 20,000 homes from a disk took 25-65 s
    on a 2-core VM, several times the test itself."""
    path = tempfile.mkdtemp(prefix="agentbox-e2e-many-",
                            dir="/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
    yield path
    remove_workdir(path)


# tmpfs_dir before make_daemon: fixtures end in reverse, so the daemon stops before its state goes.
def test_twenty_thousand_users_keep_open_descriptors_bounded(tmpfs_dir, make_daemon):
    # Descriptors, not disks: without quotas, so no volume is mounted per user (the bound on
    # mounted volumes is the storage suite's business).
    d = make_daemon(tag="many", state_dir=os.path.join(tmpfs_dir, "state"), lifetime=600,
                    config_text='[accounts]\ndisk = "0"\nnew_per_minute = 0\n').start()
    regular = f"regular-{uuid.uuid4().hex[:8]}"
    assert_serves(d, regular)
    before = open_fds(d.pid)

    run = uuid.uuid4().hex[:8]
    failed, first, took = touch_users(d, [f"many-{run}-{i}" for i in range(USERS)])
    after = open_fds(d.pid)
    print(f"\n{USERS} users in {took:.1f} s ({USERS / took:.0f}/s); "
          f"daemon fds {before} before, {after} after")
    assert after <= DEFAULT_OPEN_HOMES + SLACK, (
        f"{after} descriptors open after {USERS} users ({failed} requests failed): "
        "homes are not bounded")
    assert failed == 0, f"{failed} of {USERS} requests failed, first: {first}\n{d.log_tail()}"
    assert_serves(d, regular)
    assert_serves(d, f"many-{run}-0")  # its home was evicted long ago: opened again


def test_open_homes_sets_the_bound(make_daemon):
    """`[accounts] open_homes` sets the bound (well below the default here)."""
    d = make_daemon(tag="homes", config_text="[accounts]\nopen_homes = 16\ndisk = \"0\"\n", lifetime=300).start()
    before = open_fds(d.pid)
    failed, first, _ = touch_users(d, [f"homes-{i}" for i in range(600)])
    assert failed == 0, first
    after = open_fds(d.pid)
    assert after <= before + 16 + THREADS, f"{after} descriptors open, {before} at the start"
