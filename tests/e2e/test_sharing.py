"""One user's box cannot hold up another's: a box start that never finishes fails only its own
user's request, with a reason and a Retry-After, while other users' commands and file calls go
on; many users arriving at once all get their boxes; and above [accounts] max_active a new box
is refused with 503 rather than starting."""
import threading
import time
import uuid

import pytest

from conftest import EXEC_WAIT, run, running_daemon, sh, text_of

STUCK_PREFIX = "stuck-"


@pytest.fixture(scope="module")
def held_daemon():
    """A daemon whose boxes for users named stuck-* never answer their start (test hook)."""
    with running_daemon("held", lifetime=600, config_text="[accounts]\nstart_timeout = 5\n",
                        env={"AGENTBOX_TEST_HOLD_START": STUCK_PREFIX}) as d:
        yield d


def run_all(fn, n, timeout=120):
    """fn(i) for i in range(n), each on a thread of its own, all at once; waits for them."""
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)


def test_a_stuck_box_start_fails_only_its_own_user(held_daemon):
    stuck = held_daemon.client(user=f"{STUCK_PREFIX}{uuid.uuid4().hex[:8]}")
    result = {}

    def stuck_request():
        t0 = time.monotonic()
        result["response"] = stuck.post("/execute", params={"wait": 20}, json={"command": "echo never"})
        result["took"] = time.monotonic() - t0

    t = threading.Thread(target=stuck_request)
    t0 = time.monotonic()
    t.start()
    time.sleep(0.3)  # its start is under way (and stuck) before the others arrive

    errors = []

    def bystander(i):
        try:
            with held_daemon.client(user=f"bystander-{i}-{uuid.uuid4().hex[:6]}") as c:
                code, out, _ = sh(c, f"echo {i}")
                assert (code, out) == (0, f"{i}\n")
                r = c.post("/files/write", json={"path": "note.txt", "content": f"note {i}"})
                assert r.status_code == 200, r.text
                r = c.get("/files/read", params={"path": "note.txt"})
                assert r.status_code == 200 and r.json()["content"] == f"note {i}", r.text
                r = c.get("/files/list", params={"directory": "."})
                assert r.status_code == 200, r.text
        except Exception as e:  # noqa: BLE001 - reported below with the user's number
            errors.append(f"bystander {i}: {e!r}")

    run_all(bystander, 20, timeout=60)
    others_took = time.monotonic() - t0
    assert not errors, errors
    assert others_took < 5, f"20 other users took {others_took:.1f} s next to a stuck start"
    assert t.is_alive(), "the stuck user's request was answered before its start timed out"

    t.join(30)
    r = result["response"]
    assert r.status_code == 503, r.text
    assert "did not start within 5 s" in r.json()["detail"], r.text
    assert int(r.headers["retry-after"]) > 0
    assert 5 <= result["took"] < 15, result["took"]

    # The daemon serves the stuck user's files meanwhile (they need no box) ...
    r = stuck.get("/files/list", params={"directory": "."})
    assert r.status_code == 200, r.text
    # ... and every other user on.
    with held_daemon.client(user=f"after-{uuid.uuid4().hex[:8]}") as c:
        assert sh(c, "echo after")[:2] == (0, "after\n")
    stuck.close()


def test_fifty_users_first_commands_at_once_all_run(daemon):
    results, errors = {}, []
    barrier = threading.Barrier(50)

    def first(i):
        user = f"crowd-{i}-{uuid.uuid4().hex[:6]}"
        try:
            with daemon.client(user=user) as c:
                barrier.wait(30)
                p = run(c, 'printf %s "$USER"', pty=False, wait=EXEC_WAIT)
                assert p["status"] == "done" and p["exit_code"] == 0, p
                results[user] = text_of(p, ("stdout",))
        except Exception as e:  # noqa: BLE001
            errors.append(f"{user}: {e!r}")

    run_all(first, 50)
    assert not errors, errors
    assert len(results) == 50
    # Each user ran in their own box, as their own account.
    names = set(results.values())
    assert len(names) == 50, results
    for user, name in results.items():
        assert name.startswith(user.split("-")[0]), (user, name)


