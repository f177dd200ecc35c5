"""Idle users' cost (issue 37): N new users each list their empty home and N more each write one
small file, then everyone goes idle. Per user, once the idle window has passed: the disk under
STATE/volumes (du, so only blocks written count), the account volumes still mounted and their
loop devices, and the marginal MemAvailable drop. Against a baseline binary in the same run
(main before issue 37: every volume stays attached for the daemon's life).

    python3 bench/idle_volumes.py AGENTBOX [BASELINE] [USERS]
"""
import os
import subprocess
import sys
import time
import uuid

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Daemon, loadavg  # noqa: E402

CONFIG = """
[accounts]
spare_volumes = 0
volume_idle = 2
"""
BASELINE_CONFIG = """
[accounts]
spare_volumes = 0
"""  # a build before issue 37 knows no volume_idle


def mem_available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def du_kib(path):
    out = subprocess.run(["du", "-skx", path], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def volume_mounts(volumes):
    prefix = os.path.realpath(volumes) + "/"
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if line.split()[4].startswith(prefix) and "/" not in line.split()[4][len(prefix):])


def volume_loops(volumes):
    prefix = os.path.realpath(volumes) + "/"
    n = 0
    for name in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{name}/loop/backing_file") as f:
                n += f.read().strip().startswith(prefix)
        except OSError:
            pass
    return n


def measure(binary, users, slot, config):
    key = uuid.uuid4().hex
    d = Daemon(binary, key, config, slot=slot, who="idle_volumes")
    try:
        volumes = os.path.join(d.state, "volumes")
        time.sleep(3)
        disk0, mem0 = du_kib(volumes), mem_available_kib()
        with httpx.Client(base_url=d.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
            for i in range(users):
                h = {"X-User-Id": f"idle-{slot}-{i}-{uuid.uuid4().hex[:6]}"}
                if i % 2:
                    r = c.post("/files/write", json={"path": "note.txt", "content": "hello"}, headers=h)
                else:
                    r = c.get("/files/list", params={"directory": "."}, headers=h)
                r.raise_for_status()
        attached_busy = volume_mounts(volumes)
        time.sleep(8)  # the idle window (2 s) and a few more
        return {
            "disk_kib_per_user": (du_kib(volumes) - disk0) / users,
            "mem_kib_per_user": (mem0 - mem_available_kib()) / users,
            "mounted_when_active": attached_busy,
            "mounted_when_idle": volume_mounts(volumes),
            "loops_when_idle": volume_loops(volumes),
        }
    finally:
        d.stop()


def main():
    binary = sys.argv[1]
    baseline = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    users = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    print(f"load before: {loadavg()}; {users} users (half list an empty home, half write 5 bytes)")
    rows = [("this build", measure(binary, users, 0, CONFIG))]
    if baseline:
        rows.append(("baseline", measure(baseline, users, 1, BASELINE_CONFIG)))
    print(f"{'':12} {'disk KiB/user':>14} {'mem KiB/user':>13} {'mounted active':>15} {'mounted idle':>13} "
          f"{'loops idle':>11}")
    for name, r in rows:
        print(f"{name:12} {r['disk_kib_per_user']:14.0f} {r['mem_kib_per_user']:13.0f} {r['mounted_when_active']:15d} "
              f"{r['mounted_when_idle']:13d} {r['loops_when_idle']:11d}")
    print(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
