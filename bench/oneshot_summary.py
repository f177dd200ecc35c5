"""Pools hyperfine --export-json files (several rounds of the same named commands) and prints
medians, p90s and the ratios bench/oneshot.sh reports against the issue's targets.

    /usr/bin/python3 bench/oneshot_summary.py [--cpu CPU.csv] FILE.json...

CPU.csv holds "name,ms" lines: CPU time (perf stat task-clock, every descendant counted) per run.
"""
import json
import statistics
import sys
from collections import defaultdict


def percentile(values, p):
    """Nearest-rank percentile, p in 0..100."""
    s = sorted(values)
    rank = max(1, min(len(s), -(-len(s) * p // 100)))
    return s[int(rank) - 1]


def read_cpu(path):
    cpu = {}  # command name -> CPU ms per run
    with open(path) as f:
        for line in f:
            name, ms = line.strip().split(",")
            cpu[name] = float(ms)
    return cpu


def main(paths, cpu):
    times = defaultdict(list)  # command name -> seconds, pooled over rounds
    for path in paths:
        with open(path) as f:
            for result in json.load(f)["results"]:
                times[result["command"]].extend(result["times"])

    med = {name: statistics.median(t) * 1000 for name, t in times.items()}
    print(f"\n  {'command':<10} {'runs':>5} {'median':>10} {'p90':>10} {'min':>10} {'CPU/run':>10}")
    for name in ("agentbox", "bwrap", "floor", "srt", "true"):
        if name not in times:
            continue
        t = [x * 1000 for x in times[name]]
        print(f"  {name:<10} {len(t):>5} {med[name]:>8.2f}ms {percentile(t, 90):>8.2f}ms {min(t):>8.2f}ms {cpu.get(name, float('nan')):>8.2f}ms")

    print()
    if {"agentbox", "bwrap"} <= med.keys():
        r = med["agentbox"] / med["bwrap"]
        verdict = "met" if r <= 1.0 else f"MISSED by {(r - 1) * 100:.0f}%"
        print(f"  agentbox / bwrap   = {r:.2f}x   (target <= 1.0x: {verdict})")
    if {"agentbox", "floor"} <= med.keys():
        print(f"  agentbox / floor   = {med['agentbox'] / med['floor']:.2f}x   (the floor: the box's namespaces, mounts, uid and exec alone)")
    if {"bwrap", "floor"} <= med.keys():
        print(f"  bwrap / floor      = {med['bwrap'] / med['floor']:.2f}x")
    if {"agentbox", "srt"} <= med.keys():
        r = med["srt"] / med["agentbox"]
        verdict = "met" if r >= 50 else "MISSED"
        print(f"  srt / agentbox     = {r:.1f}x   (target >= 50x, i.e. agentbox <= 1/50 of srt: {verdict})")
    if {"agentbox", "true"} <= med.keys():
        print(f"  agentbox - true    = {med['agentbox'] - med['true']:.2f} ms (cost of the box itself)")
    if {"bwrap", "true"} <= med.keys():
        print(f"  bwrap - true       = {med['bwrap'] - med['true']:.2f} ms")
    if {"agentbox", "bwrap"} <= cpu.keys():
        r = cpu["agentbox"] / cpu["bwrap"]
        verdict = "met" if r <= 1.0 else f"MISSED by {(r - 1) * 100:.0f}%"
        print(f"  CPU time agentbox / bwrap = {r:.2f}x   (target <= 1.0x: {verdict}; perf task-clock, moves less with load)")
    if {"agentbox", "floor"} <= cpu.keys():
        print(f"  CPU time agentbox / floor = {cpu['agentbox'] / cpu['floor']:.2f}x")
    if {"bwrap", "floor"} <= cpu.keys():
        print(f"  CPU time bwrap / floor    = {cpu['bwrap'] / cpu['floor']:.2f}x")
    if {"agentbox", "srt"} <= cpu.keys():
        print(f"  CPU time srt / agentbox   = {cpu['srt'] / cpu['agentbox']:.1f}x")


if __name__ == "__main__":
    args = sys.argv[1:]
    cpu = {}
    if args[:1] == ["--cpu"] and len(args) >= 2:
        cpu = read_cpu(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    main(args, cpu)
