"""Approval modes (issue 32), each a model of /v1/models: `claude-code` runs every tool
(bypassPermissions), `claude-code-edits` edits files without asking (acceptEdits),
`claude-code-plan` reads and plans and changes nothing (plan). What a mode would have to ask for is
refused: the tool call gets an error result that the model reads.

The real CLI runs in the boxes against the scripted upstream (tests/fakes/fake_anthropic.py): a
route makes the model call Write, `[[bash: CMD]]` makes it call Bash. Each refusal has its control:
the same call under `claude-code` changes the home.
"""
import uuid

import httpx
import pytest

from conftest import running_daemon, sh
from agent_support import REAL_KEY_ENV, agent_config, requires_claude
from fake_anthropic import tool_use


pytestmark = requires_claude


@pytest.fixture(scope="module")
def mdaemon(fake):
    with running_daemon("agent-modes", config_text=agent_config(fake), env=REAL_KEY_ENV) as d:
        yield d


def client(d, user, chat=None):
    c = d.client(timeout=httpx.Timeout(120.0))
    c.headers.update({"X-OpenWebUI-User-Id": user, "X-OpenWebUI-Chat-Id": chat or str(uuid.uuid4())})
    return c


def ask(c, model, prompt):
    r = c.post("/v1/chat/completions", json={"model": model, "messages": [{"role": "user", "content": prompt}]})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def exists(c, path):
    return sh(c, f"test -e {path} && echo yes || echo no")[1].strip() == "yes"


def tool_result_of(fake, marker):
    """The tool_result the CLI sent back for the call made in the turn that asked marker."""
    for r in fake.agent_turns():  # the first: later turns carry it in their history
        if marker in r.all_text() and r.tool_results:
            return r.tool_results[0]
    raise AssertionError(f"no tool result for {marker}")


def write_call(fake, marker, path, content):
    """The turn that asks marker calls Write(path, content) once."""
    fake.route(lambda r: marker in r.last_user_text and not r.tool_results,
               tool_use("Write", {"file_path": path, "content": content}))


def test_models_lists_the_approval_modes(mdaemon):
    with client(mdaemon, "m-" + uuid.uuid4().hex[:8]) as c:
        ids = [m["id"] for m in c.get("/v1/models").json()["data"]]
        assert ids == ["claude-code", "claude-code-edits", "claude-code-plan", "claude-code-ask"]
        r = c.post("/v1/chat/completions",
                   json={"model": "claude-code-nope", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found", r.text


@pytest.mark.parametrize("model, changes", [("claude-code-plan", False), ("claude-code", True)])
def test_plan_mode_changes_nothing_in_the_home(mdaemon, fake, model, changes):
    user = "plan-" + uuid.uuid4().hex[:8]
    with client(mdaemon, user) as c:
        home = sh(c, "echo $HOME")[1].strip()
        by_bash, by_write = f"{home}/bash-{uuid.uuid4().hex[:6]}", f"{home}/write-{uuid.uuid4().hex[:6]}"
        m1, m2 = "b-" + uuid.uuid4().hex[:6], "w-" + uuid.uuid4().hex[:6]
        ask(c, model, f"{m1} [[bash: touch {by_bash}]]")
        write_call(fake, m2, by_write, "planned")
        ask(c, model, f"{m2} write it")
        assert exists(c, by_bash) is changes and exists(c, by_write) is changes
    for marker in (m1, m2):
        result = tool_result_of(fake, marker)
        assert bool(result.get("is_error")) is not changes, result  # the model is told it was refused


def test_edits_mode_edits_the_chats_files_and_asks_for_the_rest(mdaemon, fake):
    user, chat = "edits-" + uuid.uuid4().hex[:8], str(uuid.uuid4())
    with client(mdaemon, user, chat) as c:
        home = sh(c, "echo $HOME")[1].strip()
        inside, outside = "e-" + uuid.uuid4().hex[:6], "o-" + uuid.uuid4().hex[:6]
        path = f"{home}/chats/{chat}/edited-{inside}.txt"  # the chat's directory: its working directory
        write_call(fake, inside, path, "edited")
        ask(c, "claude-code-edits", f"{inside} write it")
        assert sh(c, f"cat {path}")[1] == "edited"
        elsewhere = f"{home}/outside-{outside}.txt"  # outside it: an edit that needs asking, refused
        write_call(fake, outside, elsewhere, "edited")
        ask(c, "claude-code-edits", f"{outside} write it")
        assert not exists(c, elsewhere)
    assert not tool_result_of(fake, inside).get("is_error")
    assert tool_result_of(fake, outside).get("is_error")
