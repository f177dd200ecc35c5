"""`agentbox mcp`: the MCP tools over stdio for one person, on boxes made as `agentbox run` makes
them (issue 34). Driven by the official SDK's stdio client (tests/e2e/mcp_client/stdio.mjs, which
starts `agentbox mcp` as Claude Desktop does), and by hand for what a well-behaved client never
sends. Everything stays on this machine: the network probes aim at an HTTP server of the test's
own on the host's 127.0.0.1 (conftest.Origin).
"""
import json
import os
import pathlib
import select
import subprocess
import time

import pytest

from conftest import agentbox_bin, new_workdir, remove_workdir
from test_mcp import MODEL_TOOLS

MCP_CLIENT = pathlib.Path(__file__).resolve().parent / "mcp_client"


@pytest.fixture
def workdir():
    d = new_workdir("mcpstdio")
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "caller-home"))
    yield d
    remove_workdir(d)


def mcp_args(workdir, *flags):
    """`agentbox mcp` with the test's own home for the box, state and caller's $HOME in workdir."""
    return ["mcp", "--no-profile", "--home", os.path.join(workdir, "boxhome"), *flags]


def mcp_env(workdir):
    return {"PATH": "/usr/bin:/bin", "HOME": os.path.join(workdir, "caller-home"),
            "XDG_STATE_HOME": os.path.join(workdir, "state")}


def sdk(workdir, *flags, tour=False, commands=(), uid=None):
    """The SDK's client (as root) starting agentbox mcp, through setpriv as uid when given."""
    assert (MCP_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), "scripts/install-deps.sh"
    command, args = agentbox_bin(), mcp_args(workdir, *flags)
    if uid is not None:
        command, args = "/usr/bin/setpriv", [f"--reuid={uid}", f"--regid={uid}", "--clear-groups", command, *args]
    spec = {"command": command, "args": args, "env": mcp_env(workdir), "tour": tour, "commands": list(commands)}
    run = subprocess.run(["node", str(MCP_CLIENT / "stdio.mjs"), json.dumps(spec)], capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert "error" not in got, got
    for c in got["commands"]:  # run_command's output comes from a pty, as the REST route's
        c["output"] = c["output"].replace("\r\n", "\n")
    return got


@pytest.fixture(scope="module")
def tour():
    d = new_workdir("mcpstdio-tour")
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "caller-home"))
    try:
        yield d, sdk(d, tour=True)
    finally:
        remove_workdir(d)


def test_initialize_names_the_server_and_lists_openapis_model_tools(tour):
    _, got = tour
    assert got["server"]["name"] == "agentbox"
    assert set(got["tools"]) == MODEL_TOOLS


def test_a_command_runs_in_the_box_with_its_output_and_exit_code(tour):
    _, got = tour
    echo = got["echo"]["structured"]
    assert not got["echo"]["isError"]
    assert echo["status"] == "done" and echo["exit_code"] == 0
    lines = "".join(c["data"] for c in echo["output"]).split()
    assert lines[0] == "one" and lines[1].startswith("/home/") and lines[2] == lines[1].split("/")[2]


def test_a_file_written_lands_in_the_home_directory_on_the_host(tour):
    d, got = tour
    assert not got["write"]["isError"], got["write"]
    assert got["read"]["structured"]["content"] == "hello stdio\n", got["read"]
    with open(os.path.join(d, "boxhome", "notes", "hello.txt")) as f:
        assert f.read() == "hello stdio\n"
    # Owned by the box's uid, as `agentbox run` makes the home's files (slot 0 of the uid range).
    assert os.stat(os.path.join(d, "boxhome", "notes", "hello.txt")).st_uid == 1000000


def test_a_long_command_reports_progress_and_returns_when_done(tour):
    _, got = tour
    long = got["long"]
    assert long["structured"]["status"] == "done" and long["structured"]["exit_code"] == 0
    assert len(long["progress"]) >= 2, long["progress"]
    assert "tick" in "".join(p.get("message", "") for p in long["progress"])


def test_a_tool_error_is_a_result_and_an_unknown_tool_invalid_params(tour):
    _, got = tour
    assert got["missing"]["isError"] is True and "not found" in got["missing"]["text"].lower()
    assert got["unknown_tool"]["ok"] is False and got["unknown_tool"]["code"] == -32602


