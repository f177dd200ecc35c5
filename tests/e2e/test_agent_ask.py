"""Ask mode (issue 32): `claude-code-ask` runs Claude Code with `--permission-mode default
--permission-prompt-tool stdio`. A tool call that needs permission is held: the streamed answer
ends with a question naming the exact action, and the chat's next message answers it on the same
warm CLI (`yes` runs it, `no because X` refuses it and the model is told X); an unanswered question
expires as denied after [agent] approval_timeout. Every decision is listed as `approvals` by
GET /agent/sessions/{id}.

The real CLI runs in the boxes against the scripted upstream (tests/fakes/fake_anthropic.py):
`[[bash: CMD]]` makes the model call Bash. The control of "held" is "yes": the same call runs.
"""
import json
import time
import uuid

import httpx
import pytest

from conftest import running_daemon, sh
from agent_support import REAL_KEY_ENV, agent_config, requires_claude
from fake_anthropic import tool_result_text

APPROVAL_TIMEOUT = 6

pytestmark = requires_claude


@pytest.fixture(scope="module")
def adaemon(fake):
    with running_daemon("agent-ask", config_text=agent_config(fake, approval_timeout=APPROVAL_TIMEOUT),
                        env=REAL_KEY_ENV) as d:
        yield d


def client(d, user, chat):
    c = d.client(timeout=httpx.Timeout(120.0))
    c.headers.update({"X-OpenWebUI-User-Id": user, "X-OpenWebUI-Chat-Id": chat})
    return c


def stream(c, prompt, model="claude-code-ask"):
    """The streamed answer's text, as an OpenAI client assembles it."""
    text = ""
    with c.stream("POST", "/v1/chat/completions",
                  json={"model": model, "stream": True, "messages": [{"role": "user", "content": prompt}]}) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: ") and line.strip() != "data: [DONE]":
                for choice in json.loads(line[6:])["choices"]:
                    text += choice["delta"].get("content") or ""
    return text


def exists(c, path):
    return sh(c, f"test -e {path} && echo yes || echo no")[1].strip() == "yes"


def tool_results_after(fake, count):
    """The tool results the upstream received in the agent turns after the first `count`."""
    return [tool_result_text(b) for r in fake.agent_turns()[count:] for b in r.tool_results]


def session_of(c, chat):
    for s in c.get("/agent/sessions").json()["sessions"]:
        if s.get("chat") == chat:
            return s["id"]
    raise AssertionError(f"no session for chat {chat}")


def held_call(c, chat):
    home = sh(c, "echo $HOME")[1].strip()
    path = f"{home}/chats/{chat}/asked-{uuid.uuid4().hex[:6]}"
    answer = stream(c, f"make it [[bash: touch {path}]]")
    return path, answer


def test_yes_runs_the_held_command(adaemon, fake):
    chat = str(uuid.uuid4())
    with client(adaemon, "ask-" + uuid.uuid4().hex[:8], chat) as c:
        path, question = held_call(c, chat)
        assert "Approval needed" in question and f"touch {path}" in question, question
        assert "yes" in question and "always" in question and "no" in question
        assert not exists(c, path)  # held, not run
        answer = stream(c, "yes")
        assert exists(c, path), answer  # the control: the same call, allowed, runs
        assert "done:" in answer and "Approval needed" not in answer, answer
        approvals = c.get(f"/agent/sessions/{session_of(c, chat)}").json()["approvals"]
        assert [(a["tool"], a["decision"]) for a in approvals] == [("Bash", "yes")], approvals
        assert approvals[0]["input"]["command"] == f"touch {path}" and approvals[0]["time"]
        md = c.get(f"/agent/sessions/{session_of(c, chat)}", params={"format": "markdown"}).text
        assert "## Approvals" in md and f"touch {path}" in md


def test_always_allows_the_tool_for_the_rest_of_the_chat(adaemon, fake):
    chat = str(uuid.uuid4())
    with client(adaemon, "ask-" + uuid.uuid4().hex[:8], chat) as c:
        path, question = held_call(c, chat)
        assert f"touch {path}" in question, question
        answer = stream(c, "always")
        assert exists(c, path), answer
        second, answer = held_call(c, chat)  # Bash again in this chat: not asked
        assert exists(c, second) and "Approval needed" not in answer, answer
        approvals = c.get(f"/agent/sessions/{session_of(c, chat)}").json()["approvals"]
        assert [a["decision"] for a in approvals] == ["always"], approvals
    with client(adaemon, "ask-" + uuid.uuid4().hex[:8], str(uuid.uuid4())) as c:  # another chat: asked again
        path, question = held_call(c, c.headers["X-OpenWebUI-Chat-Id"])
        assert "Approval needed" in question and not exists(c, path), question


