"""Scale-out: three nodes behind Debian's nginx (`agentbox cluster nginx-conf`), each user on one
node, the one that nginx's ring and every node's own copy of it agree on (DESIGN §8,
docs/SCALING.md).

Loopback only: n1-n3 and the router listen on free ports of 127.0.0.1; each node has its own
state and uid range. Quotas are off ([accounts] disk = "0"): hundreds of accounts, and the
loop volumes are not what is tested here.
"""
import asyncio
import concurrent.futures
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid

import httpx
import pytest
import websockets

from conftest import Daemon, agentbox_bin, new_workdir, remove_workdir, run, sh, text_of

NODES = ("n1", "n2", "n3")
CONFIG = '[accounts]\ndisk = "0"\n'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.02)


def agentbox(*args, check=True, env=None):
    return subprocess.run([agentbox_bin(), *args], capture_output=True, text=True, check=check, timeout=120,
                          env=None if env is None else {**os.environ, **env})


class Router:
    """Debian's nginx with the config `agentbox cluster nginx-conf` writes."""

    def __init__(self, cluster_file, workdir, *more):
        self.dir = os.path.join(workdir, f"router-{secrets.token_hex(3)}")
        self.port = free_port()
        agentbox("cluster", "nginx-conf", "--cluster", cluster_file, "--out", self.dir,
                 "--listen", f"127.0.0.1:{self.port}", *more)
        self.proc = subprocess.Popen(["nginx", "-e", "stderr", "-p", self.dir, "-c", "nginx.conf",
                                      "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "err.log"), "wb"))
        try:
            wait_listening(self.port)
        except AssertionError:
            raise AssertionError(open(os.path.join(self.dir, "err.log")).read())
        self.url = f"http://127.0.0.1:{self.port}"

    def workers(self):
        """nginx's worker processes now: pid -> title ("... is shutting down" once replaced)."""
        titles = {}
        for pid in subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                  text=True).stdout.split():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    titles[pid] = f.read().decode(errors="replace")
            except FileNotFoundError:
                pass  # exited meanwhile
        return titles

    def wait_old_workers_gone(self, timeout=15):
        """After a reload: until no worker of the old configuration is left (each closes its idle
        keep-alive connections as it goes, so a request sent on one meanwhile can be cut)."""
        deadline = time.monotonic() + timeout
        while True:
            titles = self.workers()
            if not any("shutting down" in t for t in titles.values()):
                return
            assert time.monotonic() < deadline, titles
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Cluster:
    """Three nodes (own state, disjoint uid ranges, one shared admin key) and a router. configs
    gives a node a config of its own."""

    def __init__(self, workdir, config=CONFIG, configs=None):
        self.workdir = workdir
        self.config = config  # every node's config.toml, unless configs names one
        self.key = secrets.token_hex(16)
        self.admin_key = secrets.token_hex(16)  # the nodes of a cluster share one admin key
        self.ports = {n: free_port() for n in NODES}
        self.file = os.path.join(workdir, "cluster.toml")
        with open(self.file, "w") as f:
            for n in NODES:
                f.write(f'[[node]]\nname = "{n}"\nserver = "127.0.0.1:{self.ports[n]}"\n\n')
        self.nodes = {}
        for n in NODES:
            self.add_node(n, start=False, config=(configs or {}).get(n, config))
        for d in self.nodes.values():
            d.start()
        self.router = Router(self.file, workdir)

    def add_node(self, name, start=True, config=None):
        os.makedirs(os.path.join(self.workdir, name))
        d = Daemon(os.path.join(self.workdir, name), config_text=config or self.config, api_key=self.key, lifetime=1200,
                   listen=f"127.0.0.1:{self.ports[name]}", args=["--cluster", self.file, "--node", name],
                   env={"AGENTBOX_ADMIN_KEY": self.admin_key})
        self.nodes[name] = d
        if start:
            d.start()
        return d

    def client(self, user=None, *, via=None, node=None, **kw):
        """A client through the router, or `via` another URL, or straight to `node`."""
        headers = {"Authorization": f"Bearer {self.key}"}
        if user is not None:
            headers["X-User-Id"] = user.encode() if isinstance(user, str) else user
        base = f"http://127.0.0.1:{self.ports[node]}" if node else via or self.router.url
        return httpx.Client(base_url=base, headers=headers, timeout=kw.pop("timeout", 60), **kw)

    def admin(self, node):
        """A client of node's admin API."""
        return httpx.Client(base_url=f"http://127.0.0.1:{self.ports[node]}",
                            headers={"Authorization": f"Bearer {self.admin_key}"}, timeout=120)

    def accounts(self, node):
        """The accounts node holds: {user id: account}."""
        with self.admin(node) as a:
            r = a.get("/admin/accounts")
            assert r.status_code == 200, r.text
            return {x["user"]: x for x in r.json()["accounts"]}

    def accounts_on(self, node):
        return set(self.accounts(node))

    def owners(self, users):
        """`agentbox cluster owner` for each user: {user: node}."""
        out = agentbox("cluster", "owner", "--cluster", self.file, *users).stdout.splitlines()
        assert len(out) == len(users)
        if len(users) == 1:
            return {users[0]: out[0].split()[0]}
        return {u: line.split()[0] for u, line in zip(users, out)}

    def stop(self):
        self.router.stop()
        for d in self.nodes.values():
            if d.proc and d.proc.poll() is None:
                os.kill(d.pid, signal.SIGCONT)
            d.stop()


@contextlib.contextmanager
def running_cluster(tag, kind=None, **options):
    """Three nodes and a router (a Cluster, or `kind`, a subclass), stopped and removed afterwards
    (module fixtures here and in test_cluster_ops.py and test_cluster_moves.py)."""
    workdir = new_workdir(tag)
    os.chmod(workdir, 0o755)  # nginx's workers (nobody) read nothing here, but traverse to their temp dirs
    c = (kind or Cluster)(workdir, **options)
    try:
        yield c
    finally:
        c.stop()
        for d in c.nodes.values():
            remove_workdir(d.workdir)
        remove_workdir(workdir)


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("cluster") as c:
        yield c


async def type_until(ws, keys, seen_text):
    """Types keys into a terminal WebSocket and reads until seen_text shows."""
    await ws.send(keys)
    seen = b""
    while seen_text not in seen:
        seen += await asyncio.wait_for(ws.recv(), 15)


def odd_ids():
    """Ids a router must hash and decode exactly: reserved characters, a space, UTF-8, and case
    twins (nginx's map keys are case-insensitive; ids are not)."""
    base = ["alice@example.org", "a+b@example.org", "with space", "Ünïcødé-用户", "percent%41", "semi;colon",
            "slash/and?query", "Case.Twin", "case.twin", "CASE.TWIN"]
    return base + [f"{uuid.uuid4()}" for _ in range(290)]


def node_of(response):
    return response.headers.get("x-agentbox-node")


def test_nginx_and_every_node_agree_on_the_owner_of_10000_users(cluster):
    users = odd_ids()[:10] + [str(uuid.uuid4()) for _ in range(9990)]
    expected = {}
    for i in range(0, len(users), 2000):
        expected.update(cluster.owners(users[i:i + 2000]))

    def chosen(chunk):
        with cluster.client() as c:
            return [(u, node_of(c.get("/health", headers={"X-User-Id": u.encode()}))) for u in chunk]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        seen = dict(p for part in pool.map(chosen, [users[i::8] for i in range(8)]) for p in part)
    wrong = [(u, seen[u], expected[u]) for u in users if seen[u] != expected[u]]
    assert not wrong, f"{len(wrong)} of {len(users)} differ, e.g. {wrong[:5]}"
    for n in NODES:
        share = sum(1 for u in users if expected[u] == n) / len(users)
        assert 0.25 <= share <= 0.42, (n, share)


def test_a_websockets_query_user_is_routed_as_its_header_would_be(cluster):
    """Open WebUI names a WebSocket's user in ?user_id=, percent-encoded; nginx decodes it
    (set-misc) so that it lands where the same user's REST calls do."""
    users = odd_ids()[:10] + [str(uuid.uuid4()) for _ in range(200)]
    expected = cluster.owners(users)
    with httpx.Client(base_url=cluster.router.url, timeout=30) as c:
        for u in users:
            r = c.get("/health?user_id=" + urllib.parse.quote(u, safe=""))
            assert node_of(r) == expected[u], u
        # Form encoding: a "+" in a query is a space, to nginx (set-misc) as to the nodes.
        spaced = [f"first last {i}" for i in range(40)]
        for u, n in cluster.owners(spaced).items():
            assert node_of(c.get("/health?user_id=" + u.replace(" ", "+"))) == n, u


def test_300_users_each_work_on_their_own_node_only(cluster):
    users = odd_ids()
    expected = cluster.owners(users)

    def work(u):
        with cluster.client(u) as c:
            r = c.post("/execute", params={"wait": 20}, json={"command": "id -u && echo hello > greeting"})
            assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text
            return u, node_of(r)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        served = dict(pool.map(work, users))
    assert served == expected
    held = {n: cluster.accounts_on(n) for n in NODES}
    for u in users:
        where = [n for n in NODES if u in held[n]]
        assert where == [expected[u]], (u, where)


def test_a_node_asked_for_a_user_it_does_not_own_answers_421_and_creates_nothing(cluster):
    u = f"misrouted-{uuid.uuid4()}"
    owner = cluster.owners([u])[u]
    other = next(n for n in NODES if n != owner)
    with cluster.client(u, via=cluster.nodes[other].url) as c:
        for method, path, body in (("POST", "/execute", {"command": "true"}), ("GET", "/files/list", None),
                                   ("POST", "/api/terminals", None)):
            r = c.request(method, path, json=body, params={"directory": "."} if method == "GET" else None)
            assert r.status_code == 421, r.text
            assert r.json()["detail"] == f"user {u} belongs to node {owner} (127.0.0.1:{cluster.ports[owner]})"
            assert node_of(r) == other
    assert u not in cluster.accounts_on(other)
    # The owner, asked straight, serves it.
    with cluster.client(u, via=cluster.nodes[owner].url) as c:
        assert run(c, "true")["exit_code"] == 0


def test_streams_uploads_terminals_and_previews_pass_through_the_router(cluster):
    u = f"through-{uuid.uuid4()}"
    owner = cluster.owners([u])[u]
    with cluster.client(u, timeout=120) as c:
        # A long poll past nginx's default 60 s read timeout: runs beside the rest of the test.
        long_poll = {}

        def poll():
            with cluster.client(u, timeout=120) as lc:
                long_poll["r"] = lc.post("/execute", params={"wait": 70}, json={"command": "sleep 62; echo late"})

        t = threading.Thread(target=poll)
        t.start()

        # SSE: a command's output streamed as it comes.
        p = c.post("/execute", json={"command": "for i in 1 2 3; do echo tick$i; sleep 0.2; done"}).json()
        with c.stream("GET", f"/execute/{p['id']}/stream") as r:
            assert r.status_code == 200 and node_of(r) == owner
            assert r.headers["content-type"].startswith("text/event-stream")
            body = b"".join(r.iter_bytes()).decode()
        assert "tick1" in body and "tick3" in body

        # 50 MB upload, streamed by nginx (proxy_request_buffering off), whole in the home.
        data = os.urandom(50 << 20)
        r = c.post("/files/upload", params={"directory": "."}, files={"file": ("big.bin", data)})
        assert r.status_code == 200, r.text
        assert r.json()["size"] == len(data)
        assert c.get("/files/view", params={"path": "big.bin"}).content == data

        # A terminal made over REST, attached by WebSocket naming the user in the query.
        tid = c.post("/api/terminals").json()["id"]

        async def type_echo():
            url = (f"ws://127.0.0.1:{cluster.router.port}/api/terminals/{tid}?user_id=" +
                   urllib.parse.quote(u, safe=""))
            async with websockets.connect(url, open_timeout=15, ping_interval=None) as ws:
                await ws.send(json.dumps({"type": "auth", "token": cluster.key}))
                await type_until(ws, b"echo through-$((6*7))\r", b"through-42")

        asyncio.run(type_echo())
        assert c.delete(f"/api/terminals/{tid}").status_code == 200

        # /proxy: a server in the box, reached through the router; a closed port is the node's
        # own 502 (with its detail), not the router's "node down" 503.
        run(c, "nohup python3 -m http.server 8131 >/dev/null 2>&1 & "
               "for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8131) 2>/dev/null && break; sleep 0.1; done")
        r = c.get("/proxy/8131/")
        assert r.status_code == 200 and "Directory listing" in r.text and node_of(r) == owner
        r = c.get("/proxy/8139/")
        assert r.status_code == 502 and "8139" in r.json()["detail"]

        t.join(100)
        r = long_poll["r"]
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "done" and "late" in text_of(r.json())


def test_an_idle_terminal_survives_a_router_reload(cluster):
    """Pins change with moves and nginx reloads for them: its old workers keep open WebSockets."""
    u = f"reload-{uuid.uuid4()}"
    with cluster.client(u) as c:
        tid = c.post("/api/terminals").json()["id"]

    async def scenario():
        url = f"ws://127.0.0.1:{cluster.router.port}/api/terminals/{tid}?user_id={u}"
        async with websockets.connect(url, open_timeout=15, ping_interval=None) as ws:
            await ws.send(json.dumps({"type": "auth", "token": cluster.key}))
            await type_until(ws, b"echo before-$((1+1))\r", b"before-2")

            old_workers = set(cluster.router.workers())
            cluster.router.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 15
            while True:  # new workers up: the reload took effect
                if set(cluster.router.workers()) - old_workers:
                    break
                assert time.monotonic() < deadline, "nginx did not reload"
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # idle across the reload
            await type_until(ws, b"echo after-$((2+2))\r", b"after-4")

    asyncio.run(scenario())
    with cluster.client(u) as c:
        assert c.delete(f"/api/terminals/{tid}").status_code == 200


def _users_of(cluster, node, n):
    found = []
    while len(found) < n:
        batch = [f"u-{uuid.uuid4()}" for _ in range(50)]
        found += [u for u, o in cluster.owners(batch).items() if o == node]
    return found[:n]


def test_a_killed_node_is_a_503_for_its_users_only_and_a_restart_brings_their_files_back(cluster):
    victims = _users_of(cluster, "n2", 5)
    others = _users_of(cluster, "n1", 3) + _users_of(cluster, "n3", 3)
    for u in victims + others:
        with cluster.client(u) as c:
            assert sh(c, f"echo {u} > mine.txt")[0] == 0
    # The others keep working all along, the kill included: not one of their requests fails.
    stop, seen = threading.Event(), []

    def others_work():
        clients = [cluster.client(u) for u in others]
        while not stop.is_set():
            for u, c in zip(others, clients):
                r = c.get("/files/view", params={"path": "mine.txt"})
                seen.append((u, r.status_code, r.text))
        for c in clients:
            c.close()

    worker = threading.Thread(target=others_work)
    worker.start()
    while len(seen) < 2 * len(others):
        time.sleep(0.01)
    d = cluster.nodes["n2"]
    d.stop(signal.SIGKILL)
    try:
        for u in victims:
            with cluster.client(u) as c:
                t0 = time.monotonic()
                r = c.get("/files/view", params={"path": "mine.txt"})
                elapsed = time.monotonic() - t0
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "5"
            detail = r.json()["detail"]
            assert f"n2 (127.0.0.1:{cluster.ports['n2']})" in detail and "nothing is lost" in detail
            assert elapsed < 0.5, elapsed  # refused at once (loopback), not a timeout
        counted = len(seen)
        while len(seen) < counted + 2 * len(others):  # a few more rounds after the victims' 503s
            time.sleep(0.01)
        stop.set()
        worker.join()
        assert [x for x in seen if x[1:] != (200, f"{x[0]}\n")] == []
        # Nobody else took the victims in: no account elsewhere, even after they asked.
        for n in ("n1", "n3"):
            assert not set(victims) & cluster.accounts_on(n)
    finally:
        stop.set()
        worker.join()
        d.start()
    for u in victims:
        with cluster.client(u) as c:
            r = c.get("/files/view", params={"path": "mine.txt"})
            assert r.status_code == 200 and r.text == f"{u}\n"


def test_a_hung_node_answers_503_at_the_read_timeout_and_others_are_unaffected(cluster):
    short = Router(cluster.file, cluster.workdir, "--read-timeout", "2")
    victim = _users_of(cluster, "n3", 1)[0]
    other = _users_of(cluster, "n1", 1)[0]
    d = cluster.nodes["n3"]
    os.kill(d.pid, signal.SIGSTOP)
    try:
        with cluster.client(victim, via=short.url) as c:
            t0 = time.monotonic()
            r = c.get("/files/list", params={"directory": "."})
            elapsed = time.monotonic() - t0
        assert r.status_code == 503 and "n3" in r.json()["detail"], r.text
        assert 1.5 < elapsed < 10, elapsed
        with cluster.client(other, via=short.url) as c:
            t0 = time.monotonic()
            assert run(c, "true")["exit_code"] == 0
            assert time.monotonic() - t0 < 5
    finally:
        os.kill(d.pid, signal.SIGCONT)
        short.stop()
    with cluster.client(victim) as c:
        assert c.get("/files/list", params={"directory": "."}).status_code == 200


def test_cluster_owner_and_nginx_conf_explain_bad_input(cluster, tmp_path):
    r = agentbox("cluster", "owner", "--cluster", str(tmp_path / "none.toml"), "x", check=False)
    assert r.returncode == 2 and "none.toml" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[[node]]\nname = "n1"\nserver = "127.0.0.1"\n')
    r = agentbox("cluster", "owner", "--cluster", str(bad), "x", check=False)
    assert r.returncode == 2 and "HOST:PORT" in r.stderr and "line" in r.stderr, r.stderr
    # A node must be one of the file's, and --cluster comes with --node.
    for args, says in ((["--cluster", cluster.file, "--node", "n9"], "n9"), (["--cluster", cluster.file], "--node")):
        r = subprocess.run([agentbox_bin(), "serve", "--listen", "127.0.0.1:0", "--state", str(tmp_path / "s"), *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and says in r.stderr, r.stderr


def test_adding_a_node_pins_whoever_would_change_node_so_nobody_moves(cluster):
    """Runs last: the cluster has four nodes afterwards."""
    held = {u: n for n in NODES for u in cluster.accounts_on(n)}
    assert len(held) >= 300
    cluster.ports["n4"] = free_port()
    admin = {"AGENTBOX_ADMIN_KEY": cluster.admin_key}
    plan = agentbox("cluster", "plan", "--cluster", cluster.file, "--to", cluster.file, env=admin).stdout
    assert plan.endswith(f"0 of {len(held)} accounts would move\n"), plan
    out = agentbox("cluster", "add", "--cluster", cluster.file, "n4", f"127.0.0.1:{cluster.ports['n4']}", env=admin).stdout
    pinned = int(out.split("pinned ")[1].split()[0])
    assert 0.1 * len(held) < pinned < 0.4 * len(held), out
    cluster.add_node("n4")
    for n in NODES:
        os.kill(cluster.nodes[n].pid, signal.SIGHUP)
    agentbox("cluster", "nginx-conf", "--cluster", cluster.file, "--out", cluster.router.dir,
             "--listen", f"127.0.0.1:{cluster.router.port}")
    cluster.router.proc.send_signal(signal.SIGHUP)
    newcomers = [f"new-{uuid.uuid4()}" for _ in range(400)]
    owners = cluster.owners(newcomers)
    to_n4 = next(u for u in newcomers if owners[u] == "n4")
    deadline = time.monotonic() + 15
    with cluster.client() as c:
        while node_of(c.get("/health", headers={"X-User-Id": to_n4})) != "n4":
            assert time.monotonic() < deadline, "the router did not take the new ring"
            time.sleep(0.1)
        # Everyone who was there stays where their files are; every node agrees (no 421).
        for u, n in held.items():
            r = c.get("/files/list", params={"directory": "."}, headers={"X-User-Id": u.encode()})
            assert r.status_code == 200 and node_of(r) == n, (u, n, r.status_code, r.text)
        # Newcomers spread over four nodes, n4 included, as `cluster owner` says.
        for u in newcomers:
            r = c.post("/execute", params={"wait": 20}, json={"command": "true"}, headers={"X-User-Id": u})
            assert r.status_code == 200 and node_of(r) == owners[u], (u, r.text)
    share = sum(1 for u in newcomers if owners[u] == "n4") / len(newcomers)
    assert 0.12 < share < 0.4, share
    assert not set(held) & cluster.accounts_on("n4")
    plan = agentbox("cluster", "plan", "--cluster", cluster.file, "--to", cluster.file, env=admin).stdout
    assert plan.endswith(f"0 of {len(held) + len(newcomers)} accounts would move\n"), plan


def test_the_http_only_config_goes_into_a_stock_debian_nginx_conf(cluster, tmp_path):
    """The Kubernetes router (deploy/docker/router.Dockerfile) includes the generated part in
    Debian's own nginx.conf, whose modules-enabled loads set-misc."""
    out = tmp_path / "router"
    agentbox("cluster", "nginx-conf", "--cluster", cluster.file, "--http-only", "--listen", "8000",
             "--out", str(out), "--pins-map", str(out / "pins.map"))
    main = tmp_path / "nginx.conf"
    main.write_text("include /etc/nginx/modules-enabled/*.conf;\n"
                    f"pid {tmp_path}/nginx.pid;\nevents {{ worker_connections 64; }}\n"
                    f"http {{ include /etc/nginx/mime.types; access_log /dev/null; include {out}/agentbox.conf; }}\n")
    r = subprocess.run(["nginx", "-t", "-e", "stderr", "-c", str(main)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    text = (out / "agentbox.conf").read_text()
    assert "load_module" not in text and "http {" not in text and f"include {out}/pins.map;" in text
