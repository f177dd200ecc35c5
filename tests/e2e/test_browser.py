"""The browser test of issue 33: a page on another origin (another 127.0.0.1 port), in a real
headless Chromium (Debian's, driven by puppeteer-core) with xterm.js, holding alice's own key as
Open WebUI's "direct" terminal connection does: it lists, uploads, reads and downloads files,
opens a terminal, types into xterm.js and sees the echo, all without X-User-Id; with bob's key it
cannot name alice (403). CORS (preflights for Authorization, X-Session-Id, Content-Type) and the
WebSocket's first-frame auth are what make it work. Needs scripts/install-deps.sh (chromium,
tests/e2e/browser/node_modules)."""
import functools
import http.server
import json
import os
import secrets
import subprocess
import threading

import httpx
import pytest

from conftest import running_daemon

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")


@pytest.fixture(scope="module")
def bd():
    with running_daemon("browser") as d:
        yield d


@pytest.fixture
def page_server():
    """The page's own origin: a static server on another loopback port, stopped after the test."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=HERE))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/page.html"
    server.shutdown()
    server.server_close()


def user_key(d, user):
    with open(os.path.join(d.state_dir, "admin_key")) as f:
        admin = f.read().strip()
    r = httpx.post(d.url + "/admin/keys", json={"user": user}, headers={"Authorization": f"Bearer {admin}"},
                   timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["key"]


def test_a_page_on_another_origin_works_with_a_users_own_key(bd, page_server):
    for need in ("/usr/bin/chromium", os.path.join(HERE, "node_modules", "puppeteer-core"),
                 os.path.join(HERE, "node_modules", "@xterm", "xterm")):
        assert os.path.exists(need), f"{need} is missing: run scripts/install-deps.sh"
    alice, bob = f"alice-{secrets.token_hex(4)}", f"bob-{secrets.token_hex(4)}"
    env = dict(os.environ, PAGE=page_server, API=bd.url, ALICE=alice, ALICE_KEY=user_key(bd, alice),
               BOB_KEY=user_key(bd, bob))
    r = subprocess.run(["node", os.path.join(HERE, "drive.mjs")], env=env, capture_output=True, text=True,
                       timeout=60, cwd=HERE, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert "error" not in seen, seen
    assert seen["pageOrigin"] != bd.url, "the page is on another origin than the API"

    steps = seen["files"]["steps"]
    home = seen["files"]["home"]
    # A cross-origin answer the page can read at all is one CORS allowed (the browser hides the
    # rest: a status of 0 and a TypeError).
    assert steps["cwd"]["status"] == 200, steps["cwd"]
    assert steps["upload"]["status"] == 200, steps["upload"]
    assert steps["list"]["status"] == 200, steps["list"]
    assert "hello.txt" in [e["name"] for e in steps["list"]["json"]["entries"]]
    assert steps["read"]["json"]["content"] == "hello from the browser\n", steps["read"]
    assert steps["download"] == {"status": 200, "text": "hello from the browser\n"}

    # bob's key: his own home, never alice's; naming her is 403.
    assert seen["bobNamingAlice"] == 403
    bob_steps = seen["bobOwn"]["steps"]
    assert seen["bobOwn"]["home"] != home
    assert "hello.txt" not in [e["name"] for e in bob_steps["list"]["json"]["entries"]]

    assert seen["terminal"]["status"] == 200, seen["terminal"]
    assert "typed-in-42-chromium" in seen["screen"], (seen["screen"], seen.get("closed"), seen["console"])
    assert "echo typed-in-$((6*7))-chromium" in seen["screen"], "the shell echoed what was typed"
    assert seen["closed"] is None, seen["closed"]

    # What the page made is alice's, seen through the shared key naming her.
    with bd.client(user=alice) as c:
        assert c.get("/files/read", params={"path": f"{home}/hello.txt"}).json()["content"] == \
            "hello from the browser\n"
