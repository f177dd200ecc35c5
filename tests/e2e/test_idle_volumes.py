"""Idle users cost no kernel objects (issue 37): an account volume nothing uses (no request in
flight, no box: no process, no terminal) is detached after [accounts] volume_idle seconds (its
mount gone, its loop device released) and attached again by whatever needs it; at most
[accounts] attached volumes stay attached, the least recently used idle ones going first; and an
account that never wrote anything has no image (tests/e2e/test_lazy_volumes.py).
"""
import os
import subprocess
import time
import uuid

import pytest

from conftest import run, running_daemon
from volume_checks import image_names, loops_of, metric, mounted_volumes, volumes_dir, wait_until

IDLE = 1
# The detacher looks every second; an unmount waits for nothing: a few seconds past the window.
SETTLE = IDLE + 6
CONFIG = f"""
[accounts]
disk = "64M"
inodes = 4000
spare_volumes = 0
volume_idle = {IDLE}
"""
CAPPED = """
[accounts]
disk = "64M"
inodes = 4000
spare_volumes = 0
volume_idle = 3600
attached = 2
"""


@pytest.fixture(scope="module")
def idle():
    with running_daemon("idle-volumes", config_text=CONFIG) as d:
        yield d


def new_account(daemon, client):
    """Makes the client's account and its volume (a file written) and returns its name."""
    before = image_names(daemon)
    r = client.post("/files/write", json={"path": "note.txt", "content": "kept while idle"})
    assert r.status_code == 200, r.text
    made = image_names(daemon) - before
    assert len(made) == 1, made
    return made.pop()


def test_an_idle_volume_is_detached_and_attached_again_on_the_next_read(idle):
    with idle.client(user=f"idle-{uuid.uuid4().hex[:8]}") as c:
        name = new_account(idle, c)
        assert name in mounted_volumes(idle)
        assert len(loops_of(idle, name)) == 1
        detaches = metric(idle, "agentbox_volume_detaches_total")

        assert wait_until(lambda: name not in mounted_volumes(idle), SETTLE), "still mounted past the idle window"
        # The kernel frees an autoclear loop device just after the unmount, not with it.
        assert wait_until(lambda: loops_of(idle, name) == [], 5), "loop device not released"
        assert metric(idle, "agentbox_volume_detaches_total") >= detaches + 1
        # Nothing reaches the state filesystem under it meanwhile: the mount point is gone too.
        assert not os.path.exists(os.path.join(volumes_dir(idle), name))

        r = c.get("/files/read", params={"path": "note.txt"})
        assert r.status_code == 200, r.text
        assert r.json()["content"] == "kept while idle"
        assert name in mounted_volumes(idle) and len(loops_of(idle, name)) == 1
        # And it goes again once left alone.
        assert wait_until(lambda: name not in mounted_volumes(idle), SETTLE)


def test_a_running_process_keeps_its_volume_attached(idle):
    with idle.client(user=f"busy-{uuid.uuid4().hex[:8]}") as busy, \
            idle.client(user=f"calm-{uuid.uuid4().hex[:8]}") as calm:
        busy_name = new_account(idle, busy)
        calm_name = new_account(idle, calm)
        p = run(busy, "setsid -f sleep 60", pty=False)
        assert p["status"] == "done" and p["exit_code"] == 0, p
        # The control, written at the same time, goes; the account with a process in its box stays.
        assert wait_until(lambda: calm_name not in mounted_volumes(idle), SETTLE)
        # Released although a box (whose mount namespace was made from the host's) is running.
        assert wait_until(lambda: loops_of(idle, calm_name) == [], 3), loops_of(idle, calm_name)
        time.sleep(IDLE + 2)
        assert busy_name in mounted_volumes(idle)
        assert len(loops_of(idle, busy_name)) == 1
        r = busy.get("/files/read", params={"path": "note.txt"})
        assert r.status_code == 200 and r.json()["content"] == "kept while idle", r.text


def test_a_new_users_empty_home_is_listed_without_an_image_and_a_small_write_costs_little_disk(idle):
    with idle.client(user=f"empty-{uuid.uuid4().hex[:8]}") as c:
        before = image_names(idle)
        listing = c.get("/files/list", params={"directory": "."})
        assert listing.status_code == 200 and listing.json()["entries"] == [], listing.text
        # No image until something needs the disk (tests/e2e/test_lazy_volumes.py).
        assert image_names(idle) == before
        r = c.post("/files/write", json={"path": "five.txt", "content": "12345"})
        assert r.status_code == 200, r.text
        made = image_names(idle) - before
        assert len(made) == 1, made
        name = made.pop()
        # Left alone: detached; what it holds on the host is then what it costs for good.
        assert wait_until(lambda: name not in mounted_volumes(idle), SETTLE)
        paths = [p for p in (os.path.join(volumes_dir(idle), name + suffix) for suffix in (".img", ""))
                 if os.path.exists(p)]
        out = subprocess.run(["du", "-skxc"] + paths, capture_output=True, text=True, check=True, timeout=30).stdout
        used = int(out.splitlines()[-1].split()[0])
        assert used <= 256, f"{used} KiB for an account holding 5 bytes: {out}"
        # Its quota is the configured one all the same (the image is as large as [accounts] disk).
        assert os.path.getsize(os.path.join(volumes_dir(idle), name + ".img")) == 64 << 20


def test_at_most_attached_volumes_stay_attached():
    with running_daemon("attached-cap", config_text=CAPPED) as d:
        users = [f"cap{i}-{uuid.uuid4().hex[:8]}" for i in range(3)]
        names = []
        for user in users:
            with d.client(user=user) as c:
                names.append(new_account(d, c))
            time.sleep(0.2)  # an order of last use the detacher can tell apart
        assert wait_until(lambda: len(mounted_volumes(d) & set(names)) <= 2, 6), mounted_volumes(d)
        # The least recently used went first, well before the hour of volume_idle.
        assert names[0] not in mounted_volumes(d) and {names[1], names[2]} <= mounted_volumes(d)
        assert metric(d, "agentbox_volumes_attached") <= 2
        # Used again, it comes back and the next least recently used makes room.
        with d.client(user=users[0]) as c:
            r = c.get("/files/read", params={"path": "note.txt"})
            assert r.status_code == 200 and r.json()["content"] == "kept while idle", r.text
        assert wait_until(lambda: mounted_volumes(d) & set(names) == {names[0], names[2]}, 6), mounted_volumes(d)
