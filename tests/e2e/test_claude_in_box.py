"""Claude Code in every box (issue 15): the real CLI, installed by scripts/install-deps.sh, runs in
real boxes as each account's own uid and talks to a scripted fake Anthropic upstream
(tests/fakes/fake_anthropic.py) through the daemon's inference gateway.

The daemon binds the CLI read-only at /agentbox/bin/claude (first on PATH) and the operator's
skills_dir where the CLI looks for managed skills (/etc/claude-code/.claude/skills, a link to
/agentbox/claude-code); the user's ~/.claude stays theirs and persists.
"""
import json
import os
import shlex
import uuid

import pytest

from conftest import run, running_daemon, sh, text_of, wait_done
from agent_support import CLAUDE, REAL_KEY, REAL_KEY_ENV
from fake_anthropic import bash, held, text, tool_result_text

PLACEHOLDER = "sk-ant-agentbox-placeholder-the-gateway-adds-the-real-key"
OPS_SKILL = "ops-report-skill"



@pytest.fixture(scope="module")
def skills_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("skills")
    (d / OPS_SKILL).mkdir()
    (d / OPS_SKILL / "SKILL.md").write_text(
        f"---\nname: {OPS_SKILL}\ndescription: The operator's report skill, in every box.\n---\nWrite the report.\n")
    (d / OPS_SKILL / "template.csv").write_text("a,b\n")
    os.chmod(d, 0o755)  # the boxes' uids read it (pytest makes its temporary directories 0700)
    return d


@pytest.fixture(scope="module")
def cdaemon(fake, skills_dir):
    if not CLAUDE.exists():
        pytest.skip(f"Claude Code CLI not installed at {CLAUDE} (scripts/install-deps.sh installs it)")
    config = f"""
[inference.anthropic]
upstream = "http://127.0.0.1:{fake.port}"
[agent]
claude = "{CLAUDE}"
skills_dir = "{skills_dir}"
"""
    with running_daemon("claude", config_text=config, env=REAL_KEY_ENV) as d:
        yield d


@pytest.fixture
def user(cdaemon):
    c = cdaemon.client(user=f"cc-{uuid.uuid4().hex[:8]}")
    yield c
    c.close()


def marker():
    return "m" + uuid.uuid4().hex[:12]


def claude_p(prompt, *flags):
    """The command line a pipe sends: claude -p PROMPT as stream-json."""
    return " ".join(["claude", "-p", shlex.quote(prompt), "--output-format", "stream-json", "--verbose", *flags])


def events_of(output):
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def run_claude(client, prompt, *flags, prefix=""):
    code, out, err = sh(client, prefix + claude_p(prompt, *flags))
    assert code == 0, (out, err)
    events = events_of(out)
    assert events and events[-1]["type"] == "result", out
    return events


def test_a_missing_cli_is_no_agent_said_once_not_a_failed_start(make_daemon):
    d = make_daemon(tag="claude-missing", config_text='[agent]\nclaude = "/nonexistent/claude"\n')
    d.start()
    assert d.log_tail(20000).count("agent: none: [agent] claude /nonexistent/claude is not an executable file") == 1
    with d.client(user=f"cc-{uuid.uuid4().hex[:8]}") as c:
        code, out, _ = sh(c, 'command -v claude || echo no-claude; echo "$PATH"; test -e /agentbox || echo no-mounts')
        assert (code, out) == (0, "no-claude\n/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nno-mounts\n")


def test_claude_runs_in_a_box_from_its_path(user, cdaemon):
    code, out, err = sh(user, 'command -v claude; claude --version; echo "$CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"')
    assert code == 0, err
    assert out.splitlines() == ["/agentbox/bin/claude", "2.1.197 (Claude Code)", "1"]
    assert "agent: Claude Code" in cdaemon.log_tail(20000)


def test_a_pipe_streams_claude_events_through_long_polls(user, fake):
    m = marker()
    fake.route(lambda r: m in r.last_user_text, held(text(f"streamed answer {m}")))
    p = run(user, claude_p(m), wait=0, pty=False)
    assert p["status"] == "running"
    # Long polls, as an Open WebUI pipe makes them: the CLI's first events arrive while the
    # upstream still holds its answer, i.e. while the process runs.
    seen, offset = "", 0
    upstream = None
    while upstream is None or '"type":"system"' not in seen:
        r = user.get(f"/execute/{p['id']}/status", params={"offset": offset, "wait": 5})
        assert r.status_code == 200, r.text
        st = r.json()
        seen += text_of(st, ("stdout",))
        offset = st["next_offset"]
        assert st["status"] == "running", (st, seen)
        if upstream is None:
            upstream = fake.wait_for(lambda r: m in r.last_user_text, timeout=30)
    fake.release()
    done = wait_done(user, p["id"], timeout=30)
    assert done["status"] == "done" and done["exit_code"] == 0, done
    r = user.get(f"/execute/{p['id']}/status", params={"offset": offset})
    seen += text_of(r.json(), ("stdout",))
    events = events_of(seen)
    assert [e["type"] for e in events][0] == "system" and events[-1]["type"] == "result"
    assert events[-1]["result"] == f"streamed answer {m}"
    assert any(e["type"] == "assistant" for e in events)
    # It went through the gateway: the stream the fake sent arrived whole.
    assert upstream.path == "/v1/messages" and upstream.stream and upstream.done.is_set()


