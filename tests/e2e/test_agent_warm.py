"""Warm sessions (issue 32): a chat's Claude Code CLI stays alive between its turns
(`--input-format stream-json`, one `result` per turn), so a follow-up skips the CLI's start. An
idle one ends after [agent] warm_idle; an account keeps at most [agent] warm_per_account (the least
recently used ends first). Whatever ends a warm CLI (idle, the cap, a crash, a daemon restart:
test_agent_chat.py's restart test), the chat's next turn resumes its session in a new CLI with
nothing lost; a client that leaves mid-turn stops its turn and the chat goes on.

The real CLI runs in the boxes against the scripted upstream (tests/fakes/fake_anthropic.py). How
many CLIs a chat used is read from the user's own process list (GET /execute): the warm CLI is a
command of the account, like every turn's CLI.
"""
import time
import uuid

import httpx
import pytest

from conftest import running_daemon
from agent_support import REAL_KEY_ENV, agent_config, requires_claude


pytestmark = requires_claude


@pytest.fixture(scope="module")
def wdaemon(fake):
    """One warm CLI per account: the cap is reached by a second chat."""
    with running_daemon("agent-warm", config_text=agent_config(fake, warm_per_account=1, warm_idle=300),
                        env=REAL_KEY_ENV) as d:
        yield d


def client(d, user, chat):
    c = d.client(timeout=httpx.Timeout(120.0))
    c.headers.update({"X-OpenWebUI-User-Id": user, "X-OpenWebUI-Chat-Id": chat})
    return c


def ask(c, prompt, stream=False):
    r = c.post("/v1/chat/completions",
               json={"model": "claude-code", "stream": stream, "messages": [{"role": "user", "content": prompt}]})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def claude_processes(c):
    return [p for p in c.get("/execute").json() if p["command"].startswith("claude")]


def running(c):
    return [p for p in claude_processes(c) if p["status"] == "running"]


def wait_until(what, condition, timeout=30):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not in {timeout} s: {what}"
        time.sleep(0.1)


def last_turn_with(fake, needle):
    turns = [r for r in fake.agent_turns() if needle in r.last_user_text]
    assert turns, f"no agent turn asked {needle!r}"
    return turns[-1]


def mark(word):
    return f"{word}-{uuid.uuid4().hex[:6]}"


def test_a_follow_up_runs_on_the_same_cli_with_the_history(wdaemon, fake):
    user, chat = mark("w"), str(uuid.uuid4())
    first, second, third = mark("one"), mark("two"), mark("three")
    with client(wdaemon, user, chat) as c:
        assert f"fake answer to: remember {first}" in ask(c, f"remember {first}")
        cli = running(c)
        assert len(cli) == 1 and "stream-json" in cli[0]["command"], claude_processes(c)
        assert second in ask(c, f"and now {second}")
        assert third in ask(c, f"and then {third}", stream=False)
        # One process served the three turns, and it waits for the next one.
        assert [p["id"] for p in claude_processes(c)] == [cli[0]["id"]]
        assert running(c) == cli
    # The warm CLI is this user's command: another user neither sees nor reaches it.
    with client(wdaemon, mark("other"), str(uuid.uuid4())) as other:
        assert claude_processes(other) == []
        assert other.get(f"/execute/{cli[0]['id']}/status").status_code == 404
        assert other.post(f"/execute/{cli[0]['id']}/input", json={"input": "x"}).status_code == 404
        assert other.delete(f"/execute/{cli[0]['id']}").status_code == 404
    turn = last_turn_with(fake, third)
    assert first in turn.all_text() and second in turn.all_text(), "the third turn carries the first two"


