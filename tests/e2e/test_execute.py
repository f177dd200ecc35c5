"""/execute: run_command, get_process_status, send_process_input, kill_process, list_processes
and the SSE stream, through the HTTP API only."""
import time

import pytest

from conftest import (EXEC_WAIT, home_of, run, sh, sse_events, text_of, wait_done,
                      wait_for_output)


# ---- run_command ----------------------------------------------------------------------------

def test_pty_merges_output_with_crlf(clients):
    c = clients.user("pty")
    p = run(c, "echo hello; echo oops >&2; exit 3")
    assert set(p) >= {"id", "command", "status", "exit_code", "output", "truncated", "next_offset"}
    assert isinstance(p["id"], str) and p["id"]
    assert p["command"] == "echo hello; echo oops >&2; exit 3"
    assert (p["status"], p["exit_code"], p["truncated"]) == ("done", 3, False)
    assert {chunk["type"] for chunk in p["output"]} == {"output"}
    assert text_of(p) == "hello\r\noops\r\n"
    assert p["next_offset"] == len(text_of(p).encode())


def test_pipes_keep_stdout_and_stderr_apart(clients):
    c = clients.user("pipes")
    p = run(c, "echo hello; echo oops >&2; printf 'a\\nb\\n'", pty=False)
    assert (p["status"], p["exit_code"]) == ("done", 0)
    assert text_of(p, ("stdout",)) == "hello\na\nb\n"
    assert text_of(p, ("stderr",)) == "oops\n"
    assert {chunk["type"] for chunk in p["output"]} == {"stdout", "stderr"}
    assert p["next_offset"] == len(text_of(p).encode())


def test_terminal_only_with_pty(clients):
    c = clients.user("tty")
    probe = "[ -t 0 ] && [ -t 1 ] && echo tty || echo notty"
    assert text_of(run(c, probe)) == "tty\r\n"
    assert text_of(run(c, probe, pty=False)) == "notty\n"


def test_runs_as_the_users_own_account_in_its_home(clients):
    c = clients.user("ident")
    code, out, _ = sh(c, 'id -u; id -un; pwd; printf "%s\\n" "$HOME"')
    uid, name, cwd, home = out.splitlines()
    assert code == 0
    assert int(uid) != 0
    assert cwd == home == f"/home/{name}"
    other = clients.user("ident2")
    assert sh(other, "id -u")[1].strip() != uid


@pytest.mark.parametrize("command,code", [("exit 0", 0), ("exit 3", 3), ("false", 1),
                                          ("no-such-command-xyz", 127), ("kill -TERM $$", -15),
                                          ("kill -KILL $$", -9)])
def test_exit_codes(clients, command, code):
    p = run(clients.user("exit"), command, pty=False)
    assert (p["status"], p["exit_code"]) == ("done", code)


@pytest.mark.parametrize("command", ["env", "ls -a /", "true", "false", "./noshebang", "./noexec", "/tmp",
                                     "no-such-command-xyz arg", "printenv SHLVL _ PWD"])
def test_plain_commands_run_as_bash_would_run_them(clients, command):
    # A command with no shell syntax is started without bash; `;` makes bash parse it. Nothing
    # a user can see may differ: output, exit code, environment, bash's own error messages.
    c = clients.user("plain")
    setup = run(c, "printf 'echo not run\\n' > noexec; printf '[[ 1 == 1 ]] && echo bash ran me\\n' > noshebang"
                   " && chmod +x noshebang", pty=False)
    assert setup["exit_code"] == 0
    plain, parsed = run(c, command, pty=False), run(c, command + ";", pty=False)
    assert plain["exit_code"] == parsed["exit_code"]
    for stream in ("stdout", "stderr"):
        assert sorted(text_of(plain, (stream,)).splitlines()) == sorted(text_of(parsed, (stream,)).splitlines())
    if command == "./noshebang":
        assert text_of(plain, ("stdout",)) == "bash ran me\n"


def test_env_and_cwd(clients):
    c = clients.user("envcwd")
    home = home_of(c)
    assert sh(c, "mkdir -p sub/deeper")[0] == 0
    for cwd in ("sub", "./sub/deeper/..", "~/sub", f"{home}/sub"):
        code, out, _ = sh(c, 'pwd; printf "%s\\n" "$FOO"', cwd=cwd, env={"FOO": "bar baz"})
        assert (code, out) == (0, f"{home}/sub\nbar baz\n"), cwd


