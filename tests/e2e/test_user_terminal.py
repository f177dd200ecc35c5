"""The assistant in the user's terminal (Open Terminal 0.12.4) and lists scoped to the chat.

Open WebUI offers the model read_user_terminal and send_user_terminal_input while the user has a
terminal open beside the chat: the model reads what the terminal shows and answers a prompt of a
program running there. The terminal is the one the user made in this chat (X-Session-Id) and has
attached now; another chat's or another user's is never reached. GET /api/terminals and GET
/execute list the chat's entries when the request names a chat, all of the user's when not.
"""
import asyncio
import time
import uuid

from conftest import run as run_command
from test_terminals import connect, read_until

WAIT = 15


def chat():
    return f"chat-{uuid.uuid4().hex[:8]}"


def read_terminal(client, lines=None, expect=200):
    r = client.get("/user-terminal/read", params={} if lines is None else {"lines": lines})
    assert r.status_code == expect, r.text
    return r.json()


def wait_for_text(client, needle, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while True:
        out = read_terminal(client)["output"]
        if needle in out:
            return out
        assert time.monotonic() < deadline, f"{needle!r} not in the terminal; it shows {out[-1500:]!r}"
        time.sleep(0.1)


def make_terminal(client):
    r = client.post("/api/terminals")
    assert r.status_code == 200, r.text
    return r.json()["id"]


def test_the_model_answers_a_prompt_in_the_users_terminal(clients, daemon):
    user = f"ut-{uuid.uuid4().hex[:8]}"
    c = clients(user=user, session=chat())
    tid = make_terminal(c)

    async def scenario():
        ws = await connect(daemon, tid, user)
        try:
            # The user starts a program that asks something.
            await ws.send(b"read -p 'Your name? ' NAME; echo \"got:$NAME:done\"\r")
            await read_until(ws, b"Your name? ")
            shown = wait_for_text(c, "Your name? ")
            assert "\x1b" not in shown  # escape sequences stripped
            # The model answers it; the user sees the answer and the program's result.
            r = c.post("/user-terminal/input", json={"text": "Ada", "enter": True})
            assert r.status_code == 200, r.text
            assert r.json()["terminal_id"] == tid
            await read_until(ws, b"got:Ada:done")
            out = wait_for_text(c, "got:Ada:done")
            assert "\x1b" not in out and "\r" not in out
            last = read_terminal(c, lines=1)
            assert last["lines"] == 1 and last["output"].count("\n") <= 1
            # enter=false types without pressing Enter.
            assert c.post("/user-terminal/input", json={"text": "echo half", "enter": False}).status_code == 200
            await read_until(ws, b"echo half")
            assert "got:half" not in read_terminal(c)["output"]
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_each_chat_reaches_only_its_own_terminal(clients, daemon):
    user = f"ut-{uuid.uuid4().hex[:8]}"
    chat_a, chat_b = chat(), chat()
    a, b = clients(user=user, session=chat_a), clients(user=user, session=chat_b)
    tid_a, tid_b = make_terminal(a), make_terminal(b)

    # The lists: each chat sees its own terminal; without a chat, the user's all.
    assert [t["id"] for t in a.get("/api/terminals").json()] == [tid_a]
    assert [t["id"] for t in b.get("/api/terminals").json()] == [tid_b]
    everything = clients(user=user)
    assert {t["id"] for t in everything.get("/api/terminals").json()} == {tid_a, tid_b}

    async def scenario():
        ws_a = await connect(daemon, tid_a, user)
        ws_b = await connect(daemon, tid_b, user)
        try:
            await ws_a.send(b"echo mark-$((40+2))-a\r")
            await ws_b.send(b"echo mark-$((40+2))-b\r")
            await read_until(ws_a, b"mark-42-a")
            await read_until(ws_b, b"mark-42-b")
            out_a = wait_for_text(a, "mark-42-a")
            out_b = wait_for_text(b, "mark-42-b")
            assert "mark-42-b" not in out_a and "mark-42-a" not in out_b
            assert read_terminal(a)["terminal_id"] == tid_a
            # Typing in chat b reaches b's terminal only.
            assert b.post("/user-terminal/input", json={"text": "echo only-$((1+1))-b"}).status_code == 200
            await read_until(ws_b, b"only-2-b")
            wait_for_text(b, "only-2-b")
            assert "only-2-b" not in read_terminal(a)["output"]
        finally:
            await ws_a.close()
            await ws_b.close()

    asyncio.run(scenario())


def test_no_attached_terminal_is_a_404_the_model_can_act_on(clients, daemon):
    user = f"ut-{uuid.uuid4().hex[:8]}"
    session = chat()
    c = clients(user=user, session=session)
    r = c.get("/user-terminal/read")
    assert r.status_code == 404
    assert "terminal" in r.json()["detail"] and "open" in r.json()["detail"]
    assert c.post("/user-terminal/input", json={"text": "ls"}).status_code == 404
    # Made in the chat but nobody attached: still none the user has open.
    tid = make_terminal(c)
    assert c.get("/user-terminal/read").status_code == 404
    # Without a chat there is no "this chat".
    assert clients(user=user).get("/user-terminal/read").status_code == 404

    async def attached_then_left():
        ws = await connect(daemon, tid, user)
        await ws.send(b"echo attached\r")
        await read_until(ws, b"attached")
        assert c.get("/user-terminal/read").status_code == 200  # the control
        await ws.close()

    asyncio.run(attached_then_left())
    deadline = time.monotonic() + WAIT
    while c.get("/user-terminal/read").status_code != 404:  # the close reaches the daemon
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_another_users_terminal_is_never_reached(clients, daemon):
    session = chat()  # the same chat id, as a shared link would give
    alice_id = f"ut-{uuid.uuid4().hex[:8]}"
    alice = clients(user=alice_id, session=session)
    bob = clients(user=f"ut-{uuid.uuid4().hex[:8]}", session=session)
    tid = make_terminal(alice)

    async def scenario():
        ws = await connect(daemon, tid, alice_id)
        try:
            await ws.send(b"echo alice-$((6*7))\r")
            await read_until(ws, b"alice-42")
            assert "alice-42" in wait_for_text(alice, "alice-42")  # the control
            assert bob.get("/user-terminal/read").status_code == 404
            assert bob.post("/user-terminal/input", json={"text": "echo bob-was-here"}).status_code == 404
            assert bob.get("/api/terminals").json() == []
            time.sleep(0.3)
            assert "bob-was-here" not in read_terminal(alice)["output"]
        finally:
            await ws.close()

    asyncio.run(scenario())


def test_bad_input_is_422(clients):
    c = clients(user=f"ut-{uuid.uuid4().hex[:8]}", session=chat())
    assert c.post("/user-terminal/input", json={}).status_code == 422
    assert c.post("/user-terminal/input", json={"text": "x", "enter": "yes"}).status_code == 422
    assert c.get("/user-terminal/read", params={"lines": 0}).status_code in (400, 422)


def test_execute_lists_the_chats_commands(clients):
    user = f"ut-{uuid.uuid4().hex[:8]}"
    a, b, whole = clients(user=user, session=chat()), clients(user=user, session=chat()), clients(user=user)
    pa = run_command(a, "echo a", pty=False)["id"]
    pb = run_command(b, "echo b", pty=False)["id"]
    assert [p["id"] for p in a.get("/execute").json()] == [pa]
    assert [p["id"] for p in b.get("/execute").json()] == [pb]
    assert {p["id"] for p in whole.get("/execute").json()} == {pa, pb}
    other = clients(user=f"ut-{uuid.uuid4().hex[:8]}", session=chat())
    assert other.get("/execute").json() == []
