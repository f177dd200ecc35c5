"""What a daemon leaves on the host, looked up by what is provably its own: mounts and loop
devices under the soak's work directory, cgroups named after its pid (`agentbox/box-<pid>-<n>`,
box/box_manager.cpp), processes in those cgroups or in its process tree, network namespaces only
its processes held; and its RSS and descriptors, for the baseline checks.

Runs on: the main thread.
"""
import json
import os
import subprocess

CGROUP_ROOT = "/sys/fs/cgroup"


def mounts_under(path):
    prefix = os.path.realpath(path) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p.startswith(prefix)]


def loops_under(path):
    prefix = os.path.realpath(path) + "/"
    out = subprocess.run(["losetup", "-J", "-l"], capture_output=True, text=True, timeout=30).stdout
    devices = json.loads(out)["loopdevices"] if out.strip() else []
    return [(d["name"], d["back-file"]) for d in devices if (d.get("back-file") or "").startswith(prefix)]


def cgroups_of(pid):
    """Every cgroup directory (v1 hierarchies and v2) of the boxes daemon `pid` made."""
    found = []
    for hierarchy in sorted(os.listdir(CGROUP_ROOT)):
        base = os.path.join(CGROUP_ROOT, hierarchy, "agentbox")
        try:
            names = os.listdir(base)
        except OSError:
            continue
        found += [os.path.join(base, n) for n in names if n.startswith(f"box-{pid}-")]
    return found


def processes_in_cgroups_of(pid):
    """Pids on the host whose cgroup is one of daemon `pid`'s boxes (they outlive the tree)."""
    marker = f"/agentbox/box-{pid}-"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cgroup") as f:
                if marker in f.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def net_namespaces(pids):
    """The network namespaces (inode names) the given processes are in."""
    found = set()
    for pid in pids:
        try:
            found.add(os.readlink(f"/proc/{pid}/ns/net"))
        except OSError:
            pass
    return found


def live_net_namespaces():
    """Every network namespace a process on the host is in, or that an nsfs mount holds."""
    found = net_namespaces(int(e) for e in os.listdir("/proc") if e.isdigit())
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "nsfs" and fields[3].startswith("net:"):
                found.add(fields[3])
    return found


def uptime():
    """Seconds since boot, the clock of a process's start time in /proc/PID/stat."""
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def started_at(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(") ", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")


def _older(pid, than):
    """Started before `than` (a pid number is reused too)."""
    try:
        return started_at(pid) < than
    except OSError:
        return False


def holders(netns, before=None):
    """Who keeps a network namespace alive: "pid comm cgroup" of its processes (only those
    started before `before`, seconds since boot: a namespace's inode number is reused once it is
    freed, so a later process in one of that number is someone else's), or its mounts."""
    found = []
    for e in (e for e in os.listdir("/proc") if e.isdigit()):
        try:
            if os.readlink(f"/proc/{e}/ns/net") != netns or (before is not None and started_at(e) >= before):
                continue
            comm = open(f"/proc/{e}/comm").read().strip()
            cgroup = open(f"/proc/{e}/cgroup").read().splitlines()[0]
            found.append(f"{e} {comm} {cgroup}")
        except OSError:
            pass
    with open("/proc/self/mountinfo") as f:
        found += [f"mount {line.split()[4]}" for line in f if f" {netns} " in line]
    return found


def rss_and_fds(pid):
    """(VmRSS in KiB, open descriptors) of a live process."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def left_by(daemon_pid, tree, box_netns, ended, workdir=None):
    """What daemon `daemon_pid` (whose process tree was `tree` and whose boxes were in
    `box_netns`, and which ended at `ended`, seconds since boot) left behind, by kind: {"process": [...], "cgroup": [...], ...}. With workdir,
    mounts and loop devices under it count too (only meaningful once no daemon runs there)."""
    left = {
        "process": sorted(set(p for p in tree if alive(p) and _older(p, ended)) | set(processes_in_cgroups_of(daemon_pid))),
        "cgroup": cgroups_of(daemon_pid),
        "netns": [f"{ns} held by {held}" for ns in sorted(box_netns & live_net_namespaces())
                  if (held := holders(ns, before=ended))],
    }
    if workdir is not None:
        left["mount"] = mounts_under(workdir)
        left["loop"] = loops_under(workdir)
    return {k: v for k, v in left.items() if v}
