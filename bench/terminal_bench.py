"""Keystroke → echo round trip: agentbox's terminal WebSocket against websocketd relaying cat.

Run by bench/terminal_bench.sh, which starts both servers. One client (python3-websockets)
measures both the same way: send one byte, wait for it to come back, repeat; rounds alternate
between the two servers so that both see the same machine. Prints p50/p99/mean of each, in
microseconds, and agentbox's time as a multiple of websocketd's (≤ 1.0: agentbox not slower).

  agentbox:   WS /api/terminals/{id} (binary frame) → daemon → pty → `cat` in the account's
              login shell, tty raw and no echo → pty → daemon → binary frame
  websocketd: text message → websocketd → pipe → `cat` → pipe → websocketd → text message
"""
import argparse
import asyncio
import json
import statistics
import sys
import time
import urllib.request

import websockets


def percentile(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def create_terminal(addr, key, user):
    req = urllib.request.Request(f"http://{addr}/api/terminals", method="POST",
                                 headers={"Authorization": f"Bearer {key}", "X-User-Id": user})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def delete_terminal(addr, key, user, tid):
    req = urllib.request.Request(f"http://{addr}/api/terminals/{tid}", method="DELETE",
                                 headers={"Authorization": f"Bearer {key}", "X-User-Id": user})
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()


async def read_until(ws, needle, timeout=30):
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        msg = await asyncio.wait_for(ws.recv(), deadline - time.monotonic())
        seen += msg if isinstance(msg, bytes) else msg.encode()
    return seen


async def agentbox_terminal(addr, key, user):
    t = create_terminal(addr, key, user)
    ws = await websockets.connect(f"ws://{addr}/api/terminals/{t['id']}?user_id={user}", max_size=None,
                                  ping_interval=None, compression=None)
    await ws.send(json.dumps({"type": "auth", "token": key}))
    # printf's output, not the shell's echo of the typed line, says that cat is about to run.
    await ws.send(b"stty raw -echo; printf 'R%sY\\n' EAD; exec cat\n")
    await read_until(ws, b"READY")
    return t["id"], ws


async def round_trips(ws, n, binary):
    """n round trips of one byte; returns their times in microseconds."""
    times = []
    for i in range(n):
        ch = chr(ord("a") + i % 26)
        payload = ch.encode() if binary else ch
        start = time.perf_counter_ns()
        await ws.send(payload)
        got = b"" if binary else ""
        while not got:
            got = await ws.recv()
            if not binary:
                got = got.rstrip("\n")
        end = time.perf_counter_ns()
        if got != payload:
            raise SystemExit(f"echo mismatch: sent {payload!r}, got {got!r}")
        times.append((end - start) / 1000)
    return times


def summary(name, samples):
    return (f"  {name:<34} p50 {percentile(samples, 50):8.1f} us   p99 {percentile(samples, 99):8.1f} us   "
            f"mean {statistics.fmean(samples):8.1f} us   ({len(samples)} round trips)")


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agentbox", required=True, help="HOST:PORT of agentbox serve")
    ap.add_argument("--key", required=True, help="its API key")
    ap.add_argument("--websocketd", required=True, help="HOST:PORT of websocketd relaying cat")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per-round", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args()

    user = "terminal-bench"
    tid, abx = await agentbox_terminal(args.agentbox, args.key, user)
    wsd = await websockets.connect(f"ws://{args.websocketd}/", max_size=None, ping_interval=None, compression=None)
    try:
        await round_trips(abx, args.warmup, True)
        await round_trips(wsd, args.warmup, False)
        a, w = [], []
        for r in range(args.rounds):
            if r % 2 == 0:
                a += await round_trips(abx, args.per_round, True)
                w += await round_trips(wsd, args.per_round, False)
            else:
                w += await round_trips(wsd, args.per_round, False)
                a += await round_trips(abx, args.per_round, True)
    finally:
        await abx.close()
        await wsd.close()
        delete_terminal(args.agentbox, args.key, user, tid)

    print("keystroke -> echo round trip, one client, one byte at a time:")
    print(summary("agentbox /api/terminals (pty, cat)", a))
    print(summary("websocketd cat", w))
    p50 = percentile(a, 50) / percentile(w, 50)
    p99 = percentile(a, 99) / percentile(w, 99)
    print(f"  ratio agentbox/websocketd: p50 {p50:.2f}x   p99 {p99:.2f}x   (target <= 1.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