def test_cwd_errors(clients):
    c = clients.user("cwderr")
    sh(c, "touch afile")
    assert run(c, "true", cwd="missing", expect=404)
    r = c.post("/execute", json={"command": "true", "cwd": "afile"})
    assert r.status_code in (400, 404)
    for outside in ("/", "/etc", "..", "~/..", "/proc/self/root", "/tmp"):
        r = c.post("/execute", json={"command": "true", "cwd": outside})
        assert r.status_code == 403, (outside, r.text)


def test_stdin(clients):
    c = clients.user("stdin")
    p = run(c, "cat; echo end", pty=False, stdin="line1\nline2\n")
    assert (p["status"], p["exit_code"]) == ("done", 0)
    assert text_of(p, ("stdout",)) == "line1\nline2\nend\n"
    p = run(c, 'read -r x; echo "[$x]"', stdin="hey\n")
    assert "[hey]" in text_of(p)


def test_timeout_kills(clients):
    c = clients.user("timeout")
    started = time.monotonic()
    p = run(c, "sleep 30", timeout=1, pty=False, wait=15)
    assert time.monotonic() - started < 10
    assert p["status"] == "killed"
    assert p["exit_code"] == -15


def test_utf8_output_and_byte_offsets(clients):
    c = clients.user("utf8")
    p = run(c, "printf 'h\\303\\251llo \\342\\202\\254\\n'", pty=False)
    assert text_of(p) == "héllo €\n"
    assert p["next_offset"] == 11
    # Invalid UTF-8 still gives a JSON answer.
    p = run(c, "printf '\\377\\376 ok\\n'", pty=False)
    assert text_of(p).endswith(" ok\n")


def test_tail(clients):
    c = clients.user("tail")
    r = c.post("/execute", params={"wait": EXEC_WAIT, "tail": 3}, json={"command": "seq 1 100", "pty": False})
    p = r.json()
    assert r.status_code == 200 and p["status"] == "done"
    assert text_of(p) == "98\n99\n100\n"
    assert p["truncated"] is True
    assert p["next_offset"] == len("".join(f"{i}\n" for i in range(1, 101)))
    r = c.get(f"/execute/{p['id']}/status", params={"tail": 1})
    assert text_of(r.json()) == "100\n"


def test_absolute_offsets(clients):
    c = clients.user("offset")
    p = run(c, "printf abcdef", pty=False)
    r = c.get(f"/execute/{p['id']}/status", params={"offset": 3})
    assert (text_of(r.json()), r.json()["next_offset"]) == ("def", 6)
    r = c.get(f"/execute/{p['id']}/status", params={"offset": 6})
    assert (text_of(r.json()), r.json()["next_offset"]) == ("", 6)
    r = c.get(f"/execute/{p['id']}/status", params={"offset": 1000})
    assert r.status_code == 200 and text_of(r.json()) == ""


def test_large_output_pages_with_next_offset(clients):
    c = clients.user("big")
    size = 3_000_000
    p = run(c, f"head -c {size} /dev/zero | tr '\\0' a", pty=False)
    assert p["status"] == "done"
    got, offset = len(text_of(p)), p["next_offset"]
    assert set(text_of(p)) <= {"a"}
    while offset < size:
        r = c.get(f"/execute/{p['id']}/status", params={"offset": offset})
        chunk = text_of(r.json())
        assert chunk and set(chunk) == {"a"}
        assert r.json()["next_offset"] == offset + len(chunk)
        got += len(chunk)
        offset = r.json()["next_offset"]
    assert got == size == offset


def test_an_answer_that_is_a_page_says_so(clients):
    """The first answer of `seq 1 300000` carries at most 1 MiB: it must say more follows."""
    c = clients.user("pagesays")
    p = run(c, "seq 1 300000", pty=False)
    total = len("".join(f"{i}\n" for i in range(1, 300001)))
    assert p["status"] == "done"
    assert p["next_offset"] < total
    assert p["truncated"] is True, "a page taken for the whole output"
    offset, pages = p["next_offset"], 1
    while True:
        q = c.get(f"/execute/{p['id']}/status", params={"offset": offset}).json()
        pages += 1
        offset = q["next_offset"]
        if offset == total:
            assert q["truncated"] is False, q["next_offset"]
            break
        assert q["truncated"] is True
    assert pages >= 2


