"""Shared by the Python benches (the standard library only): the load check before a
measurement, `agentbox serve` on a fresh state directory, the spare volumes it makes ahead for
new users ([accounts] spare_volumes), and what a node's users cost (memory, disk, volumes)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def loadavg():
    """The 1, 5 and 15 minute load averages, as text."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def wait_quiet(who, max_load=None, max_wait=None, poll=30):
    """Waits (polling every `poll` s, at most `max_wait` s) until the 1-minute load is at most
    `max_load` (environment BENCH_MAX_LOAD, 1.5; BENCH_MAX_WAIT, 600), then returns the load
    average as text, whatever it is by then."""
    max_load = float(os.environ.get("BENCH_MAX_LOAD", 1.5)) if max_load is None else max_load
    max_wait = float(os.environ.get("BENCH_MAX_WAIT", 600)) if max_wait is None else max_wait
    deadline = time.monotonic() + max_wait
    while True:
        load = loadavg()
        if float(load.split()[0]) <= max_load:
            return load
        if time.monotonic() >= deadline:
            print(f"{who}: the 1-minute load is still {load.split()[0]} > {max_load} after "
                  f"{max_wait:.0f} s: measuring anyway", flush=True)
            return load
        print(f"{who}: load {load} (1/5/15 min) > {max_load}: waiting {poll} s", flush=True)
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))


def uid_base(slot):
    """A uid range of its own for daemon `slot` (bench/lib.sh's scheme): two daemons may not
    share one."""
    return 2_000_000 + 65536 * (12288 + (os.getpid() * 4 + slot) % 4096)


class Daemon:
    """`agentbox serve` on 127.0.0.1 (a free port), a fresh state directory and CONFIG (TOML text;
    empty: every default)."""

    def __init__(self, binary, key, config="", slot=0, who="bench"):
        self.dir = tempfile.mkdtemp(prefix="agentbox-bench-")
        self.state = os.path.join(self.dir, "state")
        with open(os.path.join(self.dir, "config.toml"), "w") as f:
            f.write(config)
        self.log = open(os.path.join(self.dir, "log"), "wb")
        env = dict(os.environ, AGENTBOX_API_KEY=key, AGENTBOX_UID_BASE=str(uid_base(slot)))
        env.pop("AGENTBOX_CONFIG", None)
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--state", self.state,
                                     "--config", os.path.join(self.dir, "config.toml")],
                                    stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while True:
            m = re.search(rb"serving on (http://127\.0\.0\.1:\d+)", open(self.log.name, "rb").read())
            if m:
                self.url = m.group(1).decode()
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                output = open(self.log.name).read()
                self.stop()
                sys.exit(f"{who}: a daemon did not start:\n" + output)
            time.sleep(0.05)

    def banner(self, word):
        """The start-up line of the daemon's output that has `word` in it."""
        for line in open(self.log.name, errors="replace"):
            if word in line:
                return line.strip()
        return ""

    def spares_ready(self):
        """Spare volumes ready to be taken: images in STATE/volumes/.spare on a loop device whose
        ext4 is made (the kernel's /sys/fs/ext4/loopN: created by the spare's fsmount, which
        follows at once)."""
        images = set(glob.glob(os.path.join(self.state, "volumes", ".spare", "*.img")))
        ready = 0
        for backing in glob.glob("/sys/block/loop*/loop/backing_file"):
            try:
                with open(backing) as f:
                    path = f.read().strip()
            except OSError:
                continue
            device = backing.split("/")[3]
            if path in images and os.path.isdir(f"/sys/fs/ext4/{device}"):
                ready += 1
        return ready

    def wait_spares(self, count, timeout=120):
        """Waits until `count` spare volumes are ready; returns the seconds waited (None if they
        were not ready within `timeout`)."""
        started = time.monotonic()
        while self.spares_ready() < count:
            if time.monotonic() - started > timeout:
                return None
            time.sleep(0.05)
        return time.monotonic() - started

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def percentile(values, p):
    """The p-th percentile (nearest rank) of values."""
    s = sorted(values)
    if not s:
        return float("nan")
    rank = max(1, -(-len(s) * p // 100))
    return s[int(rank) - 1]


def meminfo_kib():
    """/proc/meminfo, KiB by field."""
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, value = line.split(":", 1)
            fields[name] = int(value.split()[0])
    return fields


def mem_available_kib():
    """/proc/meminfo's MemAvailable."""
    return meminfo_kib().get("MemAvailable", 0)


def kernel_side_kib():
    """The kernel's own part of memory (what namespaces, cgroups, mounts and kernel threads take):
    Slab + KernelStack + PageTables + Percpu + Shmem (a box's tmpfs files), as bench/user_floor.c
    counts it."""
    m = meminfo_kib()
    return sum(m.get(k, 0) for k in ("Slab", "KernelStack", "PageTables", "Percpu", "Shmem"))


def process_rss_kib(pid):
    """A process's resident set (VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def process_fds(pid):
    """A process's open descriptors."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def du_kib(path):
    """The disk blocks under path (du: what was written, not a sparse image's size)."""
    out = subprocess.run(["du", "-skx", path], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def volume_mounts(volumes):
    """Account volumes mounted from the directory volumes (STATE/volumes)."""
    prefix = os.path.realpath(volumes) + "/"
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if line.split()[4].startswith(prefix) and "/" not in line.split()[4][len(prefix):])


def volume_loops(volumes):
    """Loop devices whose backing file is under volumes."""
    prefix = os.path.realpath(volumes) + "/"
    n = 0
    for name in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{name}/loop/backing_file") as f:
                n += f.read().strip().startswith(prefix)
        except OSError:
            pass
    return n