def test_the_cap_ends_the_least_recently_used_cli_and_its_chat_resumes(wdaemon, fake):
    user, chat_a, chat_b = mark("cap"), str(uuid.uuid4()), str(uuid.uuid4())
    a1, b1, a2 = mark("a1"), mark("b1"), mark("a2")
    with client(wdaemon, user, chat_a) as a, client(wdaemon, user, chat_b) as b:
        ask(a, f"remember {a1}")
        cli_a = running(a)
        assert len(cli_a) == 1
        ask(b, f"remember {b1}")
        # warm_per_account = 1: chat A's idle CLI made room for chat B's.
        wait_until("chat A's CLI ends", lambda: [p["id"] for p in running(a)] != [cli_a[0]["id"]])
        now = running(a)
        assert len(now) == 1 and now[0]["id"] != cli_a[0]["id"], claude_processes(a)
        ended = [p for p in claude_processes(a) if p["id"] == cli_a[0]["id"]][0]
        assert ended["status"] == "done" and ended["exit_code"] == 0, ended  # its end of input, not a kill
        # Chat A's next turn resumes its session in a new CLI: nothing lost.
        assert a2 in ask(a, f"and {a2}")
        assert a1 in last_turn_with(fake, a2).all_text()
        assert b1 not in last_turn_with(fake, a2).all_text()
        assert len(running(a)) == 1, "still one warm CLI for the account"


def test_a_warm_cli_that_died_between_turns_is_resumed_in_a_new_one(wdaemon, fake):
    user, chat = mark("crash"), str(uuid.uuid4())
    before, after = mark("before"), mark("after")
    with client(wdaemon, user, chat) as c:
        ask(c, f"remember {before}")
        [cli] = running(c)
        r = c.delete(f"/execute/{cli['id']}", params={"force": "true"})  # as a crash would end it
        assert r.status_code == 200, r.text
        wait_until("the CLI is gone", lambda: not running(c))
        assert after in ask(c, f"then {after}")
        assert before in last_turn_with(fake, after).all_text()
        assert len(running(c)) == 1


def test_a_client_that_leaves_mid_turn_stops_it_and_the_chat_goes_on(wdaemon, fake):
    user, chat = mark("leave"), str(uuid.uuid4())
    first, held, later = mark("first"), mark("held"), mark("later")
    with client(wdaemon, user, chat) as c:
        ask(c, f"remember {first}")
        body = {"model": "claude-code", "stream": True,
                "messages": [{"role": "user", "content": f"a long one {held} [[hold {held}]]"}]}
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if '"content"' in line:
                    break  # the first words: the client leaves
        # The held answer is never released: the chat's next turn runs only because the left
        # turn was stopped (one run per chat), and within the CLI's interrupt, not the hold.
        [cli] = running(c)
        started = time.monotonic()
        assert later in ask(c, f"and {later}")
        assert time.monotonic() - started < 30
        turn = last_turn_with(fake, later)
        assert first in turn.all_text(), "the session went on from where it was"
        # Stopped through the control protocol: the same CLI took the next turn.
        assert running(c) == [cli], claude_processes(c)
    fake.release(held)


def test_warm_idle_ends_an_idle_cli_and_the_chat_resumes(make_daemon, fake):
    d = make_daemon(tag="agent-warm-idle", config_text=agent_config(fake, warm_idle=2),
                    env=REAL_KEY_ENV, lifetime=300).start()
    user, chat = mark("idle"), str(uuid.uuid4())
    first, second = mark("first"), mark("second")
    with client(d, user, chat) as c:
        ask(c, f"remember {first}")
        [cli] = running(c)
        wait_until("the idle CLI ends", lambda: not running(c), timeout=20)
        ended = [p for p in claude_processes(c) if p["id"] == cli["id"]][0]
        assert ended["status"] == "done" and ended["exit_code"] == 0, ended
        assert second in ask(c, f"and {second}")
        assert first in last_turn_with(fake, second).all_text()


def test_without_warm_clis_each_turn_is_a_cli_of_its_own(make_daemon, fake):
    """The control: warm_per_account = 0 runs today's one CLI per turn."""
    d = make_daemon(tag="agent-cold", config_text=agent_config(fake, warm_per_account=0),
                    env=REAL_KEY_ENV, lifetime=300).start()
    user, chat = mark("cold"), str(uuid.uuid4())
    first, second = mark("first"), mark("second")
    with client(d, user, chat) as c:
        ask(c, f"remember {first}")
        ask(c, f"and {second}")
        procs = claude_processes(c)
        assert len(procs) == 2 and not running(c), procs
        assert all("stream-json (warm" not in p["command"] for p in procs)
    assert first in last_turn_with(fake, second).all_text()