def test_a_terminals_output_followed_page_by_page_counts_every_line_once(clients):
    """Open WebUI's pipes follow a command with offsets and turn each answer's "\\r\\n" into
    "\\n": no answer may end between the two (nor inside a character)."""
    c = clients.user("crlf")
    p = run(c, "seq 1 100000; sleep 3; seq 100001 200000", wait=0)
    offset, text = p["next_offset"], text_of(p).replace("\r\n", "\n")
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline
        q = c.get(f"/execute/{p['id']}/status", params={"offset": offset, "wait": 10}).json()
        text += text_of(q).replace("\r\n", "\n")
        offset = q["next_offset"]
        if q["status"] != "running" and not q["truncated"]:
            break
    assert text.count("\n") == 200000
    assert text == "".join(f"{i}\n" for i in range(1, 200001))


# ---- long-polls -----------------------------------------------------------------------------

def test_long_poll_collects_all_output_exactly_once(clients):
    c = clients.user("page")
    lines = 25
    p = run(c, f'for i in $(seq 1 {lines}); do echo "line $i"; sleep 0.08; done', wait=0, pty=False)
    assert p["status"] == "running"
    offset, got, answers_with_output = p["next_offset"], text_of(p), 0
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline
        r = c.get(f"/execute/{p['id']}/status", params={"offset": offset, "wait": 10})
        assert r.status_code == 200
        q = r.json()
        chunk = text_of(q)
        assert q["next_offset"] == offset + len(chunk.encode())
        answers_with_output += bool(chunk)
        got += chunk
        offset = q["next_offset"]
        if q["status"] != "running":
            break
    assert q["status"] == "done" and q["exit_code"] == 0
    assert got == "".join(f"line {i}\n" for i in range(1, lines + 1))
    # It answered as output arrived, not once at the end.
    assert answers_with_output >= 5
    # Nothing more after the end.
    r = c.get(f"/execute/{p['id']}/status", params={"offset": offset, "wait": 5})
    assert text_of(r.json()) == "" and r.json()["next_offset"] == offset


def test_wait_without_offset_waits_for_the_end(clients):
    c = clients.user("waitend")
    p = run(c, "echo start; sleep 1; echo end", wait=0, pty=False)
    q = c.get(f"/execute/{p['id']}/status", params={"wait": 15}).json()
    assert q["status"] == "done"
    assert text_of(q) == "start\nend\n"


def test_wait_returns_at_its_deadline(clients):
    c = clients.user("waitdl")
    p = run(c, "sleep 30", wait=0, pty=False)
    started = time.monotonic()
    q = c.get(f"/execute/{p['id']}/status", params={"wait": 1}).json()
    took = time.monotonic() - started
    assert q["status"] == "running"
    assert 0.8 <= took < 6
    started = time.monotonic()
    q = c.get(f"/execute/{p['id']}/status", params={"wait": 0.5, "offset": 0}).json()
    assert q["status"] == "running" and 0.3 <= time.monotonic() - started < 5
    assert c.delete(f"/execute/{p['id']}").status_code == 200


def test_post_wait_waits_for_the_end(clients):
    c = clients.user("postwait")
    p = run(c, "sleep 0.5; echo late", wait=15, pty=False)
    assert (p["status"], text_of(p)) == ("done", "late\n")


# ---- input ----------------------------------------------------------------------------------

def test_input_to_a_terminal(clients):
    c = clients.user("input")
    p = run(c, 'echo ready; read -r x; echo "got:$x"', wait=0)
    wait_for_output(c, p["id"], "ready")
    r = c.post(f"/execute/{p['id']}/input", json={"input": "hello\\n"})
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    q = wait_done(c, p["id"])
    assert q["status"] == "done" and "got:hello" in text_of(q)


def test_input_escapes_and_pipes(clients):
    c = clients.user("inpipe")
    p = run(c, 'read -r x; echo "[$x]"', wait=0, pty=False)
    # JSON "abc\\x41\\n" is the text abc\x41\n: decoded to "abcA" + newline.
    r = c.post(f"/execute/{p['id']}/input", json={"input": "abc\\x41\\n"})
    assert r.status_code == 200
    q = wait_done(c, p["id"])
    assert text_of(q, ("stdout",)) == "[abcA]\n"


