"""A full state disk (issue 37): the daemon's SQLite state and (with quotas off) its homes live on
one small tmpfs that the test fills. Every answer is then a documented one: 503 with a reason and
Retry-After where the state could not be written (a new account), 507 where a home could not
(quotas off: the home is on the state disk), never a 500; a known user still reads their files.
Nothing acknowledged before or during is lost: once space is freed and the daemon restarted,
every account answered 200 and every file written is there.
"""
import os
import subprocess
import uuid

import pytest

from conftest import Daemon, new_workdir, remove_workdir
from volume_checks import metric

CONFIG = '[accounts]\ndisk = "0"\nspare_volumes = 0\n'
DOCUMENTED = {200, 503, 507}


@pytest.fixture
def small_state():
    workdir = new_workdir("statefull")
    state = os.path.join(workdir, "state")
    os.mkdir(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0755", "tmpfs", state], check=True, timeout=30)
    d = Daemon(workdir, state_dir=state, config_text=CONFIG, api_key=uuid.uuid4().hex)
    try:
        yield d
    finally:
        d.stop()
        subprocess.run(["umount", "-l", state], check=False, timeout=30)
        remove_workdir(workdir)


def fill(path):
    """Fills the filesystem of path with one file (returned), to the last block."""
    filler = os.path.join(path, "filler")
    st = os.statvfs(path)
    subprocess.run(["fallocate", "-l", str(st.f_bavail * st.f_frsize), filler], check=False, timeout=30)
    with open(filler, "ab", buffering=0) as f:  # whatever fallocate could not take, a page at a time
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def test_a_full_state_disk_answers_503_or_507_with_a_reason_and_loses_nothing(small_state):
    d = small_state.start()
    with d.client(user="keeper") as c:
        assert c.post("/files/write", json={"path": "kept.txt", "content": "kept"}).status_code == 200
    filler = fill(d.state_dir)

    admitted, refused = [], []
    for i in range(60):
        user = f"full-{i}-{uuid.uuid4().hex[:6]}"
        with d.client(user=user) as c:
            r = c.get("/files/list", params={"directory": "."})
        assert r.status_code in DOCUMENTED, (r.status_code, r.text)
        if r.status_code == 200:
            admitted.append(user)
            continue
        detail = r.json()["detail"]
        if r.status_code == 503:
            assert "state disk is full" in detail and int(r.headers["Retry-After"]) > 0, (detail, r.headers)
        assert d.state_dir not in detail
        refused.append(user)
        if len(refused) >= 3:
            break
    assert refused, "a full state disk refuses new accounts"

    with d.client(user="keeper") as c:
        r = c.get("/files/read", params={"path": "kept.txt"})
        assert r.status_code == 200 and "kept" in r.text, r.text
        r = c.post("/files/write", json={"path": "more.txt", "content": "x" * 100000})
        assert r.status_code in (507, 503), r.text
    assert "Internal Server Error" not in d.log_tail(200000)

    os.unlink(filler)
    with d.client(user=refused[0]) as c:
        assert c.get("/files/list", params={"directory": "."}).status_code == 200, "space back: served"
    admitted.append(refused[0])
    assert d.stop() == 0
    d.start()
    with d.client(user="keeper") as c:
        assert c.get("/files/read", params={"path": "kept.txt"}).status_code == 200
    with open(os.path.join(d.state_dir, "admin_key")) as f:
        admin = f.read().strip()
    with d.client(key=admin) as c:
        r = c.get("/admin/accounts")
    assert r.status_code == 200, r.text
    known = {a["user"] for a in r.json()["accounts"]}
    assert set(admitted) | {"keeper"} <= known, set(admitted) - known


def test_metrics_show_the_state_filesystem_fill_and_empty_again(small_state):
    """What an operator's alert watches (docs/OPERATIONS.md): the volumes are sparse images on
    this filesystem, so its free space is the one figure that must not reach 0."""
    d = small_state.start()
    assert metric(d, "agentbox_state_filesystem_size_bytes") == 24 << 20  # the tmpfs' size=24m
    before = metric(d, "agentbox_state_filesystem_avail_bytes")
    st = os.statvfs(d.state_dir)
    assert 0 < before <= 24 << 20 and abs(before - st.f_bavail * st.f_frsize) < 1 << 20, before
    filler = fill(d.state_dir)
    assert metric(d, "agentbox_state_filesystem_avail_bytes") < 64 << 10
    os.unlink(filler)
    assert metric(d, "agentbox_state_filesystem_avail_bytes") > before - (1 << 20)
