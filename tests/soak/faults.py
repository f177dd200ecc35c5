"""The faults the soak injects while the users' workload runs, each with the checks of its own
moment: SIGKILL of the daemon and a restart on the same state, a box killed by its memory limit,
a full volume, a full state filesystem, a stuck box start, a client that stops reading.

Runs on: the soak's main thread (one fault at a time), beside the worker threads.
"""
import os
import socket
import time

import leftovers
from workload import SERVER_PORT

MiB = 1 << 20
# The slow reader's download, and what may be written of it while the client reads nothing: the
# kernel's socket buffers on both sides of the daemon (tcp_wmem/tcp_rmem reach 4 and 6 MiB each)
# and the relay's own buffers; a relay that buffers without bound takes all of it in seconds.
STALLED_BYTES = 512 * MiB
STALL_BUFFERED_MAX = 64 * MiB


def sigkill(h):
    """SIGKILL at whatever moment the workload is in, then a new daemon on the same state."""
    h.kill_daemon()
    h.restart_daemon()
    return "daemon SIGKILLed and restarted"


def memory_kill(h):
    """A command allocating past [box] memory is killed by the kernel; its box and the daemon go
    on (the same account's next command runs). An account of its own: the kernel may pick any
    of the box's processes (an agent's CLI is larger than most), which is right but noisy."""
    u = h.fault_user(h.memory_user)
    code, p = u.sh(f"python3 -c \"x = b'x' * ({h.box_memory_mib * 2} << 20); print(len(x))\"",
                   what="allocation past the memory limit", wait=60)
    if code != 200:
        return f"allocation answered {code}"
    if p["status"] == "running" or p["exit_code"] == 0:
        h.ledger.violation(f"memory kill: {h.box_memory_mib * 2} MiB in a box of {h.box_memory_mib} MiB "
                           f"answered {p['status']} {p['exit_code']}")
    code, p = u.sh("echo still-here", what="command after the memory kill")
    if code == 200 and (p["status"], p["exit_code"]) != ("done", 0):
        h.ledger.violation(f"memory kill: the account's next command answered {p['status']} {p['exit_code']}")
    return f"allocation ended {p['status'] if p else code}"