def test_ctrl_d_closes_stdin_without_a_terminal(clients):
    """API.md: "\\x04" is Ctrl-D; without a pty it closes the command's stdin."""
    c = clients.user("ctrld")
    p = run(c, "wc -l", wait=0, pty=False)
    assert c.post(f"/execute/{p['id']}/input", json={"input": "one\\ntwo\\n\\x04"}).status_code == 200
    q = wait_done(c, p["id"], timeout=15)
    assert q["status"] == "done", q
    assert text_of(q, ("stdout",)).strip() == "2"
    r = c.post(f"/execute/{p['id']}/input", json={"input": "late"})
    assert r.status_code == 400


def test_ctrl_c_interrupts(clients):
    c = clients.user("ctrlc")
    p = run(c, "echo ready; sleep 30", wait=0)
    wait_for_output(c, p["id"], "ready")
    assert c.post(f"/execute/{p['id']}/input", json={"input": "\\x03"}).status_code == 200
    q = wait_done(c, p["id"], timeout=10)
    assert q["status"] == "done"
    assert q["exit_code"] in (-2, 130)


def test_input_errors(clients):
    c = clients.user("inerr")
    p = run(c, "true", pty=False)
    r = c.post(f"/execute/{p['id']}/input", json={"input": "x"})
    assert r.status_code == 400 and r.json()["detail"]
    assert c.post("/execute/nosuchid/input", json={"input": "x"}).status_code == 404
    q = run(c, "sleep 30", wait=0)
    assert c.post(f"/execute/{q['id']}/input", json={}).status_code == 422
    assert c.post(f"/execute/{q['id']}/input", json={"input": 3}).status_code == 422
    assert c.post(f"/execute/{q['id']}/input", content=b"{nope", headers={"content-type": "application/json"}).status_code == 400
    c.delete(f"/execute/{q['id']}", params={"force": "true"})


# ---- kill -----------------------------------------------------------------------------------

def test_kill_terminates_and_keeps_the_record(clients):
    c = clients.user("kill")
    p = run(c, "echo ready; sleep 60", wait=0, pty=False)
    wait_for_output(c, p["id"], "ready")
    started = time.monotonic()
    r = c.delete(f"/execute/{p['id']}")
    assert r.status_code == 200 and r.json() == {"status": "killed"}
    assert time.monotonic() - started < 2.5
    q = c.get(f"/execute/{p['id']}/status").json()
    assert (q["status"], q["exit_code"]) == ("killed", -15)
    assert text_of(q) == "ready\n"
    listed = {x["id"]: x for x in c.get("/execute").json()}
    assert listed[p["id"]]["status"] == "killed"


def test_kill_escalates_when_term_is_trapped(clients):
    c = clients.user("trap")
    p = run(c, "trap 'echo caught' TERM; echo ready; while :; do sleep 0.2; done", wait=0, pty=False)
    wait_for_output(c, p["id"], "ready")
    started = time.monotonic()
    r = c.delete(f"/execute/{p['id']}")
    took = time.monotonic() - started
    assert r.status_code == 200 and r.json() == {"status": "killed"}
    assert 2.0 <= took < 8, took  # TERM, ~3 s grace, then KILL
    q = c.get(f"/execute/{p['id']}/status").json()
    assert (q["status"], q["exit_code"]) == ("killed", -9)
    assert "caught" in text_of(q)  # TERM came first


def test_force_kill_is_immediate(clients):
    c = clients.user("force")
    p = run(c, "trap 'echo caught' TERM; echo ready; while :; do sleep 0.2; done", wait=0, pty=False)
    wait_for_output(c, p["id"], "ready")
    started = time.monotonic()
    r = c.delete(f"/execute/{p['id']}", params={"force": "true"})
    assert r.status_code == 200
    assert time.monotonic() - started < 2
    q = c.get(f"/execute/{p['id']}/status").json()
    assert (q["status"], q["exit_code"]) == ("killed", -9)
    assert "caught" not in text_of(q)


def test_kill_takes_the_whole_process_group(clients):
    c = clients.user("group")
    p = run(c, "sleep 61 & sleep 62 & echo ready; wait", wait=0, pty=False)
    wait_for_output(c, p["id"], "ready")
    assert c.delete(f"/execute/{p['id']}").status_code == 200
    listing = 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done'
    _, out, _ = sh(c, listing)
    assert "sleep 61" not in out and "sleep 62" not in out


def test_kill_of_finished_process_leaves_it_alone(clients):
    c = clients.user("killdone")
    p = run(c, "exit 4", pty=False)
    r = c.delete(f"/execute/{p['id']}")
    assert r.status_code == 200
    q = c.get(f"/execute/{p['id']}/status").json()
    assert (q["status"], q["exit_code"]) == ("done", 4)