def test_nothing_but_messages_on_stdout_the_log_on_stderr(tour):
    _, got = tour
    assert "serving" in got["stderr"]  # the daemon's log went to stderr, and the SDK parsed every stdout line


def test_the_box_hides_the_callers_home_and_shows_a_bind(workdir):
    caller_home = os.path.join(workdir, "caller-home")
    with open(os.path.join(caller_home, "secret.txt"), "w") as f:
        f.write("caller-secret-7\n")
    shared = os.path.join(workdir, "shared")
    os.makedirs(shared)
    with open(os.path.join(shared, "visible.txt"), "w") as f:
        f.write("bound-9\n")
    os.chmod(shared, 0o755)
    os.chmod(os.path.join(shared, "visible.txt"), 0o644)
    got = sdk(workdir, "--ro-bind", shared, "--env", "GREETING=from-flag",
              commands=[f"cat {caller_home}/secret.txt", f"cat {shared}/visible.txt", 'echo "$GREETING $HOME"'])
    hidden, bound, env = got["commands"]
    assert hidden["exit_code"] != 0 and "caller-secret" not in hidden["output"], hidden
    assert bound["exit_code"] == 0 and bound["output"] == "bound-9\n", bound  # the control
    greeting, home = env["output"].split()
    assert greeting == "from-flag" and home.startswith("/home/") and home != caller_home  # run's --env


def probe(origin, host):
    return (f"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{origin.port}/direct; echo \" direct=$?\"; "
            f"curl -sS --max-time 10 http://{host}:{origin.port}/proxied; echo \" proxied=$?\"")


def test_no_network_by_default_the_hosts_loopback_is_unreachable(workdir, origin):
    before = len(origin.paths)
    got = sdk(workdir, commands=[probe(origin, "127.0.0.1"), 'echo "proxy=$HTTP_PROXY"'])
    out, env = got["commands"]
    assert "direct=0" not in out["output"] and "proxied=0" not in out["output"], out
    assert env["output"] == "proxy=\n"
    assert origin.paths[before:] == []


def test_allow_net_reaches_the_listener_through_the_proxy_and_nothing_directly(workdir, origin):
    before = len(origin.paths)
    got = sdk(workdir, "--allow-net", "origin.test", "--add-host", "origin.test=127.0.0.1", "--allow-address",
              "127.0.0.1/32", commands=[probe(origin, "origin.test")])
    out = got["commands"][0]["output"]
    assert f"origin saw /proxied host=origin.test:{origin.port} proxied=0" in out, out
    assert "direct=0" not in out, out  # no route of its own: only the proxy leads out
    assert origin.paths[before:] == ["/proxied"]


# ---- by hand: raw lines on stdin -------------------------------------------------------------

class Raw:
    """`agentbox mcp` with pipes of the test's own, one JSON-RPC message a line."""

    def __init__(self, workdir, *flags):
        self.p = subprocess.Popen([agentbox_bin(), *mcp_args(workdir, *flags)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=mcp_env(workdir))
        self.buf = b""

    def send(self, line):
        self.p.stdin.write(line if isinstance(line, bytes) else (json.dumps(line) + "\n").encode())
        self.p.stdin.flush()

    def read(self, timeout=30):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, "no answer line on stdout"
            ready, _, _ = select.select([self.p.stdout], [], [], left)
            if ready:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                assert chunk, "stdout closed: " + self.p.stderr.read().decode(errors="replace")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self, timeout=30):
        self.p.stdin.close()
        code = self.p.wait(timeout=timeout)
        rest = self.p.stdout.read()
        return code, rest, self.p.stderr.read().decode(errors="replace")


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def test_malformed_json_is_a_parse_error_and_the_server_goes_on(workdir):
    raw = Raw(workdir)
    try:
        raw.send(INIT)
        assert raw.read()["result"]["protocolVersion"] == "2025-11-25"
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        raw.send(b"{not json\n")
        err = raw.read()
        assert err["id"] is None and err["error"]["code"] == -32700, err
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "no/such"})
        assert raw.read()["error"]["code"] == -32601
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "run_command", "arguments": {"command": "echo still here", "wait": 10}}})
        answer = raw.read()
        assert answer["id"] == 3 and answer["result"]["structuredContent"]["exit_code"] == 0, answer
    finally:
        code, _, _ = raw.close()
    assert code == 0


