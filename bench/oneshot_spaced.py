#!/usr/bin/env python3
"""One-shot starts as a person makes them: spaced out, not back to back.

`bench/oneshot.sh` runs `agentbox run -- /bin/true` back to back, which hides any cost that a
recent start makes cheap for the next one (a cgroup v1 attach waits for an RCU grace period,
10-15 ms, unless another attach ran within the last one). This script sleeps GAP seconds before
each start and alternates the commands, so each start pays what a lone start pays.

    bench/oneshot_spaced.py AGENTBOX [OTHER_AGENTBOX] [--runs 40] [--gap 0.1]

OTHER_AGENTBOX (e.g. a build of an earlier commit) is measured in the same rounds. Run as root.
"""
import argparse
import statistics
import subprocess
import time

BWRAP = ("bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib "
         "--symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev /bin/true").split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("agentbox")
    ap.add_argument("other", nargs="?")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--gap", type=float, default=0.1)
    a = ap.parse_args()
    cmds = {"agentbox": [a.agentbox, "run", "--", "/bin/true"], "bwrap": BWRAP}
    if a.other:
        cmds["other agentbox"] = [a.other, "run", "--", "/bin/true"]
    times = {k: [] for k in cmds}
    for _ in range(a.runs):
        for name, cmd in cmds.items():
            time.sleep(a.gap)
            t = time.perf_counter()
            subprocess.run(cmd, check=True)
            times[name].append((time.perf_counter() - t) * 1000)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"oneshot spaced: {a.runs} runs each, {a.gap} s apart, alternated; load after: {load}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"  {k:15s} median {med[k]:7.2f} ms   p90 {sorted(v)[int(len(v) * 0.9)]:7.2f} ms")
    for k in cmds:
        if k != "bwrap":
            print(f"  {k} / bwrap = {med[k] / med['bwrap']:.2f}x")


if __name__ == "__main__":
    main()
