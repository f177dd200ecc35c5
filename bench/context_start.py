"""The first command of a new chat in a profile with isolation = "context" (a new box, network
namespace and workspace for a known user) against the first command of a known user whose box
has stopped, in the same run against one daemon (issue 35). Target: the new chat's p50 <= 1.5x
the stopped box's p50: a context costs next to nothing beyond the box start itself.

Boxes stop after [accounts] idle_timeout = 1 s; each round waits for that, then times one
request of each kind (`POST /execute?wait=10` of `true`), alternating which goes first."""
import argparse
import os
import statistics
import sys
import time
import uuid

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Daemon, loadavg, percentile, wait_quiet  # noqa: E402

CONFIG = """
[accounts]
idle_timeout = 1
[profiles.chats]
isolation = "context"
"""
IDLE_WAIT = 4.0  # idle_timeout and the idle check's period, with room


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("agentbox")
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()

    key = uuid.uuid4().hex
    user = f"bench-{uuid.uuid4().hex[:8]}"
    load = wait_quiet("context_start")
    d = Daemon(a.agentbox, key, config=CONFIG, who="context_start")
    try:
        h = {"Authorization": f"Bearer {key}", "X-User-Id": user, "X-Session-Id": "bench"}
        plain = httpx.Client(base_url=d.url, headers=h, timeout=60)
        chats = httpx.Client(base_url=f"{d.url}/p/chats", headers=h, timeout=60)

        def first(client, headers):
            t = time.perf_counter()
            r = client.post("/execute", params={"wait": 10}, json={"command": "true"}, headers=headers)
            elapsed = time.perf_counter() - t
            assert r.status_code == 200 and r.json()["status"] == "done", r.text
            return elapsed

        first(plain, {})  # the account, its volume and its home exist: a known user
        first(chats, {"X-Terminal-Context-Id": "chat:warm"})
        print(f"context_start: load before {load}; {a.rounds} rounds", flush=True)
        stopped, new_chat = [], []
        for n in range(a.rounds):
            time.sleep(IDLE_WAIT)  # every box of the user has stopped
            ways = [("stopped", lambda: first(plain, {})),
                    ("chat", lambda: first(chats, {"X-Terminal-Context-Id": f"chat:{uuid.uuid4().hex}"}))]
            if n % 2:
                ways.reverse()
            for name, fn in ways:
                (stopped if name == "stopped" else new_chat).append(fn())
        s50, c50 = statistics.median(stopped), statistics.median(new_chat)
        print(f"known user, box stopped: p50 {s50 * 1e3:.1f} ms  p90 {percentile(stopped, 90) * 1e3:.1f} ms")
        print(f"new chat (context box):  p50 {c50 * 1e3:.1f} ms  p90 {percentile(new_chat, 90) * 1e3:.1f} ms")
        print(f"ratio (new chat / stopped box) p50: {c50 / s50:.2f}x (target <= 1.5x); load after {loadavg()}")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
