"""The cost of counting (issue 36): the exec round trip of `true` and GET /files/list, p50, of this
build with metrics on ([metrics] listen, scraped every second) against a baseline build without
them (main's), in the same run, in alternating rounds. Target: <= 1.05x each.

    /usr/bin/python3 bench/metrics_bench.py CURRENT_AGENTBOX BASELINE_AGENTBOX [--rounds 5] [--n 300]
"""
import argparse
import http.client
import json
import os
import secrets
import statistics
import sys
import threading
import time

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Daemon, loadavg, percentile, wait_quiet  # noqa: E402


def p50s(daemon, key, n):
    """(exec round trip p50, /files/list p50) in ms, one user, keep-alive, after a warm-up.
    http.client sends a request's head and body in one write: httpx's two writes met the
    server's delayed ACK (Nagle), 40 ms a POST, more than everything measured here."""
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Authorization": f"Bearer {key}", "X-User-Id": "bench-metrics"}
    body = json.dumps({"command": "true"}).encode()

    def exec_true():
        conn.request("POST", "/execute?wait=10", body=body, headers=dict(headers, **{"Content-Type": "application/json"}))
        r = conn.getresponse()
        answer = json.loads(r.read())
        assert r.status == 200 and answer["status"] == "done", answer

    def list_home():
        conn.request("GET", "/files/list?directory=.", headers=headers)
        r = conn.getresponse()
        r.read()
        assert r.status == 200

    try:
        for _ in range(20):  # the box, the volume, the caller cache
            exec_true()
            list_home()
        times = {"exec": [], "list": []}
        for _ in range(n):
            for name, call in (("exec", exec_true), ("list", list_home)):
                t0 = time.perf_counter()
                call()
                times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        conn.close()
    return percentile(times["exec"], 50), percentile(times["list"], 50)


def scraper(url, stop):
    """Prometheus' part: one scrape a second while the current build is measured."""
    with httpx.Client(timeout=10) as c:
        while not stop.wait(1.0):
            r = c.get(f"{url}/metrics")
            assert r.status_code == 200 and "agentbox_http_requests_total" in r.text


def measure(binary, metrics_on, n, slot, extra_config="", who="metrics_bench"):
    """p50s of one daemon; metrics_on: a metrics listener scraped every second, and extra_config
    (TOML) beside it (bench/audit_bench.py: [audit])."""
    key = secrets.token_hex(24)
    config = '[metrics]\nlisten = "127.0.0.1:0"\n' + extra_config if metrics_on else ""
    d = Daemon(binary, key, config=config, slot=slot, who=who)
    stop = threading.Event()
    t = None
    try:
        if metrics_on:
            line = d.banner("metrics on ")
            assert line, "no metrics listener: is CURRENT a build with [metrics]?"
            t = threading.Thread(target=scraper, args=(line.split()[-1].rsplit("/", 1)[0], stop), daemon=True)
            t.start()
        return p50s(d, key, n)
    finally:
        stop.set()
        if t:
            t.join(5)
        d.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("current")
    ap.add_argument("baseline")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=300)
    a = ap.parse_args()
    print(f"metrics_bench: load before {wait_quiet('metrics_bench')} (1/5/15 min)", flush=True)
    ratios = {"exec": [], "list": []}
    for r in range(a.rounds):
        order = [("current", True), ("baseline", False)]
        if r % 2:
            order.reverse()
        got = {}
        for which, on in order:
            got[which] = measure(a.current if which == "current" else a.baseline, on, a.n, slot=r % 2)
        for i, name in enumerate(("exec", "list")):
            ratios[name].append(got["current"][i] / got["baseline"][i])
        print(f"round {r + 1}: exec p50 {got['current'][0]:.3f} vs {got['baseline'][0]:.3f} ms, "
              f"/files/list p50 {got['current'][1]:.3f} vs {got['baseline'][1]:.3f} ms "
              f"(current with metrics vs baseline)", flush=True)
    for name, label in (("exec", "exec round trip of `true`, p50"), ("list", "GET /files/list, p50")):
        print(f"{label}: current/baseline median {statistics.median(ratios[name]):.3f}x "
              f"(rounds {', '.join(f'{x:.2f}' for x in ratios[name])}); target <= 1.05x")
    print(f"metrics_bench: load after {loadavg()} (1/5/15 min)")


if __name__ == "__main__":
    main()