def test_no_denies_it_and_the_model_is_told_why(adaemon, fake):
    chat = str(uuid.uuid4())
    with client(adaemon, "ask-" + uuid.uuid4().hex[:8], chat) as c:
        path, question = held_call(c, chat)
        assert f"touch {path}" in question, question
        before = len(fake.agent_turns())
        reason = "no because the disk is reserved-" + uuid.uuid4().hex[:6]
        answer = stream(c, reason)
        assert not exists(c, path), answer
        assert any(reason in t for t in tool_results_after(fake, before)), fake.agent_turns()[before:]
        approvals = c.get(f"/agent/sessions/{session_of(c, chat)}").json()["approvals"]
        assert [(a["decision"], a["reason"]) for a in approvals] == [("no", reason)], approvals


def test_switching_the_model_refuses_the_question(adaemon, fake):
    chat = str(uuid.uuid4())
    with client(adaemon, "ask-" + uuid.uuid4().hex[:8], chat) as c:
        path, question = held_call(c, chat)
        assert f"touch {path}" in question, question
        answer = stream(c, "yes", model="claude-code")  # a message of its own to another CLI
        assert "fake answer to: yes" in answer, answer
        sid = session_of(c, chat)
        deadline = time.monotonic() + 30
        while not c.get(f"/agent/sessions/{sid}").json()["approvals"]:
            assert time.monotonic() < deadline, "the switch never answered the question"
            time.sleep(0.2)
        assert [a["decision"] for a in c.get(f"/agent/sessions/{sid}").json()["approvals"]] == ["no"]
        assert not exists(c, path)


def test_an_unanswered_question_expires_as_denied(adaemon, fake):
    chat = str(uuid.uuid4())
    with client(adaemon, "ask-" + uuid.uuid4().hex[:8], chat) as c:
        path, question = held_call(c, chat)
        assert f"touch {path}" in question, question
        sid = session_of(c, chat)
        deadline = time.monotonic() + APPROVAL_TIMEOUT + 30
        while not c.get(f"/agent/sessions/{sid}").json()["approvals"]:
            assert time.monotonic() < deadline, "the question never expired"
            time.sleep(0.5)
        assert [a["decision"] for a in c.get(f"/agent/sessions/{sid}").json()["approvals"]] == ["expired"]
        answer = stream(c, "yes")  # too late: a message of its own now, nothing runs
        assert not exists(c, path), answer


def test_ask_mode_needs_warm_clis(make_daemon, fake):
    d = make_daemon(tag="agent-ask-cold", config_text=agent_config(fake, warm_per_account=0),
                    env=REAL_KEY_ENV, lifetime=300).start()
    with client(d, "ask-" + uuid.uuid4().hex[:8], str(uuid.uuid4())) as c:
        r = c.post("/v1/chat/completions",
                   json={"model": "claude-code-ask", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400 and "warm" in r.json()["error"]["message"], r.text
        r = c.post("/v1/chat/completions",  # the control: the full mode runs there
                   json={"model": "claude-code", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200, r.text


def test_ask_mode_is_refused_where_no_question_can_be_shown(adaemon):
    with client(adaemon, "ask-" + uuid.uuid4().hex[:8], str(uuid.uuid4())) as c:
        r = c.post("/agent/runs", json={"prompt": "hi", "model": "claude-code-ask"})
        assert r.status_code == 400 and "/v1/chat/completions" in r.json()["detail"], r.text
        del c.headers["X-OpenWebUI-Chat-Id"]  # no chat: no next message to answer in
        r = c.post("/v1/chat/completions",
                   json={"model": "claude-code-ask", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400 and "chat" in r.json()["error"]["message"], r.text
        r = c.post("/v1/chat/completions",  # the control: the full mode answers without a chat
                   json={"model": "claude-code", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200, r.text
