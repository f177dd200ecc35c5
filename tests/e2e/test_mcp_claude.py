"""/mcp with the real Claude Code CLI as the MCP client: `claude -p` on the host, its
--mcp-config naming agentbox over Streamable HTTP, and the scripted upstream
(tests/fakes/fake_anthropic.py) as its model, which answers the first turn with a call of
agentbox's run_command tool. The command prints what only the user's box can (its hostname and
the box uid) and writes a file in the home: the test finds the file through the REST API as
that user (not as another) and the output in the tool_result the CLI sent back upstream.

Once with the shared key and X-User-Id in an --mcp-config (as a team's config would send), once
with a per-user key (`agentbox keys create`, as one person's laptop would) added with
`claude mcp add --transport http`, the README's steps."""
import json
import os
import subprocess
import tempfile
import uuid

import pytest

from agent_support import CLAUDE, requires_claude
from conftest import agentbox_bin, remove_workdir, sh
from fake_anthropic import text, tool_result_text, tool_use

pytestmark = requires_claude

TOOL = "mcp__agentbox__run_command"


def new_user(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def claude_with_agentbox(daemon, fake, headers, prompt, *, added=False):
    """`claude -p PROMPT` in a private HOME with agentbox as its only MCP server: named by
    --mcp-config, or (added) by `claude mcp add --transport http` first, as README.md says;
    (returncode, the parsed --output-format json result, stderr)."""
    home = tempfile.mkdtemp(prefix="agentbox-e2e-mcp-claude-", dir="/tmp")
    env = {"PATH": os.environ["PATH"], "HOME": home, "ANTHROPIC_BASE_URL": fake.url,
           "ANTHROPIC_API_KEY": "sk-ant-mcp-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"}
    # Root may not use the bypass modes: the one tool is allowed by name instead.
    args = [str(CLAUDE), "-p", prompt, "--output-format", "json", "--allowedTools", TOOL, "--max-turns", "3"]
    try:
        if added:
            add = [str(CLAUDE), "mcp", "add", "--transport", "http", "agentbox", f"{daemon.url}/mcp"]
            for name, value in headers.items():
                add += ["--header", f"{name}: {value}"]
            made = subprocess.run(add, cwd=home, env=env, capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
            assert made.returncode == 0, made.stderr + made.stdout
        else:
            config = {"mcpServers": {"agentbox": {"type": "http", "url": f"{daemon.url}/mcp", "headers": headers}}}
            args += ["--strict-mcp-config", "--mcp-config", json.dumps(config)]
        run = subprocess.run(args, cwd=home, env=env, capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)
    finally:
        remove_workdir(home)
    try:
        result = json.loads(run.stdout)
    except ValueError:
        result = {"unparsed": run.stdout}
    return run.returncode, result, run.stderr


def box_marker(client):
    """What only this user's box prints: its hostname and the uid its commands run as."""
    code, out, err = sh(client, "echo $(hostname):$(id -u)")
    assert code == 0, err
    return out.strip()


def run_through_claude(daemon, fake, client, headers, other, *, added=False, wait=20):
    """Scripts the upstream, runs the CLI, and checks both ends; client: REST as the user, other:
    REST as another user (the control that the file is the user's only); wait=None: the call
    leaves it out, as a model may (the MCP default answers when the command ends)."""
    marker = box_marker(client)
    assert marker.split(":")[1] != str(os.getuid())  # the box's uid is not the host's
    token = uuid.uuid4().hex
    command = f"echo \"box=$(hostname):$(id -u) {token}\" | tee mcp-claude.txt"
    fake.reset()
    call = {"command": command} if wait is None else {"command": command, "wait": wait}
    fake.queue(tool_use(TOOL, call, preamble="Running it in the box."),
               text(f"The box said so: {token}"))
    rc, result, stderr = claude_with_agentbox(daemon, fake, headers, f"Run the marker command {token}", added=added)
    assert rc == 0, (rc, result, stderr[-3000:])
    assert result.get("is_error") is False and token in result.get("result", ""), result

    turns = fake.agent_turns()
    assert len(turns) >= 2, [t.reply_name for t in turns]
    # The model was offered agentbox's tool under the CLI's mcp__SERVER__TOOL name.
    assert TOOL in turns[0].tools, turns[0].tools
    results = turns[1].tool_results
    assert len(results) == 1 and not results[0].get("is_error"), results
    said = tool_result_text(results[0])
    assert f"box={marker} {token}" in said, said  # the box's output reached the upstream
    assert '"exit_code":0' in said.replace(" ", ""), said

    # The command ran in this user's box: the file is in their home...
    r = client.get("/files/read", params={"path": "mcp-claude.txt"})
    assert r.status_code == 200, r.text
    assert f"box={marker} {token}" in json.dumps(r.json()), r.text
    # ...and only there (the control: another user's same path is not found).
    assert other.get("/files/read", params={"path": "mcp-claude.txt"}).status_code == 404


def test_claude_code_runs_a_command_in_the_users_box_with_the_shared_key(daemon, fake, clients):
    alice = new_user("alice")
    client = clients(user=alice)
    headers = {"Authorization": f"Bearer {daemon.api_key}", "X-User-Id": alice}
    run_through_claude(daemon, fake, client, headers, clients.user("bob"))


def test_claude_code_runs_a_command_in_the_users_box_with_a_per_user_key(daemon, fake, clients):
    alice = new_user("alice")
    made = subprocess.run([agentbox_bin(), "keys", "create", alice, "--name", "mcp", "--listen",
                           f"127.0.0.1:{daemon.port}", "--state", daemon.state_dir],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("abk_"), made.stdout
    client = clients(user=None, key=key)
    # Added as README.md says (`claude mcp add --transport http ... --header ...`).
    # Without wait: the tool's default lets the output of the short command reach the model.
    run_through_claude(daemon, fake, client, {"Authorization": f"Bearer {key}"}, clients.user("bob"), added=True,
                       wait=None)


def test_a_bad_key_gives_claude_code_no_agentbox_tools(daemon, fake):
    # The control of the two above: the same run with a wrong key offers the model no tool of
    # agentbox's (the CLI reports the server failed and goes on without it).
    fake.reset()
    fake.queue(text("no tools here"))
    rc, result, stderr = claude_with_agentbox(
        daemon, fake, {"Authorization": "Bearer not-the-key", "X-User-Id": new_user("eve")}, "hello")
    turns = fake.agent_turns()
    assert turns, (rc, result, stderr[-2000:])
    assert not any(name.startswith("mcp__agentbox__") for name in turns[0].tools), turns[0].tools
