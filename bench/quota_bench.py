"""Disk quotas on vs off (issue 16): the same work in a home on an account volume (an ext4 image
of the quota's size on a loop device) and in a home that is a plain directory of the state
filesystem, through two daemons side by side, alternating. Reports medians and on/off ratios:
  first start   a new user's first command (account, volume, box)
  dd 1 GiB      dd of zeros with fsync in the home
  small files   20,000 files of 1 KiB written and synced

    python3 bench/quota_bench.py AGENTBOX_BIN RUNS

With `first` (issue 31), only a new user's first POST /execute of `true` (account, volume, box),
RUNS new users on each of three daemons side by side, rotating which goes first: quotas on with
the default config (10G, spare_volumes 2: the volume is a spare made ahead; before each new user,
on any daemon, the spares are waited for, so no refill runs while one is timed), quotas off
(disk = "0"), and quotas on with spare_volumes = 0 (mkfs and mount on the first request, the
figure before issue 31). Medians; target: on / off <= 1.2x.

    python3 bench/quota_bench.py AGENTBOX_BIN USERS first
"""
import json
import os
import statistics
import sys
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402

KEY = "bench-" + uuid.uuid4().hex


class Daemon(bench_util.Daemon):
    def __init__(self, binary, config, slot):
        super().__init__(binary, KEY, config=config, slot=slot, who="quota_bench")

    def execute(self, user, command):
        req = urllib.request.Request(self.url + "/execute?wait=300", method="POST",
                                     data=json.dumps({"command": command, "pty": False}).encode(),
                                     headers={"Authorization": f"Bearer {KEY}", "X-User-Id": user,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=900) as r:
            p = json.load(r)
        assert p["status"] == "done" and p["exit_code"] == 0, p
        return "".join(c["data"] for c in p["output"] if c["type"] == "stdout")


def timed_in_box(d, user, command):
    """Seconds the command took, measured inside the box (no HTTP or box start in it)."""
    out = d.execute(user, f"s=$(date +%s%N); {command}; e=$(date +%s%N); echo $(( (e - s) / 1000 ))")
    return int(out.split()[-1]) / 1e6


def first_start(d):
    started = time.monotonic()
    d.execute("first-" + uuid.uuid4().hex[:10], "true")
    return time.monotonic() - started


DD = "dd if=/dev/zero of=big bs=1M count=1024 conv=fsync status=none; rm -f big"
SMALL = ("python3 -c \"import os\nos.makedirs('s', exist_ok=True)\n"
         "for i in range(20000):\n open(f's/f{i}', 'wb').write(b'x' * 1024)\n\"; sync -f .; rm -rf s")


def first_exec_bench(binary, users):
    """A new user's first command with quotas on (spares made ahead), off, and on without spares."""
    print(f"== a new user's first POST /execute of `true`: {binary}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"host:   {os.uname().release}, {os.cpu_count()} cores")
    print(f"load:   {bench_util.wait_quiet('quota_bench')} (1/5/15 min) at start")
    print(f"reproduce: QUOTA_BENCH=first RUNS={users} NO_BUILD=1 bench/quota_bench.sh {os.path.dirname(binary)}")
    configs = {"on": "# every default: quotas on (10G), spare_volumes 2\n",
               "off": '[accounts]\ndisk = "0"\n',
               "on, no spares": "[accounts]\nspare_volumes = 0\n"}
    daemons = {}
    try:
        for slot, (label, config) in enumerate(configs.items()):
            daemons[label] = Daemon(binary, config, slot)
        for label, d in daemons.items():
            print(f"  {label:14} {d.banner('storage:')}")
            d.execute("warm-" + uuid.uuid4().hex[:10], "true")  # the daemon's first box, not timed
        on = daemons["on"]
        times = {label: [] for label in daemons}
        labels = list(daemons)
        for i in range(users):
            order = labels[i % 3:] + labels[:i % 3]
            for label in order:
                if on.wait_spares(2) is None:
                    print("quota_bench: the spares were not ready within 120 s; measuring anyway")
                times[label].append(first_start(daemons[label]))
            print(f"user {i + 1:2}: " + "   ".join(f"{label} {times[label][-1] * 1000:6.1f} ms" for label in labels)
                  + f"   load {bench_util.loadavg().split()[0]}", flush=True)
    finally:
        for d in daemons.values():
            d.stop()
    med = {label: statistics.median(t) for label, t in times.items()}
    print(f"medians over {users} new users on each daemon (a new connection, POST /execute?wait=300, `true`):")
    for label in labels:
        print(f"  quotas {label:14} {med[label] * 1000:7.1f} ms   {med[label] / med['off']:.2f}x quotas off")
    ratio = med["on"] / med["off"]
    print(f"  quotas on / quotas off: {ratio:.2f}x   target <= 1.2x: {'met' if ratio <= 1.2 else 'NOT met'}")
    print(f"load:   {bench_util.loadavg()} (1/5/15 min) at the end")


def main():
    binary, runs = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3 and sys.argv[3] == "first":
        return first_exec_bench(binary, runs)
    on, off = Daemon(binary, '[accounts]\ndisk = "4G"\n', 0), Daemon(binary, '[accounts]\ndisk = "0"\n', 1)
    results = {name: {"on": [], "off": []} for name in ("first start", "dd 1 GiB", "small files")}
    try:
        users = {"on": "bench-on", "off": "bench-off"}
        on.execute(users["on"], "true")
        off.execute(users["off"], "true")
        for _ in range(runs):
            for label, d in (("on", on), ("off", off)):
                results["first start"][label].append(first_start(d))
                results["dd 1 GiB"][label].append(timed_in_box(d, users[label], DD))
                results["small files"][label].append(timed_in_box(d, users[label], SMALL))
    finally:
        on.stop()
        off.stop()
    print(f"{'':14} {'quota on':>10} {'quota off':>10} {'on/off':>8}   (medians of {runs}, seconds)")
    for name, r in results.items():
        a, b = statistics.median(r["on"]), statistics.median(r["off"])
        # Throughput ratio for the writes (off time / on time); time ratio for the start.
        ratio = b / a if name != "first start" else a / b
        label = "throughput" if name != "first start" else "time"
        print(f"{name:14} {a:10.3f} {b:10.3f} {ratio:8.2f}   ({label} on/off)")


if __name__ == "__main__":
    main()
