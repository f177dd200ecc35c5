"""Notebooks (API.md Part A, Open Terminal's shapes): POST /notebooks {path} opens a kernel,
POST /notebooks/{id}/execute {cell_index, source?} runs a cell and answers nbformat outputs,
GET and DELETE /notebooks/{id}. Beyond Open Terminal: the kernel is a process of the user's own
box, as the user (it cannot read another user's home), a cell past [notebooks] cell_timeout is
interrupted with the kernel kept, idle kernels end, and an account has a cap.
"""
import base64
import json
import re
import time
import uuid

import pytest

from conftest import running_daemon, sh

CONFIG = """
[notebooks]
per_account = 2
idle_timeout = 6
cell_timeout = 3
"""
CELL_WAIT = 120  # the first cell of a box imports matplotlib and builds its font cache


@pytest.fixture(scope="module")
def nb_daemon():
    with running_daemon("notebooks", config_text=CONFIG, lifetime=900) as d:
        yield d


@pytest.fixture
def user(nb_daemon):
    made = []

    def make(prefix="nb"):
        c = nb_daemon.client(user=f"{prefix}-{uuid.uuid4().hex[:10]}", timeout=CELL_WAIT)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def write_notebook(client, name, cells):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
          "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": src} for src in cells]}
    r = client.post("/files/write", json={"path": name, "content": json.dumps(nb)})
    assert r.status_code == 200, r.text
    return r.json()["path"]


def open_nb(client, path, expect=200):
    r = client.post("/notebooks", json={"path": path})
    assert r.status_code == expect, r.text
    return r.json()


def execute(client, nid, expect=200, **body):
    r = client.post(f"/notebooks/{nid}/execute", json=body)
    assert r.status_code == expect, r.text
    return r.json()


def test_features_say_notebooks(nb_daemon):
    r = nb_daemon.client().get("/api/config")
    assert r.json()["features"]["notebooks"] is True


