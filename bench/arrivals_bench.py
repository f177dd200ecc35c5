"""New users arriving while another user works (issue 31): one user's GET /files/list in a tight
loop (one keep-alive connection, the next call as soon as the last answered), p50/p99 of its
latency (a) with nobody arriving, for --seconds, and (b) while --users new users arrive one after
another, from another process: each new user's first POST /execute?wait=60 of `true` creates its
account, its volume (with quotas: mkfs.ext4 and a loop mount, or a spare made ahead) and its
box, and the next arrives when it has answered. Both in each round, against one daemon with the
default config (quotas on, spare_volumes 2); medians over the rounds. Target: p99 (b) <= 3x p99 (a).
With --floor, each round also times (c): the same loop while the host makes --users volumes
itself, no daemon involved (a sparse 10G image, mkfs.ext4 as the daemon runs it, a loop mount),
the floor of (b) on this machine bar the box starts.

    /usr/bin/python3 bench/arrivals_bench.py AGENTBOX_BIN [--rounds 5] [--seconds 5] [--users 50] [--floor]
(bench/arrivals_bench.sh runs it; --arrive is the arriving process.)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Daemon, loadavg, percentile, wait_quiet  # noqa: E402

WHO = "arrivals_bench"


def headers(key, user):
    return {"Authorization": f"Bearer {key}", "X-User-Id": user}


def first_exec(client, url, key, user):
    r = client.post(url + "/execute?wait=60", json={"command": "true", "pty": False}, headers=headers(key, user))
    p = r.json()
    assert r.status_code == 200 and p.get("status") == "done" and p.get("exit_code") == 0, (r.status_code, p)


def arrive(url, key, prefix, users):
    """The arriving users, one after another; prints each first exec's seconds as JSON."""
    with httpx.Client(timeout=120) as client:
        print("ready", flush=True)
        sys.stdin.readline()  # "go"
        times = []
        for i in range(users):
            started = time.perf_counter()
            # A new connection per user, as a new client would open.
            with httpx.Client(timeout=120) as c:
                first_exec(c, url, key, f"{prefix}-{i}")
            times.append(time.perf_counter() - started)
    print(json.dumps(times), flush=True)


def arrive_floor(workdir, users):
    """The floor of (b): what the host does for each new user's volume, with no daemon involved:
    a sparse 10G image, mkfs.ext4 as the daemon runs it (volumes/ext4_image.cpp), a loop mount.
    Unmounted and deleted after the timing."""
    mounts = []
    print("ready", flush=True)
    sys.stdin.readline()  # "go"
    times = []
    try:
        for i in range(users):
            started = time.perf_counter()
            image, mnt = os.path.join(workdir, f"v{i}.img"), os.path.join(workdir, f"v{i}")
            with open(image, "wb") as f:
                f.truncate(10 << 30)
            subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "agentbox", "-E",
                            "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                            "-N", "1000000", image], check=True)
            os.mkdir(mnt)
            subprocess.run(["mount", "-o", "loop,errors=remount-ro", image, mnt], check=True)
            mounts.append(mnt)
            times.append(time.perf_counter() - started)
        print(json.dumps(times), flush=True)
    finally:
        for mnt in mounts:
            subprocess.run(["umount", mnt])


def list_loop(client, url, key, user, done):
    """GET /files/list calls back to back until done(); their latencies in seconds."""
    lat = []
    h = headers(key, user)
    while not done():
        started = time.perf_counter()
        r = client.get(url + "/files/list", headers=h)
        lat.append(time.perf_counter() - started)
        if r.status_code != 200:
            raise SystemExit(f"{WHO}: GET /files/list: {r.status_code} {r.text[:200]}")
    return lat


def during(client, url, key, user, args):
    """The GET /files/list loop while this script runs with ARGS in another process (which prints
    "ready", waits for "go", then prints a JSON list of seconds); (latencies, seconds, that list)."""
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "x", *args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.stdin.write("go\n")
    p.stdin.flush()
    started = time.monotonic()
    lat = list_loop(client, url, key, user, lambda: p.poll() is not None)
    seconds = time.monotonic() - started
    out = p.stdout.read()
    if p.wait() != 0:
        raise SystemExit(f"{WHO}: {args[0]} failed")
    return lat, seconds, json.loads(out.strip().splitlines()[-1])


