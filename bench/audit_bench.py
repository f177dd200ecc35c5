"""The cost of the audit trail (issue 36): the exec round trip of `true` and GET /files/list, p50,
of this build with `[audit] level = "METADATA"` and metrics on ([metrics] listen, scraped every
second) against the same binary with both off (no audit, no metrics listener: the request
counters are always counted), or against BASELINE (main's build) when given, in the same run,
alternating rounds. Target: <= 1.05x each.

    /usr/bin/python3 bench/audit_bench.py CURRENT_AGENTBOX [BASELINE_AGENTBOX] [--rounds 5] [--n 300]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import loadavg, wait_quiet  # noqa: E402
from metrics_bench import measure as metrics_measure  # noqa: E402


def measure(binary, on, n, slot):
    return metrics_measure(binary, on, n, slot, extra_config='[audit]\nlevel = "METADATA"\n', who="audit_bench")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("current")
    ap.add_argument("baseline", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=300)
    a = ap.parse_args()
    baseline = a.baseline or a.current
    print(f"audit_bench: load before {wait_quiet('audit_bench')} (1/5/15 min)", flush=True)
    ratios = {"exec": [], "list": []}
    for r in range(a.rounds):
        order = [("on", a.current, True), ("off", baseline, False)]
        if r % 2:
            order.reverse()
        got = {which: measure(binary, on, a.n, slot=r % 2) for which, binary, on in order}
        for i, name in enumerate(("exec", "list")):
            ratios[name].append(got["on"][i] / got["off"][i])
        print(f"round {r + 1}: exec p50 {got['on'][0]:.3f} vs {got['off'][0]:.3f} ms, "
              f"/files/list p50 {got['on'][1]:.3f} vs {got['off'][1]:.3f} ms "
              f"(audit METADATA + metrics vs both off)", flush=True)
    for name, label in (("exec", "exec round trip of `true`, p50"), ("list", "GET /files/list, p50")):
        print(f"{label}: on/off median {statistics.median(ratios[name]):.3f}x "
              f"(rounds {', '.join(f'{x:.2f}' for x in ratios[name])}); target <= 1.05x")
    print(f"audit_bench: load after {loadavg()} (1/5/15 min)")


if __name__ == "__main__":
    main()
