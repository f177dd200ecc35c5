"""One run per chat (issue 32): a turn of a chat whose previous turn still runs waits for it, in
order, and then resumes the session that turn left, so two Claude Code CLIs never share a
session. Chats (also one user's) do not wait for each other; a client that leaves while its
turn waits takes the turn out of the line (it never reaches the model); at most
[agent] queued_turns_per_chat turns wait, one more is a 429 in OpenAI's error shape.

The real CLI runs in the boxes against the scripted upstream (tests/fakes/fake_anthropic.py):
`[[hold NAME]]` in a prompt holds that turn's answer until the test releases it, and the fake
records when each request arrived and when its answer ended. That a turn waits is read from
the daemon's log ("a turn waits for the one running").
"""
import json
import re
import socket
import threading
import time
import uuid

import httpx
import pytest

from conftest import running_daemon
from agent_support import REAL_KEY_ENV, agent_config, requires_claude

QUEUED = 2  # [agent] queued_turns_per_chat of this daemon

pytestmark = requires_claude


@pytest.fixture(scope="module")
def qdaemon(fake):
    with running_daemon("agent-one-run", config_text=agent_config(fake, queued_turns_per_chat=QUEUED), env=REAL_KEY_ENV) as d:
        yield d


def owui_headers(user, chat):
    return {"X-OpenWebUI-User-Id": user, "X-OpenWebUI-Chat-Id": chat}


def client(d, user, chat):
    c = d.client(timeout=httpx.Timeout(120.0))
    c.headers.update(owui_headers(user, chat))
    return c


def body(prompt, stream=False):
    return {"model": "claude-code", "stream": stream, "messages": [{"role": "user", "content": prompt}]}


def answer_of(r):
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


class Background:
    """A whole (not streamed) turn sent on its own thread; .result once it is answered, and
    .answered: when (time.monotonic())."""

    def __init__(self, d, user, chat, prompt):
        self.result, self.answered = None, None

        def go():
            with client(d, user, chat) as c:
                self.result = c.post("/v1/chat/completions", json=body(prompt))
                self.answered = time.monotonic()
        self.thread = threading.Thread(target=go, daemon=True)
        self.thread.start()

    def join(self, timeout=120):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the turn was never answered"
        return self.result


class RawTurn:
    """A turn sent over a socket of its own, so that the test can hang up while it waits."""

    def __init__(self, d, user, chat, prompt):
        data = json.dumps(body(prompt)).encode()
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n")
        if d.api_key:
            head += f"Authorization: Bearer {d.api_key}\r\n"
        for name, value in owui_headers(user, chat).items():
            head += f"{name}: {value}\r\n"
        self.sock = socket.create_connection(("127.0.0.1", d.port), timeout=30)
        self.sock.sendall(head.encode() + b"\r\n" + data)

    def hang_up(self):
        self.sock.close()


def waits_logged(d, chat):
    """How many times the daemon logged that a turn of chat waits."""
    with open(d.log_path, "rb") as f:
        log = f.read().decode(errors="replace")
    return len(re.findall(rf"chat {re.escape(chat)} of \S+: a turn waits for the one running", log))


def wait_until(what, condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not in {timeout} s: {what}"
        time.sleep(0.05)


def agent_turns_with(fake, needle):
    return [r for r in fake.agent_turns() if needle in r.last_user_text]


def claude_processes(d, user):
    with d.client(user=user) as c:
        return [p for p in c.get("/execute").json() if p["command"].startswith("claude")]


def session_of(r):
    """The Claude session a CLI's request belongs to (its metadata names it)."""
    user_id = ((r.body or {}).get("metadata") or {}).get("user_id", "")
    m = re.search(r"session_([0-9a-f-]{36})", user_id)
    if m:
        return m.group(1)
    return json.loads(user_id).get("session_id") if user_id.startswith("{") else None


def test_two_turns_of_a_chat_sent_at_once_run_one_after_the_other(qdaemon, fake):
    user, chat = f"q-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    first, second, gate = ("first-" + uuid.uuid4().hex[:6], "second-" + uuid.uuid4().hex[:6],
                           "g-" + uuid.uuid4().hex[:6])
    a = Background(qdaemon, user, chat, f"start {first} [[hold {gate}]]")
    try:
        fake.wait_for(lambda r: r.is_agent_turn and first in r.last_user_text, timeout=60)
        b = Background(qdaemon, user, chat, f"then {second}")
        wait_until("the second turn waits", lambda: waits_logged(qdaemon, chat) == 1)
        time.sleep(1.0)  # time for a CLI that should not have started to show
        assert agent_turns_with(fake, second) == []
        assert len(claude_processes(qdaemon, user)) == 1, "a second CLI started beside the first"
        assert b.result is None
    finally:
        fake.release(gate)
    assert first in answer_of(a.join())
    assert f"fake answer to: then {second}" in answer_of(b.join())
    r1, r2 = agent_turns_with(fake, first)[-1], agent_turns_with(fake, second)[-1]
    # The fake saw the second turn only once the first's answer had ended and reached its client.
    assert r2.arrived > r1.answered and r2.arrived > a.answered
    # It resumed the session the first one produced: the same session, the first turn in it.
    assert first in r2.all_text()
    if session_of(r1):
        assert session_of(r2) == session_of(r1), (r1.body.get("metadata"), r2.body.get("metadata"))
    with client(qdaemon, user, chat) as c:
        sessions = [s for s in c.get("/agent/sessions").json()["sessions"] if s["chat"] == chat]
    assert len(sessions) == 1 and first in sessions[0]["title"], sessions


