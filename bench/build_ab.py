"""Two builds of agentbox side by side, in alternating rounds of one run: the exec round trip, the
terminal keystroke echo and a large download through an egress CONNECT tunnel. Run by
bench/build_ab.sh, which starts one daemon of each build (same config, own state and uid range)
and an origin serving bytes on the host's 127.0.0.1 (bait.test in both daemons' [hosts]).

Prints, per measure, the median of each build and the ratio current / baseline (for the tunnel
the ratio of times, so <= 1.05 means "at most 5% slower" everywhere).
"""
import argparse
import asyncio
import json
import statistics
import sys
import time
import urllib.request

import terminal_bench as tb


def call(addr, key, user, method, path, body=None, timeout=300):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{addr}{path}", method=method, data=data,
                                 headers={"Authorization": f"Bearer {key}", "X-User-Id": user,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def exec_round_trips(addr, key, user, n):
    """n POST /execute?wait=5 of `true` (pty, the default), each until done; ms each."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        p = call(addr, key, user, "POST", "/execute?wait=5", {"command": "true"})
        if p.get("status") != "done" or p.get("exit_code") != 0:
            raise SystemExit(f"exec did not finish cleanly: {p}")
        times.append((time.perf_counter() - start) * 1000)
    return times


def tunnel_seconds(addr, key, user, origin_port, nbytes):
    """Seconds curl in the box took to download nbytes through the egress proxy (CONNECT)."""
    cmd = (f"curl -sS -o /dev/null --proxytunnel -w '%{{http_code}} %{{size_download}} %{{time_total}}' "
           f"'http://bait.test:{origin_port}/big?n={nbytes}'")
    p = call(addr, key, user, "POST", "/execute?wait=300", {"command": cmd, "pty": False})
    out = "".join(c["data"] for c in p["output"] if c["type"] == "stdout").split()
    if p.get("exit_code") != 0 or len(out) != 3 or out[0] != "200" or int(out[1]) != nbytes:
        raise SystemExit(f"tunnel download failed: {p}")
    return float(out[2])


def line(name, unit, base, cur):
    mb, mc = statistics.median(base), statistics.median(cur)
    print(f"  {name:<38} baseline {mb:9.3f} {unit:<3} current {mc:9.3f} {unit:<3} current/baseline {mc / mb:.3f}x")


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="HOST:PORT of the baseline build's daemon")
    ap.add_argument("--current", required=True, help="HOST:PORT of the current build's daemon")
    ap.add_argument("--key", required=True, help="the API key both daemons share")
    ap.add_argument("--origin-port", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--execs", type=int, default=100, help="exec round trips per build and round")
    ap.add_argument("--keystrokes", type=int, default=200, help="keystrokes per build and round")
    ap.add_argument("--mib", type=int, default=1024, help="MiB per tunnel download")
    args = ap.parse_args()
    builds = {"baseline": args.baseline, "current": args.current}
    user = "build-ab"
    nbytes = args.mib << 20

    terms = {}
    for name, addr in builds.items():
        exec_round_trips(addr, args.key, user, 10)  # the box starts; the paths warm
        tunnel_seconds(addr, args.key, user, args.origin_port, 1 << 20)
        terms[name] = await tb.agentbox_terminal(addr, args.key, user)
        await tb.round_trips(terms[name][1], 100, True)

    execs = {name: [] for name in builds}     # per round: p50 ms
    keys = {name: [] for name in builds}      # per round: p50 us
    tunnels = {name: [] for name in builds}   # per round: seconds
    try:
        for r in range(args.rounds):
            order = list(builds.items())
            if r % 2:
                order.reverse()  # neither build always goes first
            for name, addr in order:
                execs[name].append(tb.percentile(exec_round_trips(addr, args.key, user, args.execs), 50))
                keys[name].append(tb.percentile(await tb.round_trips(terms[name][1], args.keystrokes, True), 50))
                tunnels[name].append(tunnel_seconds(addr, args.key, user, args.origin_port, nbytes))
            print(f"round {r + 1}: " + "   ".join(
                f"{n}: exec p50 {execs[n][-1]:.2f} ms, keystroke p50 {keys[n][-1]:.0f} us, "
                f"{args.mib} MiB tunnel {tunnels[n][-1]:.3f} s" for n in builds), flush=True)
    finally:
        for name, addr in builds.items():
            await terms[name][1].close()
            tb.delete_terminal(addr, args.key, user, terms[name][0])

    print(f"medians over {args.rounds} rounds (per round: p50 of {args.execs} execs, p50 of "
          f"{args.keystrokes} keystrokes, one {args.mib} MiB download):")
    line("exec round trip of `true`, p50", "ms", execs["baseline"], execs["current"])
    line("keystroke -> echo, p50", "us", keys["baseline"], keys["current"])
    line(f"{args.mib} MiB through a CONNECT tunnel", "s", tunnels["baseline"], tunnels["current"])


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
