"""What the volume tests (idle, lazy, forgotten volumes) read beside the daemon: its account
images, their mounts and loop devices, the disk they take, the accounts list, a metric, a wait."""
import os
import subprocess
import time


def volumes_dir(d):
    return os.path.realpath(os.path.join(d.state_dir, "volumes"))


def image_names(d):
    """The accounts whose image is in STATE/volumes (NAME.img)."""
    return {e[:-4] for e in os.listdir(volumes_dir(d)) if e.endswith(".img")}


def image(d, name):
    return os.path.join(volumes_dir(d), name + ".img")


def mounted_volumes(d):
    """Names of the account volumes mounted now (the mount points in /proc/self/mountinfo)."""
    prefix = volumes_dir(d) + "/"
    names = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            rest = point[len(prefix):] if point.startswith(prefix) else ""
            if rest and "/" not in rest and not rest.startswith("."):
                names.add(rest)
    return names


def loops_of(d, name):
    """The loop devices backed by the account's image (losetup -j)."""
    out = subprocess.run(["losetup", "-j", image(d, name)], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    return [line for line in out.splitlines() if line.strip()]


def du_kib(path):
    """The disk blocks under path on its own filesystem (du -x: an image's blocks, not the files
    of the volume mounted from it)."""
    out = subprocess.run(["du", "-skx", path], capture_output=True, text=True, check=True, timeout=60).stdout
    return int(out.split()[0])


def admin_key(d):
    with open(os.path.join(d.state_dir, "admin_key")) as f:
        return f.read().strip()


def accounts(d):
    """GET /admin/accounts, by user id."""
    with d.client(key=admin_key(d)) as a:
        r = a.get("/admin/accounts")
    assert r.status_code == 200, r.text
    return {x["user"]: x for x in r.json()["accounts"]}


def metric(d, name):
    """A label-less sample of the daemon's /metrics (with the admin key)."""
    with d.client(key=admin_key(d)) as c:
        r = c.get("/metrics")
    assert r.status_code == 200, r.text
    for line in r.text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not on /metrics")


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()