def test_above_max_active_a_new_box_is_refused_with_503(make_daemon):
    d = make_daemon(tag="cap", config_text="[accounts]\nmax_active = 2\n").start()
    a, b, c = (d.client(user=f"cap{i}-{uuid.uuid4().hex[:6]}") for i in range(3))
    assert sh(a, "true")[0] == 0
    assert sh(b, "true")[0] == 0
    r = c.post("/execute", params={"wait": 5}, json={"command": "true"})
    assert r.status_code == 503, r.text
    assert "2 boxes are running" in r.json()["detail"], r.text
    assert int(r.headers["retry-after"]) > 0
    # Those with a box are served; files need no box.
    assert sh(a, "echo still")[:2] == (0, "still\n")
    assert c.get("/files/list", params={"directory": "."}).status_code == 200
    for x in (a, b, c):
        x.close()


def test_one_users_output_flood_does_not_starve_anothers_answers(clients):
    """alice's commands write output as fast as they can; bob's commands still finish and are
    answered promptly (the output is read on alice's own strand of the loop, a bounded amount
    per wake-up), and alice's output really is being read meanwhile."""
    alice, bob = clients.user("flooder"), clients.user("bystander")
    assert sh(bob, "true")[0] == 0  # bob's box is up before the flood
    floods = [run(alice, "yes 0123456789abcdefghijklmnopqrstuvwxyz", pty=False, wait=0)["id"]
              for _ in range(4)]
    try:
        def offsets():
            return sum(alice.get(f"/execute/{i}/status", params={"tail": 1}).json()["next_offset"]
                       for i in floods)
        before = offsets()
        took = []
        for i in range(10):
            t0 = time.monotonic()
            code, out, _ = sh(bob, f"echo {i}")
            took.append(time.monotonic() - t0)
            assert (code, out) == (0, f"{i}\n")
        assert offsets() > before + (1 << 20), "the flood was not being read: the test proves nothing"
        assert max(took) < 5, f"bob waited {max(took):.1f} s behind alice's output"
    finally:
        for i in floods:
            alice.delete(f"/execute/{i}", params={"force": "true"})


SLOW_VOLUME_PREFIX = "slowvol-"


def test_a_slow_new_volume_delays_only_its_own_user():
    """A new user's volume that takes 5 s to prepare (test hook AGENTBOX_TEST_HOLD_VOLUME) holds
    up that user's first request only: a known user's file calls and commands and another new
    user's first command go on meanwhile (caller resolution runs off the API thread)."""
    with running_daemon("slowvol", lifetime=300, env={"AGENTBOX_TEST_HOLD_VOLUME": SLOW_VOLUME_PREFIX}) as d:
        known = d.client(user=f"known-{uuid.uuid4().hex[:8]}")
        assert sh(known, "true")[0] == 0
        slow = d.client(user=f"{SLOW_VOLUME_PREFIX}{uuid.uuid4().hex[:8]}")
        result = {}

        def slow_request():
            t0 = time.monotonic()
            # A write: a read of a new user makes no volume (lazy volumes), so would not be held.
            result["response"] = slow.post("/files/write", json={"path": "first.txt", "content": "slow"})
            result["took"] = time.monotonic() - t0

        t = threading.Thread(target=slow_request)
        t.start()
        try:
            time.sleep(0.3)  # its volume is being prepared (and held) before the others ask
            t0 = time.monotonic()
            for _ in range(5):
                r = known.get("/files/list", params={"directory": "."})
                assert r.status_code == 200, r.text
            assert sh(known, "echo known") == (0, "known\n", "")
            with d.client(user=f"fresh-{uuid.uuid4().hex[:8]}") as fresh:
                assert sh(fresh, "echo fresh") == (0, "fresh\n", "")
            others = time.monotonic() - t0
            assert t.is_alive(), "the slow user's request finished already: the hook held nothing"
            assert others < 3, f"the other users waited {others:.1f} s behind a slow volume"
        finally:
            t.join(30)
        assert result["response"].status_code == 200, result["response"].text
        assert result["took"] >= 4.5, f"the held volume took only {result['took']:.1f} s"
