"""What the scale-out router costs, measured against the same router in front of a static upstream.

Run by bench/cluster_bench.sh (which builds and checks the tools). In one run, alternating rounds:

  latency     wrk, 1 connection, keep-alive: GET /files/cwd from a node directly and through the
              router (`agentbox cluster nginx-conf`), and a static nginx `return 200` directly and
              through a router made the same way. Added = via - direct, at p50; the ratio of
              agentbox's added time to the static upstream's (target <= 1.2). The same for
              bench/hop_upstream.cpp, the floor of an answer made on a thread other than the one
              that read the request (as agentbox's file routes are: off the io threads).
  throughput  wrk, 32 connections: requests/s via / direct, for agentbox and for the static
              upstream; the ratio of the two (target >= 0.9).
  keystrokes  a terminal's keystroke -> echo round trip (bench/terminal_bench.py's client) from the
              node directly and through the router, and websocketd relaying cat directly and
              through a router made the same way: p50 added by nginx, agentbox / websocketd
              (target <= 1.2).
  plan        `agentbox cluster plan` of 100,000 accounts on 16 nodes against 17 (target <= 1 s).
  failover    SIGKILL of the node while a client sends a request every ms through the router:
              time to the first 503 (target <= 50 ms); a restart: time from the node's
              "serving" line to the first 200 through the router (target <= 100 ms).
  others      two nodes behind one router: a user of n1 sends requests one after another through
              the router for a few seconds, then n2 is SIGKILLed (its user asking all along, and
              getting 503s) and the same goes on as long again: the n1 user's errors (target 0)
              and p99 while n2 is down / before (target <= 1.2).

--only NAME[,NAME] runs some of them (latency and throughput go together as "router").

Prints a table of medians.
"""
import argparse
import http.client
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"nothing listens on {port}")


