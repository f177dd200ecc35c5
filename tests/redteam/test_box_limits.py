"""What every box shares in the kernel (issue 30): the host's one pool of pseudo-terminals and its
TCP memory. A box holding all the ptys it can, or filling socket buffers it never reads, must meet
its own limit long before the host's pool runs low, while another user's commands and terminals
carry on; the user who meets the limit is told which one (429 naming `[box] ptys`).

Each attack has its control: the box opens exactly its limit (not fewer), the same program
outside a box goes past the bound, and another user is served throughout.
"""
import asyncio
import json
import os
import random
import shlex
import subprocess
import time
import urllib.parse
import uuid

import pytest
import websockets

from e2e_conftest import agentbox_bin, run, running_daemon, sh, text_of, wait_done, wait_for_output

# Opens the box's /dev/ptmx until refused (at most CAP times, so a box without a limit takes no
# more than that of the host's pool), says how many it holds, then holds them.
HOLDER = r'''
import errno, os, sys, time
cap = int(sys.argv[1])
fds, refused = [], "none"
while len(fds) < cap:
    try:
        fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    except OSError as e:
        refused = errno.errorcode.get(e.errno, str(e.errno))
        break
print(f"held {len(fds)} refused {refused}", flush=True)
time.sleep(120)
'''

SMALL = 'ptys = 8\ntcp_memory = "16M"'


@pytest.fixture(scope="module")
def small():
    with running_daemon("ptys", config_text=f"[box]\n{SMALL}\n") as d:
        yield d


@pytest.fixture(scope="module")
def default_daemon():
    with running_daemon("defaults") as d:
        yield d


def client(daemon, who):
    return daemon.client(user=f"{who}-{uuid.uuid4().hex[:8]}")


def hold_ptys(c, cap):
    """Starts the holder in c's box (without a pty of its own); returns (process, its line)."""
    p = run(c, f"python3 -c {shlex.quote(HOLDER)} {cap}", wait=0, pty=False)
    out = wait_for_output(c, p["id"], "held")
    return p, out.strip().splitlines()[-1]


def release(c, p):
    assert c.delete(f"/execute/{p['id']}").status_code == 200
    assert wait_done(c, p["id"])["status"] != "running"


async def terminal_says(daemon, user, tid, word):
    """Types into the terminal and waits for the shell's answer (word-42, computed, so the echo of
    the keystrokes does not count)."""
    url = f"ws://127.0.0.1:{daemon.port}/api/terminals/{tid}?user_id={urllib.parse.quote(user)}"
    async with websockets.connect(url, open_timeout=15, ping_interval=None, max_size=None) as ws:
        await ws.send(json.dumps({"type": "auth", "token": daemon.api_key}))
        await ws.send(f"echo {word}-$((6*7))\n".encode())
        seen, deadline = b"", time.monotonic() + 15
        while f"{word}-42".encode() not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no answer from the terminal; saw {seen[-500:]!r}"
            seen += await asyncio.wait_for(ws.recv(), left)


def assert_refused_naming_the_limit(r, limit):
    assert r.status_code == 429, (r.status_code, r.text)
    detail = r.json()["detail"]
    assert f"[box] ptys = {limit}" in detail and f"all {limit} of its terminals" in detail, detail


def test_a_box_holding_all_its_ptys_is_refused_while_another_user_works(small):
    with client(small, "pty-alice") as alice, client(small, "pty-bob") as bob:
        holder, line = hold_ptys(alice, 64)
        # Control: the box opens exactly its limit, and its own devpts refuses the next one.
        assert line == "held 8 refused ENOSPC", line

        # Another user: a command with a pty (the default) and a new terminal both work.
        p = run(bob, "tty; echo bob-$((6*7))")
        assert p["status"] == "done" and p["exit_code"] == 0, p
        assert "/dev/pts/" in text_of(p) and "bob-42" in text_of(p), text_of(p)
        r = bob.post("/api/terminals")
        assert r.status_code == 200, r.text
        asyncio.run(terminal_says(small, bob.headers["X-User-Id"], r.json()["id"], "bob"))

        # The user at her limit is told which limit, for a command and for a terminal...
        assert_refused_naming_the_limit(alice.post("/execute", params={"wait": 5}, json={"command": "echo hi"}), 8)
        assert_refused_naming_the_limit(alice.post("/api/terminals"), 8)
        # ...while a command without a pty still runs.
        assert sh(alice, "echo pipes") == (0, "pipes\n", "")

        # Once her holder is gone she works again.
        release(alice, holder)
        p = run(alice, "tty; echo again-$((6*7))")
        assert p["status"] == "done" and p["exit_code"] == 0 and "again-42" in text_of(p), p
        r = alice.post("/api/terminals")
        assert r.status_code == 200, r.text


