"""The daemon's stop (src/daemon/daemon.cpp, Daemon::stop): SIGTERM while everything that can be
in flight is, and the daemon still ends as it should: status 0, no crash report, no sanitizer
report, nothing of it left running or mounted.

In flight at the stop: two attached terminals, one printing without a pause while its client
types; running commands (one idle, one printing); an egress CONNECT tunnel held open by a
program in a box; a model request through the gateway whose answer the upstream holds back.
Under AddressSanitizer (scripts/build.sh --asan; AGENTBOX_BIN=build-asan/agentbox) a
use-after-free or a leak in the shutdown order is a report in the log, which fails the test.
"""
import json
import os
import shlex
import uuid

from conftest import Origin, run as execute, wait_for_output
from fake_anthropic import FakeAnthropic
from test_terminals import connect, create, read_until, run as run_async, stop_while_typing

WS_TIMEOUT = 20
# What a sanitizer or the crash report prints (util/crash_report), in any build.
REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", ": fatal signal ",
           "terminating on an uncaught exception", "std::terminate called",
           "unhandled exception")

# In the box: a CONNECT tunnel through the box's egress proxy to the test's origin, one request
# answered through it, then held open (the proxy is relaying it when the daemon stops).
HOLD_TUNNEL = r"""
import os, socket, sys, time
proxy = os.environ["HTTP_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
s = socket.create_connection((proxy[0], int(proxy[1])))
target = sys.argv[1]
s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 200"), head
s.sendall(f"GET /through-the-tunnel HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
got = b""
while b"through-the-tunnel" not in got:
    got += s.recv(4096)
print("tunnel open", flush=True)
time.sleep(300)
"""


def test_a_daemon_stopped_with_everything_in_flight_exits_cleanly(make_daemon):
    origin = Origin()
    fake = FakeAnthropic()
    try:
        config = f"""
[policy.default]
allow = ["tunnel.test"]
allow_addresses = ["127.0.0.1/32"]
[hosts]
"tunnel.test" = "127.0.0.1"
[inference.anthropic]
upstream = "{fake.url}"
"""
        d = make_daemon(tag="stop-all", api_key=uuid.uuid4().hex, config_text=config,
                        env={"AGENTBOX_ANTHROPIC_API_KEY": "sk-ant-test-" + uuid.uuid4().hex}).start()
        users = [f"stop-all-{uuid.uuid4().hex[:8]}" for _ in range(2)]
        clients = [d.client(user=u) for u in users]
        try:
            # Running commands: one idle, one printing.
            idle = execute(clients[0], "sleep 300", wait=0)
            printing = execute(clients[1], "while :; do echo tick; sleep 0.05; done", wait=0)
            wait_for_output(clients[1], printing["id"], "tick")

            # An egress tunnel held open by a program in the box.
            tunnel = execute(clients[0], f"python3 -c {shlex.quote(HOLD_TUNNEL)} tunnel.test:{origin.port}",
                             wait=0, pty=False)
            wait_for_output(clients[0], tunnel["id"], "tunnel open")

            # A model request whose answer the upstream holds after its first delta.
            body = json.dumps({"model": "claude-test", "max_tokens": 16, "stream": True,
                               "messages": [{"role": "user", "content": "[[hold]] say something"}]})
            model = execute(clients[1], f'curl -sN --max-time 300 "$ANTHROPIC_BASE_URL/v1/messages" '
                                        f'-H "x-api-key: $ANTHROPIC_API_KEY" -H "content-type: application/json" '
                                        f'-d {shlex.quote(body)}', wait=0, pty=False)
            fake.wait_for(lambda r: "[[hold]]" in r.raw.decode(errors="replace"))
            wait_for_output(clients[1], model["id"], "content_block_delta")

            # Two terminals attached; one floods its screen while its client types.
            tids = [create(c)["id"] for c in clients]

            async def scenario():
                sockets = [await connect(d, tid, u) for tid, u in zip(tids, users)]
                await sockets[0].send(b"yes flood-$((6*7)) | head -c 2000000000\n")
                await read_until(sockets[0], b"flood-42\r\nflood-42\r\n")
                await sockets[1].send(b"echo ready-$((6*7))\n")
                await read_until(sockets[1], b"ready-42")
                return await stop_while_typing(d, sockets, settle=0.3, timeout=WS_TIMEOUT)

            assert idle["status"] == "running" and tunnel["status"] == "running"
            rc = run_async(scenario())
        finally:
            for c in clients:
                c.close()
        log = d.log_tail(200_000)
        assert rc == 0, log[-8000:]
        for report in REPORTS:
            assert report not in log, log[-8000:]
        assert d.leftovers == [], log[-8000:]
        with open("/proc/self/mounts") as f:
            left = [line.split()[1] for line in f if line.split()[1].startswith(os.path.realpath(d.state_dir) + "/")]
        assert left == [], left
    finally:
        fake.close()
        origin.close()
