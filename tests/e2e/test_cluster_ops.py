"""Growing and shrinking a cluster with users on it (docs/SCALING.md): `cluster add` pins whoever
would change node, `cluster rebalance` moves them to their ring owners (idle first) and drops the
pins, `cluster drain` empties a node into the ring without it while it takes no new user. Through
it all every account is live on exactly one node, with its files, and the router (Debian nginx,
rewritten and reloaded by the commands) sends each user there.
"""
import os
import signal
import time
import uuid

import pytest

from conftest import sh
from test_cluster import NODES, agentbox, free_port, node_of, running_cluster


@pytest.fixture(scope="module")
def small():
    with running_cluster("cluster-ops") as c:
        yield c


def served_by(cluster, user, node, timeout=20):
    """Waits until the router sends user to node (a reload takes effect as workers turn over);
    returns the user's mine.txt as that node serves it."""
    deadline = time.monotonic() + timeout
    with cluster.client(user) as c:
        while True:
            r = c.get("/files/view", params={"path": "mine.txt"})
            if r.status_code == 200 and node_of(r) == node:
                return r.text
            assert time.monotonic() < deadline, (user, node, r.status_code, node_of(r), r.text[:200])
            time.sleep(0.1)


def where(cluster, nodes):
    held = {n: cluster.accounts_on(n) for n in nodes}
    out = {}
    for n, users in held.items():
        for u in users:
            assert u not in out, f"{u} is live on {out[u]} and {n}"
            out[u] = n
    return out


def test_add_rebalance_and_drain_keep_each_account_on_one_node_with_its_files(small):
    admin = {"AGENTBOX_ADMIN_KEY": small.admin_key}
    users = [f"ops-{uuid.uuid4()}" for _ in range(40)]
    for u in users:
        with small.client(u) as c:
            assert sh(c, f"echo {u} > mine.txt")[0] == 0

    # A fourth node: whoever the bigger ring gives it stays put, pinned.
    small.ports["n4"] = free_port()
    out = agentbox("cluster", "add", "--cluster", small.file, "n4", f"127.0.0.1:{small.ports['n4']}", env=admin).stdout
    pinned = int(out.split("pinned ")[1].split()[0])
    small.add_node("n4")
    for n in NODES:
        os.kill(small.nodes[n].pid, signal.SIGHUP)
    agentbox("cluster", "nginx-conf", "--cluster", small.file, "--out", small.router.dir,
             "--listen", f"127.0.0.1:{small.router.port}")
    small.router.proc.send_signal(signal.SIGHUP)
    nodes = NODES + ("n4",)
    before = where(small, nodes)
    assert set(before) == set(users) and "n4" not in before.values()
    owners = small.owners(users)
    assert sum(1 for u in users if owners[u] != before[u]) == 0  # pins hold everyone in place
    assert pinned > 0

    # Rebalance: the pinned go to n4, their ring owner, and the pins go.
    out = agentbox("cluster", "rebalance", "--cluster", small.file, "--router-dir", small.router.dir, env=admin).stdout
    assert f"rebalanced: {pinned} accounts moved" in out and "0 left" in out, out
    after = where(small, nodes)
    assert set(after) == set(users)
    assert sum(1 for u in users if after[u] == "n4") == pinned
    owners = small.owners(users)
    for u in users:
        assert after[u] == owners[u]
        assert served_by(small, u, owners[u]) == f"{u}\n"

    # Drain n2: its accounts go to their owners on the ring without it; it takes no newcomer.
    on_n2 = [u for u in users if after[u] == "n2"]
    assert on_n2
    out = agentbox("cluster", "drain", "--cluster", small.file, "n2", "--router-dir", small.router.dir, env=admin).stdout
    assert f"drained n2: {len(on_n2)} accounts moved" in out, out
    drained = where(small, nodes)
    assert set(drained) == set(users) and "n2" not in drained.values()
    owners = small.owners(users)
    for u in users:
        assert drained[u] == owners[u] != "n2"
        assert served_by(small, u, owners[u]) == f"{u}\n"
    newcomers = [f"ops-new-{uuid.uuid4()}" for _ in range(60)]
    for u in newcomers:
        with small.client(u) as c:
            r = c.post("/execute", params={"wait": 20}, json={"command": "true"})
            assert r.status_code == 200 and node_of(r) != "n2", (u, node_of(r), r.text)
    assert not small.accounts_on("n2")
    # Straight to the drained node, a newcomer is refused and named elsewhere.
    u = f"ops-direct-{uuid.uuid4()}"
    with small.client(u, via=small.nodes["n2"].url) as c:
        r = c.post("/execute", json={"command": "true"})
        assert r.status_code == 421 and "n2" not in r.json()["detail"].split("belongs to node")[1], r.text