def test_the_upstream_sees_the_operators_key_whatever_the_command_line_carries(user, fake):
    m = marker()
    fake.route(lambda r: m in r.last_user_text, text("keyed"))
    events = run_claude(user, m, prefix="ANTHROPIC_API_KEY=sk-ant-fromcmdline ")
    assert events[-1]["result"] == "keyed"
    got = fake.wait_for(lambda r: m in r.last_user_text)
    assert got.headers["x-api-key"] == REAL_KEY
    headers = json.dumps(got.headers)
    assert "sk-ant-fromcmdline" not in headers and PLACEHOLDER not in headers
    assert "authorization" not in got.headers
    # The control: that key really was the CLI's, the one it says it used.
    assert events[0]["type"] == "system" and events[0]["apiKeySource"] == "ANTHROPIC_API_KEY"
    _, out, _ = sh(user, "ANTHROPIC_API_KEY=sk-ant-fromcmdline printenv ANTHROPIC_API_KEY")
    assert out == "sk-ant-fromcmdline\n"


def test_a_bash_tool_turn_runs_the_command_in_the_box_as_the_account(user, fake):
    m = marker()
    fake.route(lambda r: m in r.last_user_text,
               *bash(f"echo 'id,{m}' > report.csv && id -u", then=f"wrote report {m}"))
    events = run_claude(user, m, "--permission-mode", "bypassPermissions")
    assert events[-1]["result"] == f"wrote report {m}"
    code, out, _ = sh(user, "cat report.csv; stat -c %u report.csv; id -u")
    assert code == 0
    content, owner, uid = out.splitlines()
    assert content == f"id,{m}" and owner == uid and int(uid) >= 1000000
    # The tool's output went back to the model in the next request.
    follow = fake.wait_for(lambda r: m in r.last_user_text and r.tool_results)
    assert tool_result_text(follow.tool_results[0]).strip() == uid


def test_the_operators_skill_is_offered_beside_the_users_own(user, fake):
    code, _, err = sh(user, "mkdir -p ~/.claude/skills/my-own-skill && cat > ~/.claude/skills/my-own-skill/SKILL.md <<'EOF'\n"
                            "---\nname: my-own-skill\ndescription: The user's own skill.\n---\nhi\nEOF\n")
    assert code == 0, err
    m = marker()
    fake.route(lambda r: m in r.last_user_text, text("skills seen"))
    events = run_claude(user, m)
    assert OPS_SKILL in events[0]["skills"] and "my-own-skill" in events[0]["skills"]
    got = fake.wait_for(lambda r: m in r.last_user_text)
    assert OPS_SKILL in got.all_text() and "my-own-skill" in got.all_text()


def test_the_user_cannot_change_the_cli_or_a_skill(user, skills_dir):
    before = (CLAUDE.resolve().stat().st_size, CLAUDE.resolve().stat().st_mtime_ns)
    skill = f"/etc/claude-code/.claude/skills/{OPS_SKILL}/SKILL.md"
    attempts = [
        "echo x >> /agentbox/bin/claude",
        "cp /bin/true /agentbox/bin/claude",
        "rm -f /agentbox/bin/claude",
        "mv /agentbox/bin/claude /agentbox/bin/old",
        f"echo x >> {skill}",
        f"rm -f {skill}",
        "mkdir /agentbox/claude-code/.claude/skills/planted",
        "ln -sfn /tmp /etc/claude-code",
    ]
    for attempt in attempts:
        code, _, _ = sh(user, attempt)
        assert code != 0, attempt
    code, out, _ = sh(user, f"claude --version && cat {skill} | head -2")
    assert code == 0 and "2.1.197" in out and OPS_SKILL in out
    assert (CLAUDE.resolve().stat().st_size, CLAUDE.resolve().stat().st_mtime_ns) == before
    assert sorted(p.name for p in skills_dir.iterdir()) == [OPS_SKILL]
    # The control: the same kinds of writes in the user's own Claude directory work.
    code, _, err = sh(user, "mkdir -p ~/.claude/skills/planted && echo x >> ~/.claude/skills/planted/SKILL.md "
                            "&& rm ~/.claude/skills/planted/SKILL.md && ln -sfn /tmp ~/.claude/link && cp /bin/true ~/true")
    assert code == 0, err


def test_claude_home_persists_over_a_daemon_restart(cdaemon, fake):
    """Last in the module: it restarts the module's daemon."""
    name = f"cc-restart-{uuid.uuid4().hex[:8]}"
    m = marker()
    fake.route(lambda r: m in r.last_user_text, text(f"first turn {m}"), text("second turn"))
    with cdaemon.client(user=name) as c:
        events = run_claude(c, m)
        session = events[-1]["session_id"]
        code, out, _ = sh(c, f"ls ~/.claude.json ~/.claude/projects/*/{session}.jsonl")
        assert code == 0, out
    cdaemon.stop()
    cdaemon.start()
    with cdaemon.client(user=name) as c:
        code, out, _ = sh(c, f"ls ~/.claude/projects/*/{session}.jsonl")
        assert code == 0, out
        events = run_claude(c, f"again {m}", "--resume", session)
        assert events[-1]["result"] == "second turn"
    resumed = fake.wait_for(lambda r: f"again {m}" in r.last_user_text)
    assert f"first turn {m}" in json.dumps(resumed.messages)  # the first turn came back from ~/.claude