def to_us(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    return float(m.group(1)) * {"us": 1, "ms": 1000, "s": 1e6}[m.group(2)]


def wrk(url, headers, connections, seconds):
    cmd = ["wrk", "-t", "1" if connections == 1 else "2", "-c", str(connections), "-d", f"{seconds}s", "--latency"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout
    p50 = to_us(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    if re.search(r"Non-2xx", out):
        raise RuntimeError(f"wrk saw errors from {url}:\n{out}")
    return p50, rps


class Node:
    def __init__(self, agentbox, work, cluster_file, port, key, name="n1", uid_offset=0):
        work = os.path.join(work, name)
        os.makedirs(work, exist_ok=True)
        self.cmd = [agentbox, "serve", "--listen", f"127.0.0.1:{port}", "--state", os.path.join(work, "state"),
                    "--config", os.path.join(work, "serve.toml"), "--cluster", cluster_file, "--node", name]
        with open(os.path.join(work, "serve.toml"), "w") as f:
            f.write('[accounts]\ndisk = "0"\n')
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
        self.env["AGENTBOX_API_KEY"] = key
        self.env["AGENTBOX_UID_BASE"] = str(int(os.environ["AGENTBOX_UID_BASE"]) + uid_offset)
        self.proc = None

    def start(self):
        """Starts the node; returns the monotonic time its "serving" line appeared."""
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        seen = []
        for line in self.proc.stdout:
            seen.append(line)
            if " serving on " in line:
                serving = time.monotonic()
                # Its log goes on: drained, so that a full pipe never stalls the node.
                threading.Thread(target=self.proc.stdout.read, daemon=True).start()
                return serving
        raise RuntimeError("the node did not start:\n" + "".join(seen[-20:]))

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


def router(agentbox, work, name, cluster_file):
    d = os.path.join(work, name)
    port = free_port()
    subprocess.run([agentbox, "cluster", "nginx-conf", "--cluster", cluster_file, "--out", d,
                    "--listen", f"127.0.0.1:{port}"], check=True, capture_output=True)
    p = subprocess.Popen(["nginx", "-e", "stderr", "-p", d, "-c", "nginx.conf", "-g", "daemon off;"],
                         stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, port


def static_upstream(work):
    d = os.path.join(work, "static")
    os.makedirs(d)
    port = free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"""pid nginx.pid; error_log stderr warn; worker_processes 1;
events {{ worker_connections 1024; }}
http {{ access_log off; keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port};
    location / {{ default_type application/json; return 200 '{{"cwd":"/home/bench"}}'; }} }} }}
""")
    p = subprocess.Popen(["nginx", "-e", "stderr", "-p", d, "-c", "nginx.conf", "-g", "daemon off;"],
                         stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, port


def cluster_file(work, name, *ports):
    path = os.path.join(work, f"{name}.toml")
    with open(path, "w") as f:
        for i, port in enumerate(ports):
            f.write(f'[[node]]\nname = "n{i + 1}"\nserver = "127.0.0.1:{port}"\n')
    return path


def status(url, headers):
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def failover(node, router_port, headers):
    url = f"http://127.0.0.1:{router_port}/files/cwd"
    assert status(url, headers) == 200
    t_kill = time.monotonic()
    node.kill()
    while status(url, headers) != 503:
        time.sleep(0.001)
    to_503 = (time.monotonic() - t_kill) * 1000
    # Restart: the node's own start time is not the router's; count from its "serving" line.
    serving = node.start()
    while status(url, headers) != 200:
        time.sleep(0.001)
    to_200 = (time.monotonic() - serving) * 1000
    return to_503, to_200


def others_during_kill(agentbox, work, key, rounds, seconds):
    """p99 of an n1 user's requests through the router before and while n2 is down; errors."""
    ports = [free_port(), free_port()]
    cfile = cluster_file(work, "two", *ports)
    nodes = [Node(agentbox, os.path.join(work, "two"), cfile, p, key, f"n{i + 1}", (i + 1) * 65536)
             for i, p in enumerate(ports)]
    for n in nodes:
        n.start()
    rproc, rport = router(agentbox, work, "router-two", cfile)
    ids = [f"user-{i}" for i in range(64)]
    owners = subprocess.run([agentbox, "cluster", "owner", "--cluster", cfile, *ids], capture_output=True, text=True,
                            check=True).stdout.split("\n")
    other = next(u for u, o in zip(ids, owners) if o.split()[:1] == ["n1"])
    victim = next(u for u, o in zip(ids, owners) if o.split()[:1] == ["n2"])
    before, during, errors = [], [], []
    try:
        for _ in range(rounds):
            for u in (other, victim):
                assert status(f"http://127.0.0.1:{rport}/files/cwd", {"Authorization": f"Bearer {key}",
                                                                       "X-User-Id": u}) == 200
            stop = threading.Event()
            victim_statuses = []

            def victim_asks():
                h = {"Authorization": f"Bearer {key}", "X-User-Id": victim}
                while not stop.is_set():
                    victim_statuses.append(status(f"http://127.0.0.1:{rport}/files/cwd", h))
                    time.sleep(0.001)

            asker = threading.Thread(target=victim_asks)
            asker.start()
            conn = http.client.HTTPConnection("127.0.0.1", rport, timeout=10)
            h = {"Authorization": f"Bearer {key}", "X-User-Id": other}

            def timed(until, into):
                while time.monotonic() < until:
                    t0 = time.perf_counter()
                    try:
                        conn.request("GET", "/files/cwd", headers=h)
                        r = conn.getresponse()
                        r.read()
                        if r.status != 200:
                            errors.append(r.status)
                    except OSError as e:
                        errors.append(str(e))
                        conn.close()
                    into.append((time.perf_counter() - t0) * 1e6)

            timed(time.monotonic() + seconds, before)
            nodes[1].kill()
            timed(time.monotonic() + seconds, during)
            stop.set()
            asker.join()
            conn.close()
            assert 503 in victim_statuses, "the victim never saw the 503"
            nodes[1].start()
    finally:
        rproc.send_signal(signal.SIGQUIT)
        rproc.wait(10)
        for n in nodes:
            n.stop()

    def p99(v):
        return statistics.quantiles(v, n=100)[98]
    return p99(before), p99(during), len(before), len(during), errors


def plan_time(agentbox, work, runs):
    """Median seconds of `cluster plan` for 100,000 accounts held where 16 nodes' ring puts them,
    against the ring with a 17th node."""
    files = {}
    for n in (16, 17):
        files[n] = os.path.join(work, f"ring{n}.toml")
        with open(files[n], "w") as f:
            f.write("".join(f'[[node]]\nname = "n{i}"\nserver = "agentbox-{i}.agentbox.ab.svc:8000"\n'
                            for i in range(n)))
    users = [f"{i:08x}-{secrets.token_hex(12)}" for i in range(100000)]
    held = []
    for i in range(0, len(users), 5000):
        out = subprocess.run([agentbox, "cluster", "owner", "--cluster", files[16], *users[i:i + 5000]],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        held += [f"{line.split()[2]}\t{line.split()[0]}" for line in out if line]
    accounts = os.path.join(work, "accounts.tsv")
    with open(accounts, "w") as f:
        f.write("\n".join(held) + "\n")
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        last = subprocess.run([agentbox, "cluster", "plan", "--cluster", files[16], "--to", files[17],
                               "--accounts", accounts], capture_output=True, text=True, check=True).stdout
        times.append(time.monotonic() - t0)
    return statistics.median(times), last.splitlines()[-1]


def keystrokes(node_port, via_node, wsd_port, via_wsd, key, rounds, per_round):
    """Round-trip samples (us) of the four paths, rounds alternating between them."""
    import asyncio
    import websockets
    import terminal_bench as tb

    async def run():
        user = "cluster-bench-terminal"
        # A terminal of its own for each path, made and attached through that path.
        tid, direct = await tb.agentbox_terminal(f"127.0.0.1:{node_port}", key, user)
        tid_via, via = await tb.agentbox_terminal(f"127.0.0.1:{via_node}", key, user)
        wsd = await websockets.connect(f"ws://127.0.0.1:{wsd_port}/", ping_interval=None, compression=None)
        wsd_via = await websockets.connect(f"ws://127.0.0.1:{via_wsd}/api/terminals/x", ping_interval=None,
                                           compression=None)
        paths = {"agentbox direct": (direct, True), "agentbox via nginx": (via, True),
                 "websocketd direct": (wsd, False), "websocketd via nginx": (wsd_via, False)}
        samples = {k: [] for k in paths}
        try:
            for ws, binary in paths.values():
                await tb.round_trips(ws, 50, binary)  # warm-up
            for r in range(rounds):
                for name, (ws, binary) in (paths.items() if r % 2 == 0 else reversed(paths.items())):
                    samples[name] += await tb.round_trips(ws, per_round, binary)
        finally:
            for ws, _ in paths.values():
                await ws.close()
            tb.delete_terminal(f"127.0.0.1:{node_port}", key, user, tid)
            tb.delete_terminal(f"127.0.0.1:{node_port}", key, user, tid_via)
        return samples

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return asyncio.run(run())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agentbox", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--only", default="router,keystrokes,plan,failover,others")
    a = ap.parse_args()
    only = set(a.only.split(","))

    work = tempfile.mkdtemp(prefix="agentbox-clusterbench-")
    os.chmod(work, 0o755)
    key = secrets.token_hex(16)
    node_port = free_port()
    node_cluster = cluster_file(work, "node", node_port)
    node = Node(a.agentbox, work, node_cluster, node_port, key)
    procs = []
    headers = {"Authorization": f"Bearer {key}", "X-User-Id": "bench"}
    try:
        node.start()
        r1, via_node = router(a.agentbox, work, "router-node", node_cluster)
        procs.append(r1)
        assert status(f"http://127.0.0.1:{via_node}/files/cwd", headers) == 200  # the account and its box exist
        if "router" in only:
            router_rounds(a, work, node_port, via_node, headers, procs)
        if "keystrokes" in only:
            wsd_port = free_port()
            wsd = subprocess.Popen(["websocketd", "--address=127.0.0.1", f"--port={wsd_port}", "--binary=false", "cat"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(wsd)
            wait_port(wsd_port)
            r3, via_wsd = router(a.agentbox, work, "router-websocketd", cluster_file(work, "websocketd", wsd_port))
            procs.append(r3)
            ks = keystrokes(node_port, via_node, wsd_port, via_wsd, key, 2 * a.rounds, 200)
            ks50 = {k: statistics.median(v) for k, v in ks.items()}
            for who in ("agentbox", "websocketd"):
                d, v = ks50[f"{who} direct"], ks50[f"{who} via nginx"]
                print(f"{who + ' keystroke echo p50 (us)':34}{d:12.0f}{v:12.0f}{v - d:10.0f}")
            added = {w: ks50[f"{w} via nginx"] - ks50[f"{w} direct"] for w in ("agentbox", "websocketd")}
            print(f"keystroke p50 added by nginx, agentbox / websocketd: "
                  f"{added['agentbox'] / added['websocketd']:.2f}x (target <= 1.2x)")
        if "plan" in only:
            plan_s, plan_said = plan_time(a.agentbox, work, a.rounds)
            print(f"cluster plan, 100,000 accounts, 16 -> 17 nodes: median {plan_s:.3f} s (target <= 1 s): {plan_said}")
        if "failover" in only:
            fo = [failover(node, via_node, headers) for _ in range(a.rounds)]
            print(f"SIGKILL -> first 503 through nginx: median {statistics.median(f[0] for f in fo):.1f} ms "
                  f"(max {max(f[0] for f in fo):.1f}; target <= 50 ms)")
            print(f"restart: serving -> first 200 through nginx: median {statistics.median(f[1] for f in fo):.1f} ms "
                  f"(max {max(f[1] for f in fo):.1f}; target <= 100 ms)")
        if "others" in only:
            before, during, nb, nd, errors = others_during_kill(a.agentbox, work, key, a.rounds, a.seconds)
            print(f"another node's user while n2 is SIGKILLed: p99 {before:.0f} us before ({nb} requests), "
                  f"{during:.0f} us while n2 is down ({nd}): {during / before:.2f}x (target <= 1.2x); "
                  f"errors: {len(errors)} {errors[:3]}")
    finally:
        for p in procs:
            p.send_signal(signal.SIGQUIT)
        node.stop()
        for p in procs:
            p.wait(10)
        subprocess.run(["rm", "-rf", work])


def router_rounds(a, work, node_port, via_node, headers, procs):
    static, static_port = static_upstream(work)
    procs.append(static)
    r2, via_static = router(a.agentbox, work, "router-static", cluster_file(work, "static", static_port))
    procs.append(r2)
    hop_port = free_port()
    procs.append(subprocess.Popen([os.path.join(os.path.dirname(a.agentbox), "hop_upstream"), str(hop_port)]))
    wait_port(hop_port)
    r4, via_hop = router(a.agentbox, work, "router-hop", cluster_file(work, "hop", hop_port))
    procs.append(r4)
    targets = {"agentbox direct": node_port, "agentbox via nginx": via_node,
               "static direct": static_port, "static via nginx": via_static,
               "hop direct": hop_port, "hop via nginx": via_hop}
    for port in targets.values():
        assert status(f"http://127.0.0.1:{port}/files/cwd", headers) == 200
    lat = {k: [] for k in targets}
    rps = {k: [] for k in targets}
    for r in range(a.rounds):
        for name, port in targets.items():
            lat[name].append(wrk(f"http://127.0.0.1:{port}/files/cwd", headers, 1, a.seconds)[0])
            rps[name].append(wrk(f"http://127.0.0.1:{port}/files/cwd", headers, 32, a.seconds)[1])
        print(f"round {r + 1}: " + ", ".join(f"{k} p50 {lat[k][-1]:.0f} us / {rps[k][-1]:.0f} rps" for k in targets),
              file=sys.stderr)
    med = {k: statistics.median(v) for k, v in lat.items()}
    thr = {k: statistics.median(v) for k, v in rps.items()}
    added_ab = med["agentbox via nginx"] - med["agentbox direct"]
    added_st = med["static via nginx"] - med["static direct"]
    print(f"{'':34}{'direct':>12}{'via nginx':>12}{'added':>10}")
    added_hop = med["hop via nginx"] - med["hop direct"]
    for who in ("agentbox", "static", "hop"):
        d, v = med[f"{who} direct"], med[f"{who} via nginx"]
        print(f"{who + ' p50 latency (us)':34}{d:12.0f}{v:12.0f}{v - d:10.0f}")
    print(f"added by nginx, agentbox / static upstream: {added_ab / added_st:.2f}x (target <= 1.2x)")
    print(f"added by nginx, hop floor / static upstream: {added_hop / added_st:.2f}x; "
          f"agentbox / hop floor: {added_ab / added_hop:.2f}x")
    for who in ("agentbox", "static"):
        print(f"{who + ' 32-client throughput (req/s)':34}{thr[who + ' direct']:12.0f}{thr[who + ' via nginx']:12.0f}"
              f"{thr[who + ' via nginx'] / thr[who + ' direct']:9.2f}x")
    ratio = (thr["agentbox via nginx"] / thr["agentbox direct"]) / (thr["static via nginx"] / thr["static direct"])
    print(f"via/direct throughput, agentbox / static upstream: {ratio:.2f}x (target >= 0.9x)")


if __name__ == "__main__":
    main()