def ms(s):
    return f"{s * 1000:.2f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--floor", action="store_true",
                    help="also (c): the loop while the host makes 50 volumes (mkfs, loop mount) with no daemon")
    ap.add_argument("--arrive", nargs=4, metavar=("URL", "KEY", "PREFIX", "USERS"))
    ap.add_argument("--arrive-floor", nargs=2, metavar=("DIR", "USERS"))
    a = ap.parse_args()
    if a.arrive_floor:
        return arrive_floor(a.arrive_floor[0], int(a.arrive_floor[1]))
    if a.arrive:
        url, key, prefix, users = a.arrive
        return arrive(url, key, prefix, int(users))

    key = "bench-" + uuid.uuid4().hex
    print(f"== new users arriving: {a.binary}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"host:   {os.uname().release}, {os.cpu_count()} cores")
    load = wait_quiet(WHO)
    print(f"load:   {load} (1/5/15 min) at start")
    print(f"reproduce: bench/arrivals_bench.sh {os.path.dirname(a.binary)}  "
          f"(ARRIVALS_ARGS=\"--rounds {a.rounds} --seconds {a.seconds:g} --users {a.users}{' --floor' * a.floor}\")")
    d = Daemon(a.binary, key, config="# every default: quotas on (10G), spare_volumes 2\n", who=WHO)
    rows = []
    try:
        print(d.banner("storage:"))
        # Spares ready before each round, when the build makes them (not before issue 31).
        made_ahead = re.search(r"(\d+) made ahead", d.banner("storage:"))
        want = int(made_ahead.group(1)) if made_ahead else 0
        spares = d.wait_spares(want)
        print(f"spare volumes: {want} ready {spares:.1f} s after start" if spares is not None else
              f"spare volumes: not {want} ready after 120 s (measuring anyway)")
        me = "measured-user"
        client = httpx.Client(timeout=60)
        first_exec(client, d.url, key, me)  # its account, volume and box exist before timing
        warm_until = time.monotonic() + 1
        list_loop(client, d.url, key, me, lambda: time.monotonic() >= warm_until)  # a second of warm-up
        print(f"(a) one user's GET /files/list back to back for {a.seconds:g} s, nobody arriving;")
        print(f"(b) the same while {a.users} new users arrive one after another (each first POST /execute"
              " of `true`: account, volume, box)")
        for r in range(1, a.rounds + 1):
            d.wait_spares(want)  # each round starts with the spares a quiet daemon has
            load_start = loadavg()
            until = time.monotonic() + a.seconds
            alone = list_loop(client, d.url, key, me, lambda: time.monotonic() >= until)
            busy, busy_s, arrivals = during(client, d.url, key, me, [
                "--arrive", d.url, key, f"arrival-r{r}-{uuid.uuid4().hex[:6]}", str(a.users)])
            if a.floor:
                with tempfile.TemporaryDirectory(prefix="agentbox-arrivals-floor-") as work:
                    floor, _, made = during(client, d.url, key, me, ["--arrive-floor", work, str(a.users)])
            row = {"alone_p50": percentile(alone, 50), "alone_p99": percentile(alone, 99), "alone_n": len(alone),
                   "busy_p50": percentile(busy, 50), "busy_p99": percentile(busy, 99), "busy_n": len(busy),
                   "busy_max": max(busy), "busy_s": busy_s,
                   "first_p50": statistics.median(arrivals), "first_max": max(arrivals)}
            row["ratio"] = row["busy_p99"] / row["alone_p99"]
            if a.floor:
                row.update(floor_p50=percentile(floor, 50), floor_p99=percentile(floor, 99),
                           floor_ratio=percentile(floor, 99) / row["alone_p99"], floor_made=statistics.median(made))
            rows.append(row)
            print(f"round {r}: load {load_start}; alone: p50 {ms(row['alone_p50'])} p99 {ms(row['alone_p99'])}"
                  f" ({row['alone_n']} calls)   arriving: p50 {ms(row['busy_p50'])} p99 {ms(row['busy_p99'])}"
                  f" max {ms(row['busy_max'])} ({row['busy_n']} calls in {row['busy_s']:.1f} s)   "
                  f"p99 ratio {row['ratio']:.2f}x   new users' first exec p50 {ms(row['first_p50'])}"
                  f" max {ms(row['first_max'])}", flush=True)
            if a.floor:
                print(f"         floor (the host makes {a.users} volumes, no daemon): p50 {ms(row['floor_p50'])} p99 "
                      f"{ms(row['floor_p99'])}   p99 ratio {row['floor_ratio']:.2f}x   a volume {ms(row['floor_made'])}",
                      flush=True)
        client.close()
    finally:
        d.stop()

    med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    print(f"medians over {len(rows)} rounds:")
    for label, p50, p99 in (("one user's GET /files/list, nobody arriving", med["alone_p50"], f"p99 {ms(med['alone_p99'])}"),
                            (f"the same while {a.users} new users arrive", med["busy_p50"], f"p99 {ms(med['busy_p99'])}"),
                            ("new users' first exec (account, volume, box)", med["first_p50"], f"max {ms(med['first_max'])}")):
        print(f"  {label:46}  p50 {ms(p50):>9}  {p99}")
    if a.floor:
        print(f"  {'the same while the host makes the volumes':46}  p50 {ms(med['floor_p50']):>9}  p99 "
              f"{ms(med['floor_p99'])}   floor ratio {med['floor_ratio']:.2f}x (median of the rounds')")
    print(f"  p99 arriving / p99 alone (median of the rounds' ratios): {med['ratio']:.2f}x   target <= 3x: "
          f"{'met' if med['ratio'] <= 3 else 'NOT met'}")
    print(f"load:   {loadavg()} (1/5/15 min) at the end")


if __name__ == "__main__":
    main()