def test_the_modern_era_discover_and_call_with_the_revision_in_meta(workdir):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    raw = Raw(workdir)
    try:
        raw.send({"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": meta}})
        discover = raw.read()["result"]
        assert discover["supportedVersions"] == ["2026-07-28"] and discover["resultType"] == "complete"
        raw.send({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                  "params": {"_meta": meta, "name": "run_command", "arguments": {"command": "echo modern", "wait": 10}}})
        call = raw.read()["result"]
        assert call["resultType"] == "complete" and call["structuredContent"]["output"][0]["data"].strip() == "modern"
        raw.send({"jsonrpc": "2.0", "id": "x", "method": "tools/list",
                  "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}})
        assert raw.read()["error"]["code"] == -32022
    finally:
        code, _, _ = raw.close()
    assert code == 0


def cgroups_named(pid):
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(root, d) for d in dirs if d.startswith(f"box-{pid}-")]
    return found


def processes_in_boxes_of(pid):
    """Processes whose cgroup is one of the boxes of the agentbox mcp with this pid."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cgroup") as f:
                    if f"/box-{pid}-" in f.read():
                        found.append(int(entry))
            except OSError:
                pass  # gone meanwhile
    return found


def test_stdin_closed_ends_the_server_with_nothing_left_behind(workdir):
    raw = Raw(workdir, "--memory", "256M")
    raw.send(INIT)
    raw.read()
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "run_command", "arguments": {"command": "sleep 300", "wait": 0}}})
    assert raw.read()["result"]["structuredContent"]["status"] == "running"
    pid = raw.p.pid
    assert cgroups_named(pid), "the box's cgroup, while it runs"  # the controls of the checks below
    assert processes_in_boxes_of(pid)
    with open(f"/proc/{pid}/mountinfo") as f:
        assert os.path.join(workdir, "state") in f.read()  # its state, mounted in its own namespace only
    code, rest, stderr = raw.close()
    assert code == 0, stderr
    assert rest == b""
    assert cgroups_named(pid) == []
    with open("/proc/self/mountinfo") as f:
        assert workdir not in f.read()
    assert processes_in_boxes_of(pid) == []


def test_sigterm_stops_it_as_the_end_of_input_does(workdir):
    raw = Raw(workdir)
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "run_command", "arguments": {"command": "sleep 300", "wait": 0}}})
    assert raw.read()["result"]["structuredContent"]["status"] == "running"
    pid = raw.p.pid
    assert processes_in_boxes_of(pid)  # the control
    raw.p.terminate()
    assert raw.p.wait(timeout=30) == 0
    raw.p.stdin.close()
    assert processes_in_boxes_of(pid) == [] and cgroups_named(pid) == []


# ---- an ordinary user: the boxes `agentbox run` makes for one (its own user namespace, no cgroups)

NOBODY = 65534


def as_nobody():
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def nobodys(workdir):
    """workdir's homes and state handed to nobody, who runs agentbox mcp there."""
    for d in ("caller-home", "boxhome", "state"):
        os.makedirs(os.path.join(workdir, d), exist_ok=True)
        os.chown(os.path.join(workdir, d), NOBODY, NOBODY)
    return workdir


class RawNobody(Raw):
    def __init__(self, workdir, *flags):
        self.p = subprocess.Popen([agentbox_bin(), *mcp_args(workdir, *flags)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=mcp_env(workdir),
                                  preexec_fn=as_nobody)
        self.buf = b""


def state_entries(workdir):
    root = os.path.join(workdir, "state", "agentbox", "mcp")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def test_an_ordinary_user_gets_the_tools_on_runs_box(workdir, origin):
    nobodys(workdir)
    with open(os.path.join(workdir, "caller-home", "secret.txt"), "w") as f:
        f.write("caller-secret-3\n")
    before = len(origin.paths)
    got = sdk(workdir, uid=NOBODY, tour=True, commands=[
        "id -u; id -g", f"cat {workdir}/caller-home/secret.txt", probe(origin, "127.0.0.1"),
        'echo "proxy=$HTTP_PROXY"'])
    assert set(got["tools"]) == MODEL_TOOLS
    echo = got["echo"]["structured"]
    lines = "".join(c["data"] for c in echo["output"]).split()
    assert echo["exit_code"] == 0 and lines[0] == "one" and lines[1] == "/home/" + lines[2], echo
    ids, hidden, net, proxy = got["commands"]
    assert ids["output"].split() == [str(NOBODY), str(NOBODY)], ids  # the caller's ids, mapped as run maps them
    assert hidden["exit_code"] != 0 and "caller-secret" not in hidden["output"], hidden
    assert "direct=0" not in net["output"] and "proxied=0" not in net["output"], net  # no network by default
    assert proxy["output"] == "proxy=\n" and origin.paths[before:] == []
    # The file lands in the run home, the caller's own.
    assert got["read"]["structured"]["content"] == "hello stdio\n", got["read"]
    written = os.path.join(workdir, "boxhome", "notes", "hello.txt")
    with open(written) as f:
        assert f.read() == "hello stdio\n"
    assert os.stat(written).st_uid == NOBODY
    assert got["long"]["structured"]["exit_code"] == 0 and len(got["long"]["progress"]) >= 2
    assert state_entries(workdir) == []  # its state went with it


def test_an_ordinary_users_allow_net_reaches_the_listener_through_the_proxy(workdir, origin):
    nobodys(workdir)
    before = len(origin.paths)
    got = sdk(workdir, "--allow-net", "origin.test", "--add-host", "origin.test=127.0.0.1", "--allow-address",
              "127.0.0.1/32", commands=[probe(origin, "origin.test")], uid=NOBODY)
    out = got["commands"][0]["output"]
    assert f"origin saw /proxied host=origin.test:{origin.port} proxied=0" in out, out
    assert "direct=0" not in out, out
    assert origin.paths[before:] == ["/proxied"]


def test_an_ordinary_user_is_refused_limits_as_run_refuses_them(workdir):
    nobodys(workdir)
    r = subprocess.run([agentbox_bin(), *mcp_args(workdir, "--memory", "256M")], capture_output=True, text=True,
                       timeout=30, env=mcp_env(workdir), preexec_fn=as_nobody, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == ""
    assert "need cgroups, which only root can create" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def processes_running(argv):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[:len(argv)] == argv:
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_an_ordinary_users_run_ends_with_its_input_and_leaves_nothing(workdir):
    nobodys(workdir)
    token = f"300.{os.getpid()}{int(time.time()) % 100000}"
    raw = RawNobody(workdir)
    raw.send(INIT)
    raw.read()
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "run_command", "arguments": {"command": f"sleep {token}", "wait": 0}}})
    assert raw.read()["result"]["structuredContent"]["status"] == "running"
    pid = raw.p.pid
    sleeping = [b"sleep", token.encode()]
    assert processes_running(sleeping), "the command, while it runs"  # the controls of the checks below
    assert state_entries(workdir) == [str(pid), f"{pid}.lock"]
    code, rest, stderr = raw.close()
    assert code == 0, stderr
    assert rest == b""
    assert processes_running(sleeping) == []
    assert state_entries(workdir) == []


def test_an_ordinary_users_killed_run_leaves_state_the_next_one_removes(workdir):
    nobodys(workdir)
    token = f"300.{os.getpid()}{int(time.time()) % 100000}"
    first = RawNobody(workdir)
    first.send(INIT)
    first.read()
    first.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "run_command", "arguments": {"command": f"sleep {token}", "wait": 0}}})
    assert first.read()["result"]["structuredContent"]["status"] == "running"
    assert processes_running([b"sleep", token.encode()])  # the control
    first.p.kill()
    first.p.wait(timeout=30)
    deadline = time.monotonic() + 10
    while processes_running([b"sleep", token.encode()]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_running([b"sleep", token.encode()]) == []  # its box went with it
    assert state_entries(workdir) == [str(first.p.pid), f"{first.p.pid}.lock"]  # the control
    second = RawNobody(workdir)
    try:
        second.send(INIT)
        second.read()
        assert state_entries(workdir) == [str(second.p.pid), f"{second.p.pid}.lock"]
    finally:
        code, _, stderr = second.close()
    assert code == 0, stderr
    assert state_entries(workdir) == []