def full_volume(h):
    """One user's volume written full through the API (507), then freed by deleting and
    emptying the trash; the user's acknowledged files are checked after the phase."""
    u = h.fault_user()
    chunk = "f" * (4 * MiB)
    written, status = [], None
    for i in range(h.disk_mib // 4 + 8):
        r = u.call("fill the volume", "POST", "/files/write", json={"path": f"fill/{i}.bin", "content": chunk})
        status = r.status_code
        if status != 200:
            break
        written.append(f"fill/{i}.bin")
    if status != 507:
        h.ledger.violation(f"full volume: {len(written)} writes of 4 MiB into {h.disk_mib} MiB ended with {status}")
    r = u.call("delete the fill", "DELETE", "/files/delete", params={"path": "fill"})
    r = u.call("empty the trash", "DELETE", "/files/trash")
    if r.status_code != 200:
        h.ledger.violation(f"full volume: emptying the trash answered {r.status_code}: {r.text[:200]}")
    r = u.call("write after freeing", "POST", "/files/write", json={"path": "soak/after-full.txt", "content": "ok"})
    if r.status_code != 200:
        h.ledger.violation(f"full volume: a write after freeing answered {r.status_code}: {r.text[:200]}")
    h.verify_due = True
    return f"{len(written)} x 4 MiB then {status}"


def full_state(h):
    """The state filesystem filled (a file beside the state dir on its small tmpfs) for a few
    seconds while the workload goes on, then freed; acknowledged writes are checked after."""
    if os.environ.get("SOAK_STARVE_VOLUMES") != "1":
        # The volumes' images are sparse files on the state filesystem: one that cannot grow
        # there gets write errors under its ext4, which then goes read-only for good (a finding
        # of the soak, tests/soak/README.md; SOAK_STARVE_VOLUMES=1 shows it). Their blocks are
        # allocated first, so this fault is about the state disk itself: SQLite and its files.
        for _, image in leftovers.loops_under(h.daemon.state_dir):
            with open(image, "r+b") as f:
                os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size)
    filler = os.path.join(h.statefs, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    h.state_full = (time.monotonic(), float("inf"))
    try:
        block = b"\0" * MiB
        while True:
            try:
                os.write(fd, block)
            except OSError:
                break
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        u = h.fault_user()
        probes = [u.call("write on a full state disk", "POST", "/files/write",
                         json={"path": "soak/full-state.txt", "content": "x"}).status_code,
                  u.sh("echo full-state", what="command on a full state disk")[0]]
        time.sleep(h.rng.uniform(2, 5))
    finally:
        os.close(fd)
        os.unlink(filler)
        h.state_full = (h.state_full[0], time.monotonic() + 2)
        h.verify_due = True
    return f"state disk full; probes answered {probes}"


def stuck_start(h):
    """A user whose box never answers its start (AGENTBOX_TEST_HOLD_START) gets 503 with
    Retry-After after [accounts] start_timeout, while the others go on."""
    u = h.fault_user("stuck-0")  # one account, however often
    began = time.monotonic()
    r = u.call("stuck box start", "POST", "/execute", params={"wait": 5}, json={"command": "echo never"})
    took = time.monotonic() - began
    if r.status_code != 503 or "Retry-After" not in r.headers or took > h.start_timeout + 15:
        h.ledger.violation(f"stuck start: answered {r.status_code} after {took:.1f} s "
                           f"(Retry-After {r.headers.get('Retry-After')})")
    return f"stuck start answered {r.status_code} in {took:.1f} s"


def slow_reader(h):
    """A client that asks for a large download through /proxy and stops reading: the relay stops
    taking from the box's server once the socket buffers are full (the server can write only a
    few MiB of it), the daemon's memory stays bounded while it stalls, and the dropped socket costs
    nothing after."""
    u = h.fault_user()
    if not u.ensure_server():
        return "no server in the box"
    pid = h.daemon.pid
    before, _ = leftovers.rss_and_fds(pid)
    seed = f"stall-{h.rng.randrange(10**9)}"
    s = socket.create_connection(("127.0.0.1", h.daemon.port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    try:
        s.sendall((f"GET /proxy/{SERVER_PORT}/blob/{seed}/{STALLED_BYTES} HTTP/1.1\r\nHost: soak\r\n"
                   f"Authorization: Bearer {h.daemon.api_key}\r\nX-User-Id: {u.name}\r\n\r\n").encode())
        head = s.recv(65536)
        if not head.startswith(b"HTTP/1.1 200"):
            h.ledger.violation(f"slow reader: the download answered {head[:100]!r}")
        peak = before
        deadline = time.monotonic() + h.rng.uniform(4, 8)
        while time.monotonic() < deadline:
            peak = max(peak, leftovers.rss_and_fds(pid)[0])
            time.sleep(0.25)
        r = u.call("stalled download's progress", "GET", f"/proxy/{SERVER_PORT}/sent/{seed}")
        sent = int(r.text) if r.status_code == 200 else -1
        if not 0 <= sent <= STALL_BUFFERED_MAX:
            h.ledger.violation(f"slow reader: the box's server wrote {sent} bytes to a client that "
                               f"read nothing (answer {r.status_code})")
        # The other users' load goes on meanwhile, and under ASan freed memory sits in its
        # quarantine: RSS is the coarse check (the sanitized run's slack), the bytes the precise one.
        if peak - before > max(64 * 1024, h.rss_slack_kib):
            h.ledger.violation(f"slow reader: the daemon's RSS grew {(peak - before) // 1024} MiB "
                               f"while a client read nothing")
    finally:
        s.close()
    return f"stalled download dropped after {sent >> 20} MiB (RSS {before // 1024} MiB before)"


ALL = [sigkill, memory_kill, full_volume, full_state, stuck_start, slow_reader]
