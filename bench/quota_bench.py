"""Disk quotas on vs off (issue 16): the same work in a home on an account volume (an ext4 image
of the quota's size on a loop device) and in a home that is a plain directory of the state
filesystem, through two daemons side by side, alternating. Reports medians and on/off ratios:
  first start   a new user's first command (account, volume, box)
  dd 1 GiB      dd of zeros with fsync in the home
  small files   20,000 files of 1 KiB written and synced

    python3 bench/quota_bench.py AGENTBOX_BIN RUNS
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

KEY = "bench-" + uuid.uuid4().hex


class Daemon:
    def __init__(self, binary, disk, slot):
        self.dir = tempfile.mkdtemp(prefix="agentbox-quota-bench-")
        with open(os.path.join(self.dir, "config.toml"), "w") as f:
            f.write(f'[accounts]\ndisk = "{disk}"\n')
        self.log = open(os.path.join(self.dir, "log"), "wb")
        # A uid range of its own (bench/lib.sh's scheme): two daemons may not share one.
        uid_base = 2_000_000 + 65536 * (12288 + (os.getpid() * 2 + slot) % 4096)
        env = dict(os.environ, AGENTBOX_API_KEY=KEY, AGENTBOX_UID_BASE=str(uid_base))
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--state",
                                      os.path.join(self.dir, "state"), "--config",
                                      os.path.join(self.dir, "config.toml")],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while True:
            m = re.search(rb"serving on (http://127\.0\.0\.1:\d+)", open(self.log.name, "rb").read())
            if m:
                self.url = m.group(1).decode()
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit("quota_bench: a daemon did not start:\n" + open(self.log.name).read())
            time.sleep(0.05)

    def execute(self, user, command):
        req = urllib.request.Request(self.url + "/execute?wait=300", method="POST",
                                     data=json.dumps({"command": command, "pty": False}).encode(),
                                     headers={"Authorization": f"Bearer {KEY}", "X-User-Id": user,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=900) as r:
            p = json.load(r)
        assert p["status"] == "done" and p["exit_code"] == 0, p
        return "".join(c["data"] for c in p["output"] if c["type"] == "stdout")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


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


def main():
    binary, runs = sys.argv[1], int(sys.argv[2])
    on, off = Daemon(binary, "4G", 0), Daemon(binary, "0", 1)
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