def test_unknown_process_is_404(clients):
    c = clients.user("nf")
    for method, path in [("GET", "/execute/nosuch/status"), ("POST", "/execute/nosuch/input"),
                         ("DELETE", "/execute/nosuch"), ("GET", "/execute/nosuch/stream")]:
        r = c.request(method, path, json={"input": "x"} if method == "POST" else None)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["detail"]


def test_list_processes(clients):
    c = clients.user("list")
    assert c.get("/execute").json() == []
    a = run(c, "exit 2", pty=False)
    b = run(c, "sleep 30", wait=0, pty=False)
    listed = c.get("/execute").json()
    assert [x["id"] for x in listed] == [a["id"], b["id"]]
    assert listed[0] == {"id": a["id"], "command": "exit 2", "status": "done", "exit_code": 2}
    assert listed[1]["status"] == "running" and listed[1]["exit_code"] is None
    c.delete(f"/execute/{b['id']}", params={"force": "true"})


# ---- request handling -----------------------------------------------------------------------

def test_null_query_params_are_ignored(clients):
    c = clients.user("null")
    r = c.post("/execute?wait=null&tail=NULL", json={"command": "sleep 0.3; echo x", "pty": False})
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["status"] == "running"  # wait=null is no wait
    r = c.get(f"/execute/{p['id']}/status?wait=Null&offset=null&tail=null")
    assert r.status_code == 200, r.text
    q = wait_done(c, p["id"])
    assert text_of(q) == "x\n"  # tail=null is no tail
    r = c.delete(f"/execute/{p['id']}?force=null")
    assert r.status_code == 200


def test_unknown_body_fields_are_ignored(clients):
    c = clients.user("extra")
    # Open WebUI posts every tool argument in the body, query ones included.
    r = c.post("/execute", params={"wait": 10},
               json={"command": "echo ok", "wait": 10, "tail": None, "foo": {"bar": [1, 2]},
                     "cwd": None, "env": None, "pty": None})
    assert r.status_code == 200, r.text
    assert text_of(r.json()) == "ok\r\n"
    p = run(c, "read -r x; echo $x", wait=0, pty=False)
    r = c.post(f"/execute/{p['id']}/input", json={"input": "y\\n", "id": p["id"], "extra": 1})
    assert r.status_code == 200
    assert text_of(wait_done(c, p["id"])) == "y\n"


