"""Moving an account between two nodes against `tar | tar` of the same tree on the same machine.

Run by bench/move_bench.sh. Two nodes of one cluster on 127.0.0.1 (quotas off: the homes are
directories of the state filesystem, as the tar copy's are); a user whose home holds FILES files
of SIZE bytes in directories of 100. Each round: `agentbox accounts move` n1 -> n2 (timed by the
CLI's wall time: stop the box, stream, re-own, commit, tombstone, pin), then the same back
n2 -> n1, and `tar -C SRC -cf - . | tar -C DST -xf -` of a copy of that home into an empty
directory (page cache warm for both: each reads a tree it or the setup just wrote). Prints
medians and the ratio tar / move (target >= 0.8: a move no slower than 1.25x a local tar copy).
"""
import argparse
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import httpx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(agentbox, work, name, cluster, port, key, admin, uid_base):
    d = os.path.join(work, name)
    os.makedirs(d)
    with open(os.path.join(d, "serve.toml"), "w") as f:
        f.write('[accounts]\ndisk = "0"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    env.update(AGENTBOX_API_KEY=key, AGENTBOX_ADMIN_KEY=admin, AGENTBOX_UID_BASE=str(uid_base))
    p = subprocess.Popen([agentbox, "serve", "--listen", f"127.0.0.1:{port}", "--state", os.path.join(d, "state"),
                          "--config", os.path.join(d, "serve.toml"), "--cluster", cluster, "--node", name],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if " serving on " in line:
            threading.Thread(target=p.stdout.read, daemon=True).start()
            return p
    raise RuntimeError(f"node {name} did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agentbox", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--size", type=int, default=100 * 1024 + 1024 // 2)  # ~1 GiB in 10,000 files
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="agentbox-movebench-", dir="/var/tmp")
    key, admin = secrets.token_hex(16), secrets.token_hex(32)
    ports = {"n1": free_port(), "n2": free_port()}
    cluster = os.path.join(work, "cluster.toml")
    with open(cluster, "w") as f:
        for n, p in ports.items():
            f.write(f'[[node]]\nname = "{n}"\nserver = "127.0.0.1:{p}"\n')
    base = int(os.environ["AGENTBOX_UID_BASE"])
    nodes = {n: start_node(a.agentbox, work, n, cluster, ports[n], key, admin, base + i * 65536)
             for i, n in enumerate(ports)}
    try:
        user = "mover"
        owner = subprocess.run([a.agentbox, "cluster", "owner", "--cluster", cluster, user], capture_output=True,
                               text=True, check=True).stdout.split()[0]
        other = "n2" if owner == "n1" else "n1"
        headers = {"Authorization": f"Bearer {key}", "X-User-Id": user}
        with httpx.Client(base_url=f"http://127.0.0.1:{ports[owner]}", headers=headers, timeout=600) as c:
            script = (f"cd ~ && for d in $(seq 0 {a.files // 100 - 1}); do mkdir -p d$d; "
                      f"for f in $(seq 0 99); do head -c {a.size} /dev/urandom > d$d/f$f; done; done; du -sb ~ | cut -f1")
            r = c.post("/execute", params={"wait": 300}, json={"command": script, "pty": False})
            assert r.status_code == 200 and r.json()["status"] == "done", r.text
            total = int("".join(o["data"] for o in r.json()["output"] if o["type"] == "stdout").split()[-1])
        home = None
        state = os.path.join(work, owner, "state")
        for root, dirs, _ in os.walk(state):
            if "d0" in dirs and "d1" in dirs:
                home = root
                break
        assert home, "the home was not found in the state directory"
        src = os.path.join(work, "tar-src")
        subprocess.run(["cp", "-a", home, src], check=True)
        print(f"home of {total / 2**20:.0f} MiB in {a.files} files; rounds: {a.rounds}", file=sys.stderr)
        env = dict(os.environ, AGENTBOX_ADMIN_KEY=admin)
        moves, tars = [], []
        where = owner
        for r in range(a.rounds):
            for _ in range(2):
                to = other if where == owner else owner
                t0 = time.monotonic()
                subprocess.run([a.agentbox, "accounts", "move", user, "--to", to, "--cluster", cluster],
                               env=env, check=True, capture_output=True)
                moves.append(time.monotonic() - t0)
                where = to
            dst = os.path.join(work, f"tar-dst-{r}")
            os.makedirs(dst)
            t0 = time.monotonic()
            subprocess.run(f"tar -C {src} -cf - . | tar -C {dst} -xf -", shell=True, check=True)
            tars.append(time.monotonic() - t0)
            shutil.rmtree(dst)
            print(f"round {r + 1}: moves {moves[-2]:.2f} s, {moves[-1]:.2f} s; tar|tar {tars[-1]:.2f} s",
                  file=sys.stderr)
        m, t = statistics.median(moves), statistics.median(tars)
        print(f"move of {total / 2**20:.0f} MiB in {a.files} files: median {m:.2f} s "
              f"({min(moves):.2f}-{max(moves):.2f}, {len(moves)} moves)")
        print(f"tar | tar of the same tree:        median {t:.2f} s ({min(tars):.2f}-{max(tars):.2f})")
        print(f"tar / move: {t / m:.2f}x (target >= 0.8x)")
    finally:
        for p in nodes.values():
            p.terminate()
        for p in nodes.values():
            p.wait(60)
        subprocess.run(["rm", "-rf", "--one-file-system", work])


if __name__ == "__main__":
    main()
