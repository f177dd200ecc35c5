"""A `tools/call` of run_command over /mcp against the same command through
`POST /execute?wait=`, in the same run against one daemon (issue 34): the protocol's cost.

Each round runs `echo one` N times through each way, alternating ways every call so load drifts
hit both alike, each client on its own keep-alive connection as the same user and chat. Prints
p50/p90 per way and the ratio of the medians. Target: MCP p50 <= 1.2x the REST p50."""
import argparse
import os
import statistics
import sys
import time
import uuid

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Daemon, loadavg, percentile, wait_quiet  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("agentbox")
    ap.add_argument("--calls", type=int, default=300, help="calls per way per round")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    key = uuid.uuid4().hex
    user = f"bench-{uuid.uuid4().hex[:8]}"
    load = wait_quiet("mcp_bench")
    d = Daemon(a.agentbox, key, who="mcp_bench")
    try:
        h = {"Authorization": f"Bearer {key}", "X-User-Id": user, "X-Session-Id": "bench"}
        rest = httpx.Client(base_url=d.url, headers=h, timeout=60)
        mcp = httpx.Client(base_url=d.url, headers={**h, "Accept": "application/json, text/event-stream"},
                           timeout=60)
        r = mcp.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        mcp.headers["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]

        def via_rest():
            r = rest.post("/execute", params={"wait": 10}, json={"command": "echo one"})
            assert r.status_code == 200 and r.json()["status"] == "done", r.text

        def via_mcp(i=[0]):
            i[0] += 1
            r = mcp.post("/mcp", json={"jsonrpc": "2.0", "id": i[0], "method": "tools/call", "params": {
                "name": "run_command", "arguments": {"command": "echo one", "wait": 10}}})
            res = r.json()["result"]
            assert not res.get("isError") and res["structuredContent"]["status"] == "done", r.text

        for _ in range(20):  # the box and both connections warm
            via_rest()
            via_mcp()
        print(f"mcp_bench: load before {load}; {a.rounds} rounds of {a.calls} calls per way", flush=True)
        ratios = []
        for n in range(a.rounds):
            times = {"rest": [], "mcp": []}
            for _ in range(a.calls):
                for name, fn in (("rest", via_rest), ("mcp", via_mcp)):
                    t = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t)
            p50 = {k: statistics.median(v) for k, v in times.items()}
            ratios.append(p50["mcp"] / p50["rest"])
            print(f"round {n + 1}: POST /execute?wait= p50 {p50['rest'] * 1e3:.2f} ms "
                  f"p90 {percentile(times['rest'], 90) * 1e3:.2f} ms | MCP tools/call p50 {p50['mcp'] * 1e3:.2f} ms "
                  f"p90 {percentile(times['mcp'], 90) * 1e3:.2f} ms | ratio {ratios[-1]:.3f}", flush=True)
        print(f"mcp_bench: MCP / REST p50 ratio, median of rounds: {statistics.median(ratios):.3f} "
              f"(target <= 1.2); load after {loadavg()}")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
