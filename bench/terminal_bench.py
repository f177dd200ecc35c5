"""Keystroke → echo round trip: agentbox's terminal WebSocket against websocketd relaying cat.

Run by bench/terminal_bench.sh, which starts both servers. One client (python3-websockets)
measures both the same way: send one byte, wait for it to come back, repeat; rounds alternate
between the two servers so that both see the same machine. Prints p50/p99/mean of each, in
microseconds, and agentbox's time as a multiple of websocketd's (≤ 1.0: agentbox not slower).

  agentbox:   WS /api/terminals/{id} (binary frame) → daemon → pty → `cat` in the account's
              login shell, tty raw and no echo → pty → daemon → binary frame
  websocketd: text message → websocketd → pipe → `cat` → pipe → websocketd → text message

With --floor-box / --floor-pty / --floor-pipe (build-bench/pty_relay), the same rounds also
measure the floor: a relay doing only the unavoidable work (read a frame, write it to cat, read
the echo, send it), with cat on a pty in a box (what a sandboxed web terminal must pay), on a pty
on the host (what any web terminal pays) and on pipes (what websocketd does).
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


# The paths measured, by the names printed.
AGENTBOX = "agentbox /api/terminals (pty, cat)"
WEBSOCKETD = "websocketd cat"
FLOOR_BOX = "floor: relay, cat on a pty in a box"
FLOOR_PTY = "floor: relay, cat on a pty"
FLOOR_PIPES = "floor: relay, cat on pipes"


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agentbox", required=True, help="HOST:PORT of agentbox serve")
    ap.add_argument("--key", required=True, help="its API key")
    ap.add_argument("--websocketd", required=True, help="HOST:PORT of websocketd relaying cat")
    ap.add_argument("--floor-box", help="HOST:PORT of pty_relay --box (cat on a pty in a box)")
    ap.add_argument("--floor-pty", help="HOST:PORT of pty_relay (cat on a pty)")
    ap.add_argument("--floor-pipe", help="HOST:PORT of pty_relay --pipe (cat on pipes)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per-round", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args()

    async def plain(addr):
        return await websockets.connect(f"ws://{addr}/", max_size=None, ping_interval=None, compression=None)

    user = "terminal-bench"
    tid, abx = await agentbox_terminal(args.agentbox, args.key, user)
    # name -> (connection, binary frames?, samples)
    paths = {AGENTBOX: (abx, True, []),
             WEBSOCKETD: (await plain(args.websocketd), False, [])}
    if args.floor_box:
        paths[FLOOR_BOX] = (await plain(args.floor_box), True, [])
    if args.floor_pty:
        paths[FLOOR_PTY] = (await plain(args.floor_pty), True, [])
    if args.floor_pipe:
        paths[FLOOR_PIPES] = (await plain(args.floor_pipe), True, [])
    try:
        for ws, binary, _ in paths.values():
            await round_trips(ws, args.warmup, binary)
        order = list(paths.values())
        for r in range(args.rounds):
            # Each round starts with a different path, so none always runs first or last.
            for ws, binary, samples in order[r % len(order):] + order[:r % len(order)]:
                samples += await round_trips(ws, args.per_round, binary)
    finally:
        for ws, _, _ in paths.values():
            await ws.close()
        delete_terminal(args.agentbox, args.key, user, tid)

    print("keystroke -> echo round trip, one client, one byte at a time:")
    for name, (_, _, samples) in paths.items():
        print(summary(name, samples))

    def ratio(label, a, b):
        sa, sb = paths[a][2], paths[b][2]
        print(f"  {label:<34} p50 {percentile(sa, 50) / percentile(sb, 50):.2f}x   "
              f"p99 {percentile(sa, 99) / percentile(sb, 99):.2f}x")

    ratio("agentbox / websocketd", AGENTBOX, WEBSOCKETD)
    print("    (target <= 1.0x)")
    if args.floor_box:
        ratio("floor in a box / websocketd", FLOOR_BOX, WEBSOCKETD)
        ratio("agentbox / floor in a box", AGENTBOX, FLOOR_BOX)
    if args.floor_pty:
        ratio("floor on a pty / websocketd", FLOOR_PTY, WEBSOCKETD)
        ratio("agentbox / floor on a pty", AGENTBOX, FLOOR_PTY)
    if args.floor_pipe:
        ratio("floor on pipes / websocketd", FLOOR_PIPES, WEBSOCKETD)
    if args.floor_pty and args.floor_pipe:
        ratio("floor on a pty / on pipes", FLOOR_PTY, FLOOR_PIPES)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
