"""Many users on one node (issue 37). Two measures, each against one daemon on a fresh state
directory with the default config but for the limits a node of this many users would raise
(`max_active`, `new_per_minute = 0`):

active: --users users arrive, --parallel at a time; each one's first request is
  POST /execute?wait=60 of `setsid -f sleep 3600` with "pty": false, which makes its account,
  its volume and its box and leaves one idle process in it. After every --batch users (once the
  machine has settled) the marginal cost is read: MemAvailable's drop per user, its kernel-side
  part (Slab + KernelStack + PageTables + Percpu + Shmem, as bench/user_floor.c counts it), the
  daemon's RSS and descriptors, the volumes mounted and loop devices. Per-user figures are the
  median over batches. The first commands' latency is judged by trend, as box_bench judges
  density: a Theil-Sen line through the batches' medians, the last user's value over the first's.
  With --quotas off (disk = "0": no volumes) it reads the boxes' own cost.

known: --known users are made (one GET /files/list each, --parallel at a time: an account and
  no volume), then --active of them run an idle process as above. Then the daemon's RSS and
  descriptors, the disk under STATE/volumes and of the database, per known user.

volumes: the floor of one active user's volume, no daemon involved: --volumes images made as the
  daemon makes one (a sparse 10G image, mkfs.ext4 with volumes/ext4_image.cpp's options, a loop
  mount), all mounted at once; the kernel's cost per volume, read as in `active`.

    python3 bench/users_bench.py AGENTBOX active [--users 10000] [--batch 500] [--parallel 4] [--quotas off]
    python3 bench/users_bench.py AGENTBOX known [--known 100000] [--active 1000]
    python3 bench/users_bench.py AGENTBOX volumes [--volumes 300]
(bench/users_bench.sh builds and runs both.)
"""
import argparse
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import (Daemon, du_kib, kernel_side_kib, loadavg, mem_available_kib,  # noqa: E402
                        process_fds, process_rss_kib, volume_loops, volume_mounts, wait_quiet)

WHO = "users_bench"
IDLE_PROCESS = {"command": "setsid -f sleep 3600", "pty": False}


def config(active, known, quotas=True):
    """max_active above the active users, no creation rate, a uid for every known user (the
    default range holds 65,536)."""
    return f"""
[accounts]
max_active = {active + 16}
new_per_minute = 0
uid_count = {max(65536, known + 1024)}
""" + ('' if quotas else 'disk = "0"\n')


class Node:
    """The daemon under test and the figures read from it and the machine."""

    def __init__(self, binary, active, known=0, quotas=True):
        self.key = uuid.uuid4().hex
        self.daemon = Daemon(binary, self.key, config(active, known, quotas), who=WHO)
        self.volumes = os.path.join(self.daemon.state, "volumes")
        self.local = None

    def client(self):
        return httpx.Client(base_url=self.daemon.url, timeout=120,
                            headers={"Authorization": f"Bearer {self.key}"},
                            limits=httpx.Limits(max_connections=1))

    def reading(self):
        pid = self.daemon.proc.pid
        return {"available": mem_available_kib(), "kernel": kernel_side_kib(), "rss": process_rss_kib(pid),
                "fds": process_fds(pid), "mounted": volume_mounts(self.volumes),
                "loops": volume_loops(self.volumes)}

    def settled_reading(self, seconds=3):
        time.sleep(seconds)  # RCU frees, spare volumes made ahead, the last boxes' inits asleep
        return self.reading()

    def stop(self):
        self.daemon.stop()


def run_users(node, names, body, parallel):
    """Each name's first request, `parallel` at a time; returns their latencies (s) in order."""
    def one(name, client):
        started = time.monotonic()
        if body is None:
            r = client.get("/files/list", params={"directory": "."}, headers={"X-User-Id": name})
        else:
            r = client.post("/execute?wait=60", json=body, headers={"X-User-Id": name})
        if r.status_code != 200 or (body is not None and r.json().get("exit_code") != 0):
            sys.exit(f"{WHO}: {name}'s first request answered {r.status_code}: {r.text[:300]}")
        return time.monotonic() - started

    clients = [node.client() for _ in range(parallel)]
    try:
        with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
            chunks = [names[i::parallel] for i in range(parallel)]
            futures = [pool.submit(lambda chunk, c: [(n, one(n, c)) for n in chunk], chunk, clients[i])
                       for i, chunk in enumerate(chunks)]
            times = dict(pair for f in futures for pair in f.result())
    finally:
        for c in clients:
            c.close()
    return [times[n] for n in names]


