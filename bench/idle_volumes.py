"""Idle users' cost (issue 37): N new users each list their empty home, then N more each write one
small file, then everyone goes idle. Per user: the disk under STATE/volumes (du, so only blocks
written count) of those who only listed (no image: 0) and of those who wrote, the SQLite bytes of
an account row (its table and indexes), and once the idle window has passed the account volumes
still mounted and their loop devices, and the marginal MemAvailable drop. Against a baseline
binary in the same run (main before issue 37: every volume stays attached for the daemon's life).

    python3 bench/idle_volumes.py AGENTBOX [BASELINE] [USERS]
"""
import os
import sqlite3
import sys
import time
import uuid

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Daemon, du_kib, loadavg, mem_available_kib, volume_loops, volume_mounts  # noqa: E402

CONFIG = """
[accounts]
spare_volumes = 0
volume_idle = 2
"""
BASELINE_CONFIG = """
[accounts]
spare_volumes = 0
"""  # a build before issue 37 knows no volume_idle


def account_row_bytes(state):
    """The bytes the accounts table and its indexes hold in SQLite (dbstat: used, not free, bytes
    of their pages), read through a read-only connection beside the daemon's."""
    db = sqlite3.connect(f"file:{os.path.join(state, 'agentbox.db')}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT sum(pgsize - unused) FROM dbstat WHERE name = 'accounts' "
                          "OR name LIKE 'sqlite_autoindex_accounts_%'").fetchone()
        return rows[0] or 0
    finally:
        db.close()


def measure(binary, users, slot, config):
    """users list their empty home, then as many more write 5 bytes each."""
    key = uuid.uuid4().hex
    d = Daemon(binary, key, config, slot=slot, who="idle_volumes")
    try:
        volumes = os.path.join(d.state, "volumes")
        time.sleep(3)
        disk0, mem0, db0 = du_kib(volumes), mem_available_kib(), account_row_bytes(d.state)
        with httpx.Client(base_url=d.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
            for i in range(users):
                h = {"X-User-Id": f"idle-{slot}-l{i}-{uuid.uuid4().hex[:6]}"}
                c.get("/files/list", params={"directory": "."}, headers=h).raise_for_status()
            mounted_listers = volume_mounts(volumes)
            disk_listers, db_listers = du_kib(volumes), account_row_bytes(d.state)
            for i in range(users):
                h = {"X-User-Id": f"idle-{slot}-w{i}-{uuid.uuid4().hex[:6]}"}
                c.post("/files/write", json={"path": "note.txt", "content": "hello"}, headers=h).raise_for_status()
        attached_busy = volume_mounts(volumes)
        time.sleep(8)  # the idle window (2 s) and a few more
        return {
            "empty_kib_per_user": (disk_listers - disk0) / users,
            "db_bytes_per_user": (db_listers - db0) / users,
            "mounted_for_empty": mounted_listers,
            "written_kib_per_user": (du_kib(volumes) - disk_listers) / users,
            "mem_kib_per_user": (mem0 - mem_available_kib()) / (2 * users),
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
    print(f"load before: {loadavg()}; {users} users list an empty home, then {users} more write 5 bytes each")
    rows = [("this build", measure(binary, users, 0, CONFIG))]
    if baseline:
        rows.append(("baseline", measure(baseline, users, 1, BASELINE_CONFIG)))
    print(f"{'':12} {'empty KiB/user':>15} {'mounted empty':>14} {'db B/user':>10} {'written KiB/user':>17} "
          f"{'mem KiB/user':>13} {'mounted active':>15} {'mounted idle':>13} {'loops idle':>11}")
    for name, r in rows:
        print(f"{name:12} {r['empty_kib_per_user']:15.0f} {r['mounted_for_empty']:14d} {r['db_bytes_per_user']:10.0f} "
              f"{r['written_kib_per_user']:17.0f} {r['mem_kib_per_user']:13.0f} {r['mounted_when_active']:15d} "
              f"{r['mounted_when_idle']:13d} {r['loops_when_idle']:11d}")
    print(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