def test_two_chats_of_one_user_run_at_once(qdaemon, fake):
    user, gate = f"q-{uuid.uuid4().hex[:8]}", "g-" + uuid.uuid4().hex[:6]
    chats = [str(uuid.uuid4()), str(uuid.uuid4())]
    marks = ["one-" + uuid.uuid4().hex[:6], "two-" + uuid.uuid4().hex[:6]]
    turns = []
    try:
        for chat, mark in zip(chats, marks):
            turns.append(Background(qdaemon, user, chat, f"run {mark} [[hold {gate}]]"))
        # Both reach the model while both are held: neither waits for the other.
        for mark in marks:
            fake.wait_for(lambda r, m=mark: r.is_agent_turn and m in r.last_user_text, timeout=60)
        assert all(waits_logged(qdaemon, chat) == 0 for chat in chats)
        assert len(claude_processes(qdaemon, user)) == 2
    finally:
        fake.release(gate)
    for t, mark in zip(turns, marks):
        assert mark in answer_of(t.join())


def test_a_turn_whose_client_leaves_while_it_waits_never_runs(qdaemon, fake):
    user, chat = f"q-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    first, gone, later, gate = ("first-" + uuid.uuid4().hex[:6], "gone-" + uuid.uuid4().hex[:6],
                                "later-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6])
    a = Background(qdaemon, user, chat, f"start {first} [[hold {gate}]]")
    try:
        fake.wait_for(lambda r: r.is_agent_turn and first in r.last_user_text, timeout=60)
        waiting = RawTurn(qdaemon, user, chat, f"never {gone}")
        wait_until("the turn waits", lambda: waits_logged(qdaemon, chat) == 1)
        waiting.hang_up()
        wait_until("the daemon saw it leave", lambda: "a waiting turn's client left" in qdaemon.log_tail(20000))
    finally:
        fake.release(gate)
    assert first in answer_of(a.join())
    # The chat's next turn runs at once after the first, resuming its session, not the gone one's.
    with client(qdaemon, user, chat) as c:
        assert f"fake answer to: go on {later}" in answer_of(c.post("/v1/chat/completions", json=body(f"go on {later}")))
    assert agent_turns_with(fake, gone) == [] and gone not in agent_turns_with(fake, later)[-1].all_text()
    assert first in agent_turns_with(fake, later)[-1].all_text()
    assert len(claude_processes(qdaemon, user)) == 1  # the first turn's CLI, warm, took the later one


def test_a_running_turn_whose_client_leaves_stops_and_lets_the_next_run(qdaemon, fake):
    user, chat = f"q-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    first, second, gate = ("first-" + uuid.uuid4().hex[:6], "second-" + uuid.uuid4().hex[:6],
                           "g-" + uuid.uuid4().hex[:6])
    running = RawTurn(qdaemon, user, chat, f"start {first} [[hold {gate}]]")
    try:
        fake.wait_for(lambda r: r.is_agent_turn and first in r.last_user_text, timeout=60)
        b = Background(qdaemon, user, chat, f"then {second}")
        wait_until("the second turn waits", lambda: waits_logged(qdaemon, chat) == 1)
        running.hang_up()  # its turn is interrupted (held upstream or not), and the chat passes on
        # The CLI tells the model the turn before was interrupted; the new prompt follows.
        assert f"then {second}" in answer_of(b.join())
    finally:
        fake.release(gate)
    procs = claude_processes(qdaemon, user)
    assert len(procs) == 1 and procs[0]["status"] == "running", procs  # the chat's warm CLI took both


def test_one_turn_too_many_waiting_is_a_429_in_openais_shape(qdaemon, fake):
    user, chat, gate = f"q-{uuid.uuid4().hex[:8]}", str(uuid.uuid4()), "g-" + uuid.uuid4().hex[:6]
    first, extra = "first-" + uuid.uuid4().hex[:6], "extra-" + uuid.uuid4().hex[:6]
    a = Background(qdaemon, user, chat, f"start {first} [[hold {gate}]]")
    waiting = []
    try:
        fake.wait_for(lambda r: r.is_agent_turn and first in r.last_user_text, timeout=60)
        for i in range(QUEUED):
            waiting.append(RawTurn(qdaemon, user, chat, f"wait {i} {extra}"))
            wait_until(f"turn {i} waits", lambda n=i + 1: waits_logged(qdaemon, chat) == n)
        with client(qdaemon, user, chat) as c:
            started = time.monotonic()
            r = c.post("/v1/chat/completions", json=body(f"one too many {extra}"))
            assert time.monotonic() - started < 5  # refused at once, not after the wait
        assert r.status_code == 429, r.text
        error = r.json()["error"]
        assert error["type"] == "rate_limit_error" and error["code"] == "chat_busy", error
        assert f"{QUEUED} waiting" in error["message"], error
        # Another chat of the same user is not refused (it runs at once).
        with client(qdaemon, user, str(uuid.uuid4())) as c:
            assert c.post("/v1/chat/completions", json=body("another chat")).status_code == 200
    finally:
        for w in waiting:
            w.hang_up()
        fake.release(gate)
    assert first in answer_of(a.join())
    assert agent_turns_with(fake, extra) == []