def theil_sen(xs, ys):
    """The median of pairwise slopes and the intercept through the median residual."""
    slopes = [(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(len(xs)) for j in range(i + 1, len(xs))
              if xs[j] != xs[i]]
    slope = statistics.median(slopes) if slopes else 0.0
    return slope, statistics.median(y - slope * x for x, y in zip(xs, ys))


def per_user(before, after, field, users):
    return (before[field] - after[field]) / users if field == "available" else (after[field] - before[field]) / users


def active(binary, users, batch, parallel, quotas):
    node = Node(binary, users, users, quotas)
    try:
        print(f"{WHO} active: {users} users, {parallel} at a time, each leaves `sleep` running in its box; "
              f"a reading every {batch}; daemon {node.daemon.url}, state {node.daemon.state}", flush=True)
        print(node.daemon.banner("storage:"), flush=True)
        prefix = f"u{uuid.uuid4().hex[:6]}-"
        last = node.settled_reading(5)
        first = last
        rows, latencies = [], []
        started = time.monotonic()
        for start in range(0, users, batch):
            names = [f"{prefix}{i}" for i in range(start, min(users, start + batch))]
            latencies += run_users(node, names, IDLE_PROCESS, parallel)
            now = node.settled_reading()
            n = len(names)
            rows.append({f: per_user(last, now, f, n) for f in ("available", "kernel", "rss", "fds")}
                        | {"users": start + n, "mounted": now["mounted"], "loops": now["loops"],
                           "p50": statistics.median(latencies[-n:])})
            r = rows[-1]
            print(f"  {r['users']:6d} users: per user {r['available']:6.0f} KiB MemAvailable, {r['kernel']:5.0f} KiB "
                  f"kernel side, {r['rss']:5.1f} KiB daemon RSS, {r['fds']:4.2f} fds; volumes mounted "
                  f"{r['mounted']}, loop devices {r['loops']}; first command p50 {r['p50'] * 1000:.1f} ms "
                  f"(load {loadavg()}, {time.monotonic() - started:.0f} s)", flush=True)
            last = now
        xs = [i + 1 for i in range(len(latencies))]
        # The trend through the batches' medians (pairwise slopes of all users would be ~10^8).
        mids = [(statistics.median(xs[i:i + batch]), statistics.median(latencies[i:i + batch]))
                for i in range(0, len(xs), batch)]
        slope, intercept = theil_sen([m[0] for m in mids], [m[1] for m in mids])
        at_first, at_last = intercept + slope, intercept + slope * users
        whole = {f: per_user(first, last, f, users) for f in ("available", "kernel", "rss", "fds")}
        median = {f: statistics.median(r[f] for r in rows) for f in ("available", "kernel", "rss", "fds")}
        print(f"result: {users} active users")
        print(f"  memory per user, MemAvailable drop: median of batches {median['available']:.0f} KiB "
              f"(all at once {whole['available']:.0f} KiB)  target <= 512 KiB")
        print(f"    of it kernel side {median['kernel']:.0f} KiB, daemon RSS {median['rss']:.1f} KiB; "
              f"daemon descriptors per user {median['fds']:.2f} (total {last['fds']})")
        print(f"  volumes mounted {last['mounted']}, loop devices {last['loops']} for {users} active users "
              f"(target: <= the active users)")
        print(f"  first command, trend: 1st {at_first * 1000:.1f} ms, {users}th {at_last * 1000:.1f} ms, "
              f"ratio {at_last / at_first:.2f}x  target <= 1.5x; medians of first/last batch "
              f"{mids[0][1] * 1000:.1f} / {mids[-1][1] * 1000:.1f} ms")
        stop_started = time.monotonic()
        node.stop()
        print(f"  stop with {users} boxes running: {time.monotonic() - stop_started:.1f} s; load {loadavg()}")
    finally:
        node.stop()


def known(binary, users, actives, parallel):
    node = Node(binary, actives, users)
    try:
        print(f"{WHO} known: {users} known users (one GET /files/list each, {parallel} at a time), then "
              f"{actives} of them active with `sleep` in their box; daemon {node.daemon.url}", flush=True)
        prefix = f"k{uuid.uuid4().hex[:6]}-"
        names = [f"{prefix}{i}" for i in range(users)]
        base = node.settled_reading(5)
        volumes0, db0 = du_kib(node.volumes), du_kib(os.path.join(node.daemon.state, "agentbox.db"))
        started = time.monotonic()
        run_users(node, names, None, parallel)
        made = time.monotonic() - started
        after_known = node.settled_reading()
        volumes1 = du_kib(node.volumes)
        db1 = sum(du_kib(os.path.join(node.daemon.state, f)) for f in os.listdir(node.daemon.state)
                  if f.startswith("agentbox.db"))
        run_users(node, names[:actives], IDLE_PROCESS, parallel)
        after_active = node.settled_reading()
        print(f"result: {users} known users made in {made:.0f} s ({users / made:.0f}/s)")
        print(f"  daemon RSS {base['rss'] / 1024:.1f} -> {after_known['rss'] / 1024:.1f} MiB with {users} known "
              f"({(after_known['rss'] - base['rss']) * 1024 / users:.0f} B per known user) -> "
              f"{after_active['rss'] / 1024:.1f} MiB with {actives} active")
        print(f"  daemon descriptors {base['fds']} -> {after_known['fds']} -> {after_active['fds']}")
        print(f"  disk under STATE/volumes for the {users} known users: {volumes1 - volumes0} KiB "
              f"({(volumes1 - volumes0) / users:.2f} KiB each, target <= 256 KiB); the database "
              f"{db1 - db0} KiB ({(db1 - db0) * 1024 / users:.0f} B each)")
        print(f"  MemAvailable drop: {(base['available'] - after_known['available']) / 1024:.0f} MiB for the known, "
              f"{(after_known['available'] - after_active['available']) / 1024:.0f} MiB more for the {actives} active; "
              f"volumes mounted {after_active['mounted']}, loop devices {after_active['loops']}")
    finally:
        node.stop()


def volume_floor(count):
    work = tempfile.mkdtemp(prefix="agentbox-volume-floor-", dir=os.environ.get("TMPDIR", "/var/tmp"))
    mounts = []
    try:
        print(f"{WHO} volumes: {count} volumes made and mounted as the daemon does, no daemon; in {work}",
              flush=True)
        time.sleep(3)
        before = {"available": mem_available_kib(), "kernel": kernel_side_kib()}
        for i in range(count):
            image, mnt = os.path.join(work, f"v{i}.img"), os.path.join(work, f"v{i}")
            with open(image, "wb") as f:
                f.truncate(10 << 30)
            subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "agentbox", "-O", "^resize_inode", "-G", "4096",
                            "-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                            "-N", "1000000", image], check=True)
            os.mkdir(mnt)
            subprocess.run(["mount", "-o", "loop,nosuid,nodev,errors=remount-ro", image, mnt], check=True)
            mounts.append(mnt)
        time.sleep(3)
        after = {"available": mem_available_kib(), "kernel": kernel_side_kib()}
        print(f"result: one mounted volume costs {per_user(before, after, 'available', count):.0f} KiB of "
              f"MemAvailable, {per_user(before, after, 'kernel', count):.0f} KiB of it kernel side "
              f"(a loop device, an ext4 mount and its journal thread)")
    finally:
        for mnt in mounts:
            subprocess.run(["umount", "-d", mnt])
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("measure", choices=("active", "known", "volumes"))
    ap.add_argument("--users", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--known", type=int, default=100000)
    ap.add_argument("--active", type=int, default=1000)
    ap.add_argument("--volumes", type=int, default=300)
    ap.add_argument("--quotas", choices=("on", "off"), default="on",
                    help='active: "off" runs with disk = "0" (no volumes): the boxes\' own cost')
    args = ap.parse_args()
    print(f"{WHO}: load {wait_quiet(WHO)} (1/5/15 min) at start", flush=True)
    if args.measure == "active":
        active(args.binary, args.users, args.batch, args.parallel, args.quotas == "on")
    elif args.measure == "volumes":
        volume_floor(args.volumes)
    else:
        known(args.binary, args.known, args.active, args.parallel)


if __name__ == "__main__":
    main()