def test_plot_cell_returns_png_and_values_and_streams(user):
    c = user()
    path = write_notebook(c, "plot.ipynb", [
        "import matplotlib\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
        ["print('hello')\n", "6 * 7"],
    ])
    nb = open_nb(c, path)
    assert nb["status"] == "ready" and nb["id"] and nb["kernel"]
    plot = execute(c, nb["id"], cell_index=0)
    assert plot["status"] == "ok", plot
    pngs = [o for o in plot["outputs"] if o["output_type"] == "display_data" and "image/png" in o["data"]]
    assert pngs, plot["outputs"]
    assert base64.b64decode(pngs[0]["data"]["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    second = execute(c, nb["id"], cell_index=1)
    assert second["status"] == "ok"
    assert {"output_type": "stream", "name": "stdout", "text": "hello\n"} in second["outputs"]
    results = [o for o in second["outputs"] if o["output_type"] == "execute_result"]
    assert results and results[0]["data"]["text/plain"] == "42"
    assert second["execution_count"] == plot["execution_count"] + 1
    # The editor's source wins over the file's; state persists between cells.
    assert execute(c, nb["id"], cell_index=1, source="x = 5")["status"] == "ok"
    again = execute(c, nb["id"], cell_index=1, source="x * 2")
    assert again["outputs"][0]["data"]["text/plain"] == "10"
    got = c.get(f"/notebooks/{nb['id']}").json()
    assert got == {"id": nb["id"], "path": path, "kernel": nb["kernel"], "status": "ready"}
    assert c.delete(f"/notebooks/{nb['id']}").json() == {"status": "stopped"}


def test_failing_cell_returns_traceback(user):
    c = user()
    nb = open_nb(c, write_notebook(c, "fail.ipynb", ["def f():\n    return 1 / 0\nf()"]))
    out = execute(c, nb["id"], cell_index=0)
    assert out["status"] == "error"
    errors = [o for o in out["outputs"] if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "ZeroDivisionError"
    # nbformat's traceback: the kernel's lines, with its ANSI colours
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in errors[0]["traceback"]]
    assert any("1 / 0" in line for line in lines) and any("f()" in line for line in lines), lines
    # What a cell's subprocess writes to its own stdout does not disturb the answers.
    raw = execute(c, nb["id"], cell_index=0, source="import os\nos.system('printf no-newline; printf x >&2')")
    assert raw["status"] == "ok", raw
    # An output too large for one answer is cut, with a note, and the kernel goes on.
    big = execute(c, nb["id"], cell_index=0, source="print('x' * 30_000_000)")
    assert big["status"] == "ok"
    assert 1_000_000 < sum(len(o.get("text", "")) for o in big["outputs"]) < 10_000_000
    assert "output truncated" in big["outputs"][-1]["text"]
    # The next cell runs (the kernel does not abort what follows an error).
    after = execute(c, nb["id"], cell_index=0, source="2 + 2")
    assert after["status"] == "ok" and after["outputs"][0]["data"]["text/plain"] == "4", after
    c.delete(f"/notebooks/{nb['id']}")


def test_endless_cell_is_interrupted_and_kernel_kept(user):
    c = user()
    nb = open_nb(c, write_notebook(c, "spin.ipynb", ["n = 41", "while True: pass", "n + 1"]))
    assert execute(c, nb["id"], cell_index=0)["status"] == "ok"
    t0 = time.monotonic()
    out = execute(c, nb["id"], cell_index=1)
    took = time.monotonic() - t0
    assert out["status"] == "error"
    assert any(o["output_type"] == "error" and "cell timeout" in o["evalue"] for o in out["outputs"]), out
    assert 2.5 < took < 30, took
    # The same kernel, its state intact, answers the next cell.
    after = execute(c, nb["id"], cell_index=2)
    assert after["status"] == "ok" and after["outputs"][0]["data"]["text/plain"] == "42"
    c.delete(f"/notebooks/{nb['id']}")


def test_kernel_cannot_read_another_users_home(user):
    alice, bob = user("alice"), user("bob")
    sh(bob, "echo bob-secret > ~/secret.txt")
    bob_home = bob.get("/files/cwd").json()["home"]
    nb = open_nb(alice, write_notebook(alice, "peek.ipynb", [
        f"open({bob_home + '/secret.txt'!r}).read()",
        "import os, pwd\nopen('mine.txt', 'w').write('alice-own')\n"
        "(open('mine.txt').read(), pwd.getpwuid(os.getuid()).pw_name, os.getuid())",
    ]))
    attack = execute(alice, nb["id"], cell_index=0)
    assert attack["status"] == "error", attack
    assert not any("bob-secret" in json.dumps(o) for o in attack["outputs"])
    assert any(o["output_type"] == "error" and o["ename"] in ("FileNotFoundError", "PermissionError")
               for o in attack["outputs"])
    control = execute(alice, nb["id"], cell_index=1)  # the same kernel reads its own user's file
    assert control["status"] == "ok", control
    text = control["outputs"][0]["data"]["text/plain"]
    assert "alice-own" in text and "'root'" not in text and ", 0)" not in text
    # It is an ordinary process of alice's box: listed among her commands, not bob's.
    assert any("notebook kernel" in p["command"] for p in alice.get("/execute").json())
    assert not any("notebook kernel" in p["command"] for p in bob.get("/execute").json())
    # Bob cannot use or see alice's kernel.
    assert bob.get(f"/notebooks/{nb['id']}").status_code == 404
    assert bob.post(f"/notebooks/{nb['id']}/execute", json={"cell_index": 0}).status_code == 404
    assert bob.delete(f"/notebooks/{nb['id']}").status_code == 404
    alice.delete(f"/notebooks/{nb['id']}")


def kernel_running(client):
    return [p for p in client.get("/execute").json() if "notebook kernel" in p["command"] and p["status"] == "running"]


def wait_no_kernel(client, timeout):
    deadline = time.monotonic() + timeout
    while kernel_running(client):
        assert time.monotonic() < deadline, "the kernel still runs"
        time.sleep(0.2)


def test_delete_ends_the_kernel(user):
    c = user()
    nb = open_nb(c, write_notebook(c, "d.ipynb", ["1"]))
    assert kernel_running(c)
    assert "ipykernel" in sh(c, "ps -eo args=")[1]  # the control: the kernel runs in the user's box
    assert c.delete(f"/notebooks/{nb['id']}").json() == {"status": "stopped"}
    assert c.get(f"/notebooks/{nb['id']}").status_code == 404
    assert execute(c, nb["id"], expect=404, cell_index=0)["detail"] == "Notebook not found"
    assert c.delete(f"/notebooks/{nb['id']}").status_code == 404
    wait_no_kernel(c, 15)
    # The kernel itself (ipykernel, a child of the bridge in a session of its own) is gone too.
    deadline = time.monotonic() + 15
    while "ipykernel" in sh(c, "ps -eo args=")[1]:
        assert time.monotonic() < deadline, "ipykernel still runs in the box"
        time.sleep(0.5)


def test_idle_kernel_ends(user):
    c = user()
    nb = open_nb(c, write_notebook(c, "idle.ipynb", ["1 + 1"]))
    assert execute(c, nb["id"], cell_index=0)["status"] == "ok"
    # idle_timeout = 6 s: still there at once, gone (kernel process ended) a little after.
    assert c.get(f"/notebooks/{nb['id']}").status_code == 200
    deadline = time.monotonic() + 30
    while c.get(f"/notebooks/{nb['id']}").status_code == 200:
        assert time.monotonic() < deadline, "the idle kernel was not stopped"
        time.sleep(0.5)
    wait_no_kernel(c, 15)


def test_cap_per_account(user):
    c, other = user(), user()
    path = write_notebook(c, "cap.ipynb", ["1"])
    first, second = open_nb(c, path), open_nb(c, path)
    third = open_nb(c, path, expect=429)
    assert "per_account" in third["detail"]
    other_nb = open_nb(other, write_notebook(other, "cap.ipynb", ["1"]))  # another account's own cap
    c.delete(f"/notebooks/{first['id']}")
    fourth = open_nb(c, path)  # room again once one is closed
    for nid in (second["id"], fourth["id"]):
        c.delete(f"/notebooks/{nid}")
    other.delete(f"/notebooks/{other_nb['id']}")


def test_bad_requests(user):
    c = user()
    assert open_nb(c, "missing.ipynb", expect=404)["detail"]
    c.post("/files/write", json={"path": "not.ipynb", "content": "hello"})
    assert open_nb(c, "not.ipynb", expect=400)["detail"].startswith("Not a Jupyter notebook")
    assert c.post("/notebooks", json={}).status_code == 422
    assert open_nb(c, "/etc/passwd", expect=403)["detail"]
    nb = open_nb(c, write_notebook(c, "b.ipynb", ["1"]))
    assert execute(c, nb["id"], expect=400, cell_index=5)["detail"].startswith("cell_index 5 is out of range")
    assert execute(c, nb["id"], expect=422, cell_index=-1)["detail"]
    assert execute(c, nb["id"], expect=422)["detail"]
    c.delete(f"/notebooks/{nb['id']}")


def test_a_kernel_that_dies_in_the_box_ends_its_notebook(user):
    # What a box that stops does to it: its processes end. The user may also kill it.
    c = user()
    nb = open_nb(c, write_notebook(c, "k.ipynb", ["1"]))
    # [i]: the pattern does not match the shell that runs pkill; the bridge's script names ipykernel
    sh(c, "pkill -KILL -f '[i]pykernel' || true")
    deadline = time.monotonic() + 15
    while c.get(f"/notebooks/{nb['id']}").status_code == 200:
        assert time.monotonic() < deadline, "the notebook outlived its kernel"
        time.sleep(0.2)
    assert execute(c, nb["id"], expect=404, cell_index=0)["detail"] == "Notebook not found"
    assert open_nb(c, "k.ipynb")["status"] == "ready"  # a new one starts
