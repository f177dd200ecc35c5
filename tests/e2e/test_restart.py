"""Durability: stop the daemon with SIGTERM, start a new one on the same state dir."""
import os
import signal
import stat

import pytest

from conftest import agentbox_bin, run, sh, sse_events, text_of, wait_for_output


def test_restart_keeps_finished_processes_and_marks_running_ones_lost(make_daemon):
    d = make_daemon(tag="restart", lifetime=300).start()  # no key given: generated into the state
    key_file = os.path.join(d.state_dir, "api_key")
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    first_key = d.api_key

    with d.client(user="durable-user") as c:
        home = sh(c, 'printf %s "$HOME"')[1]
        done = run(c, "echo persisted; printf 'second\\n'; exit 7", pty=False)
        assert (done["status"], done["exit_code"]) == ("done", 7)
        pty = run(c, "printf 'a\\nb\\n'")
        killed = run(c, "echo ready; sleep 60", wait=0, pty=False)
        wait_for_output(c, killed["id"], "ready")
        assert c.delete(f"/execute/{killed['id']}").status_code == 200
        running = run(c, "echo started; sleep 293", wait=0, pty=False)
        wait_for_output(c, running["id"], "started")
        assert sh(c, "printf 'still here' > kept.txt")[0] == 0

    assert d.stop() == 0, d.log_tail()  # SIGTERM: a graceful, successful stop
    assert d.leftovers == [], "processes of the stopped daemon were still alive"

    d.start()
    assert d.api_key == first_key
    with d.client(user="durable-user") as c:
        assert sh(c, 'printf %s "$HOME"')[1] == home  # same account, same home
        assert sh(c, "cat kept.txt")[1] == "still here"

        q = c.get(f"/execute/{done['id']}/status").json()
        assert (q["status"], q["exit_code"]) == ("done", 7)
        assert text_of(q, ("stdout",)) == "persisted\nsecond\n"
        assert q["next_offset"] == done["next_offset"]
        q = c.get(f"/execute/{done['id']}/status", params={"offset": len("persisted\n")}).json()
        assert text_of(q) == "second\n"
        assert text_of(c.get(f"/execute/{done['id']}/status", params={"tail": 1}).json()) == "second\n"
        assert text_of(c.get(f"/execute/{pty['id']}/status").json()) == "a\r\nb\r\n"

        q = c.get(f"/execute/{killed['id']}/status").json()
        assert (q["status"], q["exit_code"]) == ("killed", -15)

        q = c.get(f"/execute/{running['id']}/status", params={"wait": 5}).json()
        assert q["status"] == "lost"
        assert text_of(q) == "started\n"  # its output up to the stop is kept
        r = c.post(f"/execute/{running['id']}/input", json={"input": "x"})
        assert r.status_code == 400

        listed = {x["id"]: x for x in c.get("/execute").json()}
        assert [listed[p["id"]]["status"] for p in (done, pty, killed, running)] == [
            "done", "done", "killed", "lost"]

        with c.stream("GET", f"/execute/{done['id']}/stream") as r:
            events = list(sse_events(r))
        assert "".join(e[1]["data"] for e in events if e[0] == "output") == "persisted\nsecond\n"
        assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 7

        # The new daemon runs commands as before; ids are not reused.
        new = run(c, "echo again", pty=False)
        assert text_of(new) == "again\n"
        assert new["id"] not in {done["id"], pty["id"], killed["id"], running["id"]}

    with d.client(user="someone-else") as other:
        assert other.get(f"/execute/{done['id']}/status").status_code == 404


def test_a_crashing_daemon_names_the_signal_and_where_it_was(make_daemon):
    """A daemon that dies on a fatal signal leaves the signal and a backtrace in its log (else
    a crash shows only as refused connections), and still dies of that signal."""
    if "asan" in os.path.basename(os.path.dirname(os.path.realpath(agentbox_bin()))):
        pytest.skip("sanitizer builds print their own report")
    d = make_daemon(tag="crash", lifetime=120).start()
    with d.client(user="crash-user") as c:
        assert sh(c, "echo up")[1] == "up\n"
    rc = d.stop(sig=signal.SIGSEGV)
    assert rc in (-signal.SIGSEGV, 128 + signal.SIGSEGV), rc
    log = d.log_tail()
    assert "agentbox serve: fatal signal SEGV" in log, log
    assert "backtrace" in log and "agentbox-serve(" in log, log