@pytest.mark.parametrize("body", [
    {}, {"command": 5}, {"command": ""}, {"command": None}, {"command": ["ls"]},
    {"command": "x", "env": "A=1"}, {"command": "x", "env": {"A": 1}}, {"command": "x", "env": {"A=B": "1"}},
    {"command": "x", "timeout": -1}, {"command": "x", "timeout": "5"}, {"command": "x", "pty": "yes"},
    {"command": "x", "cwd": 5}, {"command": "x", "stdin": 5}, [], "echo", 5,
], ids=repr)
def test_execute_validation_is_422(clients, body):
    r = clients.user("val").post("/execute", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"]


@pytest.mark.parametrize("query", ["wait=301", "wait=-1", "wait=abc", "wait=1e999", "wait=nan",
                                   "tail=0", "tail=x", "tail=-3"])
def test_execute_query_validation_is_422(clients, query):
    r = clients.user("qval").post(f"/execute?{query}", json={"command": "true"})
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("query", ["offset=-1", "offset=abc", "wait=500", "tail=0"])
def test_status_query_validation_is_422(clients, query):
    c = clients.user("sval")
    p = run(c, "true", pty=False)
    r = c.get(f"/execute/{p['id']}/status?{query}")
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("raw", [b"{", b"", b"nul", b'{"command": "x",}', b"{'command': 'x'}",
                                 b'{"command": "x"} trailing'])
def test_invalid_json_is_400(clients, raw):
    r = clients.user("json").post("/execute", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["detail"]


@pytest.mark.parametrize("body", [{"command": ": " + "y" * (300 << 10)},
                                  {"command": "true", "env": {"BIG": "v" * (300 << 10)}}],
                         ids=["command", "env"])
def test_oversized_command_is_a_client_error(clients, body):
    c = clients.user("huge")
    r = c.post("/execute", params={"wait": 10}, json=body)
    assert 400 <= r.status_code < 500, r.text[:200]
    assert sh(c, "echo ok")[1] == "ok\n"


def test_large_stdin(clients):
    c = clients.user("bigin")
    p = run(c, "wc -c", pty=False, stdin="z" * (5 << 20))
    assert text_of(p).strip() == str(5 << 20)


def test_nul_in_command_is_400(clients):
    r = clients.user("nul").post("/execute", json={"command": "echo a\u0000b"})
    assert r.status_code == 400


def test_many_commands_at_once(clients):
    c = clients.user("many")
    ids = [run(c, f"sleep 0.5; echo {i}", wait=0, pty=False)["id"] for i in range(20)]
    for i, pid in enumerate(ids):
        q = wait_done(c, pid)
        assert (q["status"], text_of(q)) == ("done", f"{i}\n")


# ---- stream (Part B) ------------------------------------------------------------------------

def test_stream_is_live_and_ends_with_exit(clients):
    c = clients.user("sse")
    other = clients(user=c.headers["X-User-Id"])
    p = run(c, 'echo first; read -r x; echo "second $x"', wait=0, pty=False)
    events = []
    with c.stream("GET", f"/execute/{p['id']}/stream") as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        sent = False
        for event in sse_events(r):
            events.append(event)
            seen = "".join(d["data"] for e, d, _ in events if e == "output")
            if "first\n" in seen and not sent:
                # Only possible while the stream is live: the process waits for this.
                assert other.post(f"/execute/{p['id']}/input", json={"input": "go\\n"}).status_code == 200
                sent = True
            if event[0] == "exit":
                break
    outputs = [(d, i) for e, d, i in events if e == "output"]
    assert "".join(d["data"] for d, _ in outputs) == "first\nsecond go\n"
    assert all(d["type"] == "stdout" for d, _ in outputs)
    ids = [int(i) for _, i in outputs if i is not None]
    assert ids == sorted(ids) and ids[-1] == len("first\nsecond go\n")
    kind, data, _ = events[-1]
    assert kind == "exit"
    assert data == {"status": "done", "exit_code": 0, "next_offset": len("first\nsecond go\n")}


def test_stream_of_finished_process_replays_and_resumes(clients):
    c = clients.user("sse2")
    p = run(c, "printf 'abc\\ndef\\n'", pty=False)
    with c.stream("GET", f"/execute/{p['id']}/stream") as r:
        events = list(sse_events(r))
    assert "".join(d["data"] for e, d, _ in events if e == "output") == "abc\ndef\n"
    assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 0
    for kw in ({"params": {"offset": 4}}, {"headers": {"Last-Event-ID": "4"}}):
        with c.stream("GET", f"/execute/{p['id']}/stream", **kw) as r:
            events = list(sse_events(r))
        assert "".join(d["data"] for e, d, _ in events if e == "output") == "def\n", kw
        assert events[-1][1]["next_offset"] == 8


@pytest.mark.parametrize("value", ["-1", "18446744073709551615", "9223372036854775808", "+4", "4abc", "0x10",
                                   "", "1e3", "4 4"])
def test_a_malformed_last_event_id_is_400_never_a_huge_offset(clients, value):
    """stoull read "-1" as 2^64-1 (a stream that could never resume) and "4abc" as 4."""
    c = clients.user("sse-bad-id")
    p = run(c, "printf 'abc\\ndef\\n'", pty=False)
    r = c.get(f"/execute/{p['id']}/stream", headers={"Last-Event-ID": value})
    assert r.status_code == 400, (value, r.text)
    assert "Last-Event-ID must be an offset" in r.json()["detail"]
    # The largest offset the API takes is still one (past the end: nothing to replay).
    with c.stream("GET", f"/execute/{p['id']}/stream", headers={"Last-Event-ID": "9223372036854775807"}) as r:
        assert r.status_code == 200
        events = list(sse_events(r))
    assert events[-1][0] == "exit" and not [e for e in events if e[0] == "output"]


def test_stream_of_killed_process(clients):
    c = clients.user("sse3")
    p = run(c, "echo ready; sleep 60", wait=0, pty=False)
    wait_for_output(c, p["id"], "ready")
    c.delete(f"/execute/{p['id']}")
    with c.stream("GET", f"/execute/{p['id']}/stream") as r:
        events = list(sse_events(r))
    assert events[-1] == ("exit", {"status": "killed", "exit_code": -15, "next_offset": 6}, None)