def test_the_default_is_256_ptys_per_box(default_daemon):
    with client(default_daemon, "pty-default") as c:
        code, mounts, _ = sh(c, "grep ' /dev/pts ' /proc/self/mountinfo")
        assert code == 0 and "max=256" in mounts, mounts
        holder, line = hold_ptys(c, 300)
        assert line == "held 256 refused ENOSPC", line
        assert_refused_naming_the_limit(c.post("/api/terminals"), 256)
        release(c, holder)
        assert c.post("/api/terminals").status_code == 200


# ---- TCP socket memory -------------------------------------------------------------------------

PROBE = os.path.join(os.path.dirname(agentbox_bin()), "tests", "abx-probe")


def upload_probe(c):
    with open(PROBE, "rb") as f:
        r = c.post("/files/upload", params={"directory": "."}, files={"file": (".abx-probe", f.read())})
    assert r.status_code == 200, r.text


def test_unread_loopback_connections_in_a_daemons_box_stop_at_its_tcp_bound(small):
    """32 loopback connections in the box, written to and never read: with `tcp_memory = "16M"`
    they stop taking data near 16 MiB (the box's cgroup charges the socket buffers); the same
    program outside a box queues all 64 MiB."""
    with client(small, "tcp") as c:
        upload_probe(c)
        code, out, err = sh(c, "chmod +x ~/.abx-probe && ~/.abx-probe tcp-buffers 64 32")
        assert code == 1 and out.startswith("BLOCKED: socket buffers stopped taking data at"), (code, out, err)
        queued_kib = int(out.split(" at ")[1].split()[0])
        # The bound, plus what the kernel lets each connection take to make progress (one segment).
        assert queued_kib <= 16 * 1024 + 32 * 128, out
    control = subprocess.run([PROBE, "tcp-buffers", "64", "32"], capture_output=True, text=True, timeout=30)
    assert control.returncode == 0 and control.stdout.startswith("ALLOWED: queued"), control


def box_cgroup_of(c):
    """The memory cgroup directory, on the host, of a process in c's box."""
    marker = f"{random.randint(1000, 9999)}.{random.randint(100, 999)}"
    p = run(c, f"exec sleep {marker}", wait=0, pty=False)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if f.read() != f"sleep\0{marker}\0".encode():
                            continue
                    with open(f"/proc/{pid}/cgroup") as f:
                        for line in f:
                            _, controllers, path = line.rstrip("\n").split(":", 2)
                            if "memory" in controllers.split(","):
                                return "/sys/fs/cgroup/memory" + path
                except OSError:
                    continue
            time.sleep(0.05)
        raise AssertionError("the box's sleep was not found on the host")
    finally:
        c.delete(f"/execute/{p['id']}")


@pytest.mark.skipif(not os.path.isdir("/sys/fs/cgroup/memory"), reason="cgroup v2 host: socket memory is in memory.max")
def test_a_daemons_box_has_its_tcp_socket_memory_bounded_by_default(default_daemon, small):
    with client(default_daemon, "tcp-default") as c:
        with open(box_cgroup_of(c) + "/memory.kmem.tcp.limit_in_bytes") as f:
            assert int(f.read()) == 64 << 20
    with client(small, "tcp-small") as c:
        with open(box_cgroup_of(c) + "/memory.kmem.tcp.limit_in_bytes") as f:
            assert int(f.read()) == 16 << 20
