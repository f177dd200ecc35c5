"""Who the caller is (issue 33): per-user API keys and Open WebUI's signed user.

A user's key (`POST /admin/keys`, `agentbox keys create`) acts as its user: no X-User-Id needed,
naming its own user is fine, naming another is 403 and creates nothing; revoked, it is 401 at
once; the list never shows a key; keys survive a restart. With `[auth] openwebui_jwt_secret`
the shared key with a valid X-OpenWebUI-User-Jwt acts as the token's user, every failed check
is 401 and a disagreeing X-User-Id 403; `require_jwt` refuses the shared key alone. The
terminal WebSocket takes a user's key in its first frame, without a user in the URL."""
import base64
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import time

import httpx
import pytest
import websockets

from conftest import agentbox_bin, home_of, running_daemon, sh
from test_terminals import closed_with, line, read_until, run

JWT_SECRET = secrets.token_hex(32)
CONFIG = f"""
[auth]
openwebui_jwt_secret = "{JWT_SECRET}"
"""


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims=None, *, secret=JWT_SECRET, alg="HS256", **overrides):
    """A token as Open WebUI's _mint_forward_user_jwt makes it (backend/open_webui/utils/headers.py)."""
    now = int(time.time())
    body = {"sub": "owui-ana", "email": "ana@example.com", "name": "Ana", "role": "user",
            "iss": "open-webui", "iat": now, "exp": now + 300}
    body.update(claims or {})
    body.update(overrides)
    head = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(body).encode())
    if alg == "none":
        return f"{head}.{payload}."
    sig = hmac.new(secret.encode(), f"{head}.{payload}".encode(), hashlib.sha256).digest()
    return f"{head}.{payload}.{b64url(sig)}"


@pytest.fixture(scope="module")
def kd():
    with running_daemon("keys", config_text=CONFIG) as d:
        yield d


def admin(d, key="admin"):
    if key == "admin":
        with open(os.path.join(d.state_dir, "admin_key")) as f:
            key = f.read().strip()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=d.url, headers=headers, timeout=60)


def create_key(d, user, name=None):
    body = {"user": user} if name is None else {"user": user, "name": name}
    with admin(d) as a:
        r = a.post("/admin/keys", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def keyed(d, key, **headers):
    return httpx.Client(base_url=d.url, headers={"Authorization": f"Bearer {key}", **headers}, timeout=60)


def shared(d, user=None, token=None):
    """The shared key, as Open WebUI's backend holds it; optionally a user and a signed user."""
    headers = {"Authorization": f"Bearer {d.api_key}"}
    if user is not None:
        headers["X-User-Id"] = user
    if token is not None:
        headers["X-OpenWebUI-User-Jwt"] = token
    return httpx.Client(base_url=d.url, headers=headers, timeout=60)


def accounts_of(d):
    with admin(d) as a:
        return {x["user"] for x in a.get("/admin/accounts").json()["accounts"]}


def uid(user):
    return f"{user}-{secrets.token_hex(4)}"


# ---- per-user keys ---------------------------------------------------------------------------

def test_a_users_key_acts_as_its_user_without_x_user_id(kd):
    alice = uid("alice")
    made = create_key(kd, alice, name="laptop")
    assert set(made) == {"id", "key", "user", "name", "created"}
    assert made["user"] == alice and made["name"] == "laptop" and made["key"].startswith("abk_" + made["id"] + "_")
    with keyed(kd, made["key"]) as c:  # no X-User-Id at all
        assert sh(c, "echo from-the-key > note.txt")[0] == 0
        home = home_of(c)
        assert c.get("/files/list", params={"directory": home}).status_code == 200
    with keyed(kd, made["key"], **{"X-User-Id": alice}) as c:  # naming itself is fine
        assert c.get("/files/read", params={"path": f"{home}/note.txt"}).json()["content"] == "from-the-key\n"
    # The shared key naming alice sees the same account.
    with kd.client(user=alice) as c:
        assert sh(c, "cat note.txt")[1] == "from-the-key\n"


def test_a_users_key_naming_another_user_is_403_and_creates_nothing(kd):
    alice, bob = uid("alice"), uid("bob")
    key = create_key(kd, alice)["key"]
    for headers, params in [({"X-User-Id": bob}, {}), ({"X-OpenWebUI-User-Id": bob}, {}),
                            ({}, {"user_id": bob})]:
        with keyed(kd, key, **headers) as c:
            r = c.get("/files/cwd", params=params)
            assert r.status_code == 403, r.text
            assert r.json() == {"detail": "This API key belongs to another user than the one the request names"}
            assert c.post("/execute", params=params, json={"command": "id"}).status_code == 403
    assert bob not in accounts_of(kd), "nothing was made for the user named"
    # Control: the same requests with the shared key act as bob.
    with kd.client(user=bob) as c:
        assert c.get("/files/cwd").status_code == 200
    assert bob in accounts_of(kd)


def test_a_revoked_key_is_401_at_once_and_the_list_never_shows_a_key(kd):
    alice = uid("alice")
    made = create_key(kd, alice)
    other = create_key(kd, alice, name="second")
    with admin(kd) as a:
        listed = a.get("/admin/keys")
        assert listed.status_code == 200, listed.text
        mine = [k for k in listed.json()["keys"] if k["user"] == alice]
        assert {k["id"] for k in mine} == {made["id"], other["id"]}
        assert all(set(k) == {"id", "user", "name", "created"} for k in mine)
        assert made["key"] not in listed.text and made["key"].split("_")[2] not in listed.text
    with keyed(kd, made["key"]) as c:
        assert c.get("/files/cwd").status_code == 200
        with admin(kd) as a:
            r = a.delete(f"/admin/keys/{made['id']}")
            assert r.status_code == 200, r.text
            assert r.json()["id"] == made["id"] and r.json()["user"] == alice
            assert a.delete(f"/admin/keys/{made['id']}").status_code == 404
        r = c.get("/files/cwd")  # the same connection, the next request
        assert r.status_code == 401 and r.json() == {"detail": "Invalid API key"}, r.text
    with keyed(kd, other["key"]) as c:  # control: the user's other key still works
        assert c.get("/files/cwd").status_code == 200


def test_under_v1_a_key_naming_another_user_is_openais_403(kd):
    """The OpenAI connection's routes take a user's key too; their errors keep OpenAI's shape."""
    alice = uid("alice")
    key = create_key(kd, alice)["key"]
    with keyed(kd, key) as c:
        assert c.get("/v1/models").status_code == 200
    with keyed(kd, key, **{"X-OpenWebUI-User-Id": uid("bob")}) as c:
        r = c.get("/v1/models")
        assert r.status_code == 403, r.text
        assert list(r.json()) == ["error"] and "another user" in r.json()["error"]["message"], r.text


def test_admin_key_routes_take_the_admin_key_only_and_check_the_body(kd):
    key = create_key(kd, uid("alice"))["key"]
    for credential, status in [(kd.api_key, 403), (key, 403), (None, 401), ("wrong", 401)]:
        with admin(kd, key=credential) as a:
            assert a.post("/admin/keys", json={"user": "x"}).status_code == status
            assert a.get("/admin/keys").status_code == status
            assert a.delete("/admin/keys/0000000000000000").status_code == status
    with admin(kd) as a:
        for body in [{}, {"user": ""}, {"user": 5}, {"user": "x" * 257}, {"user": "x", "name": 7}, []]:
            r = a.post("/admin/keys", json=body)
            assert r.status_code == 422 and "detail" in r.json(), (body, r.text)
        assert a.post("/admin/keys", content=b"{", headers={"Content-Type": "application/json"}).status_code == 400
        r = a.delete("/admin/keys/0000000000000000")
        assert r.status_code == 404 and "Unknown API key" in r.json()["detail"]
    # A made-up key of the right shape is no key.
    with keyed(kd, "abk_0000000000000000_" + "0" * 64) as c:
        assert c.get("/files/cwd").status_code == 401


def test_keys_survive_a_restart_and_the_cli_manages_them(make_daemon):
    d = make_daemon(tag="keys-restart", api_key=secrets.token_hex(16)).start()
    alice = uid("alice")

    def cli(*args):
        return subprocess.run([agentbox_bin(), "keys", *args, "--listen", f"127.0.0.1:{d.port}", "--state",
                               d.state_dir], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

    made = cli("create", alice, "--name", "ci")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()  # the key alone on stdout
    assert key.startswith("abk_") and "shown once" in made.stderr
    doomed = cli("create", alice, "--json")
    assert doomed.returncode == 0, doomed.stderr
    doomed = json.loads(doomed.stdout)
    listed = cli("list")
    assert listed.returncode == 0 and alice in listed.stdout and "ci" in listed.stdout, listed.stdout
    assert key not in listed.stdout and doomed["key"] not in listed.stdout
    revoked = cli("revoke", doomed["id"])
    assert revoked.returncode == 0 and doomed["id"] in revoked.stdout, revoked.stderr
    assert cli("revoke", doomed["id"]).returncode == 1

    with keyed(d, key) as c:
        assert sh(c, "echo kept > kept.txt")[0] == 0
    d.stop()
    d.start()
    with keyed(d, key) as c:  # loaded from the store at start
        assert sh(c, "cat kept.txt")[1] == "kept\n"
    with keyed(d, doomed["key"]) as c:  # a revoked key stays revoked
        assert c.get("/files/cwd").status_code == 401
    with open(os.path.join(d.state_dir, "agentbox.db"), "rb") as f:
        db = f.read()
    assert key.encode() not in db and key.split("_")[2].encode() not in db, "only a digest is stored"
    assert hashlib.sha256(key.encode()).hexdigest().encode() in db


def test_the_terminal_websocket_takes_a_users_key_in_its_first_frame(kd):
    alice, bob = uid("alice"), uid("bob")
    alice_key, bob_key = create_key(kd, alice)["key"], create_key(kd, bob)["key"]
    with keyed(kd, alice_key) as c:
        t = c.post("/api/terminals")
        assert t.status_code == 200, t.text
        tid = t.json()["id"]
    url = f"ws://127.0.0.1:{kd.port}/api/terminals/{tid}"

    async def scenario():
        ws = await websockets.connect(url, open_timeout=15, ping_interval=None)  # no user anywhere
        await ws.send(json.dumps({"type": "auth", "token": alice_key}))
        await ws.send(b"echo typed-by-key\n")
        out = await read_until(ws, line(b"typed-by-key"))
        await ws.close()
        # bob's key naming alice: refused after the upgrade, before any attach.
        ws = await websockets.connect(url + f"?user_id={alice}", open_timeout=15, ping_interval=None)
        await ws.send(json.dumps({"type": "auth", "token": bob_key}))
        other = await closed_with(ws)
        # bob's key alone: his own account, which has no such terminal.
        ws = await websockets.connect(url, open_timeout=15, ping_interval=None)
        await ws.send(json.dumps({"type": "auth", "token": bob_key}))
        own = await closed_with(ws)
        return out, other, own

    out, other, own = run(scenario())
    assert b"typed-by-key" in out
    assert other[0] == 4003, other
    assert own[0] == 4004, own


# ---- Open WebUI's signed user ----------------------------------------------------------------

def test_the_shared_key_with_open_webuis_token_acts_as_its_user(kd):
    ana = uid("owui")
    with shared(kd, token=jwt(sub=ana)) as c:  # no X-User-Id
        assert sh(c, "echo signed > s.txt")[0] == 0
    with kd.client(user=ana) as c:
        assert sh(c, "cat s.txt")[1] == "signed\n"
    with shared(kd, ana, jwt(sub=ana)) as c:
        assert c.get("/files/cwd").status_code == 200
    mallory = uid("mallory")
    with shared(kd, mallory, jwt(sub=ana)) as c:
        r = c.get("/files/cwd")
        assert r.status_code == 403 and r.json() == {"detail": "The user named disagrees with X-OpenWebUI-User-Jwt"}
    assert mallory not in accounts_of(kd)


@pytest.mark.parametrize("token,why", [
    (lambda: jwt(alg="none"), "the token is not signed with HS256"),
    (lambda: jwt(secret="not-the-secret-" + "x" * 20), "the token's signature is not valid"),
    (lambda: jwt(iss="someone-else"), "the token's issuer is not open-webui"),
    (lambda: jwt(exp=int(time.time()) - 5), "the token has expired"),
    (lambda: "not-a-token", "not a signed JWT (three parts)"),
])
def test_a_bad_token_is_401_naming_the_check(kd, token, why):
    victim = uid("victim")
    with shared(kd, victim, token()) as c:
        r = c.get("/files/cwd")
        assert r.status_code == 401, r.text
        assert r.json() == {"detail": f"Invalid X-OpenWebUI-User-Jwt: {why}"}
    assert victim not in accounts_of(kd)


def test_require_jwt_refuses_the_shared_key_alone(make_daemon):
    d = make_daemon(tag="keys-jwt", api_key=secrets.token_hex(16),
                    config_text=CONFIG + "require_jwt = true\n").start()
    carol = uid("carol")
    with d.client(user=carol) as c:
        r = c.get("/files/cwd")
        assert r.status_code == 401 and "require_jwt" in r.json()["detail"], r.text
        assert c.get("/health").status_code == 200  # public routes stay open
    assert carol not in accounts_of(d)
    # Controls: the shared key with a valid token, and a user's key, are served.
    with shared(d, token=jwt(sub=carol)) as c:
        assert c.get("/files/cwd").status_code == 200
    with keyed(d, create_key(d, carol)["key"]) as c:
        assert c.get("/files/cwd").status_code == 200
        tid = c.post("/api/terminals").json()["id"]

    async def frame(token):
        ws = await websockets.connect(f"ws://127.0.0.1:{d.port}/api/terminals/{tid}?user_id={carol}",
                                      open_timeout=15, ping_interval=None)
        await ws.send(json.dumps({"type": "auth", "token": token}))
        if token == d.api_key:
            return await closed_with(ws)
        await ws.send(b"echo framed\n")
        await read_until(ws, line(b"framed"))
        await ws.close()
        return None

    # The shared key in a terminal's auth frame is refused too; the control: carol's own key.
    code, reason = run(frame(d.api_key))
    assert code == 4001, reason
    run(frame(create_key(d, carol)["key"]))


def test_require_jwt_without_a_secret_is_a_config_error(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[auth]\nrequire_jwt = true\n")
    r = subprocess.run([agentbox_bin(), "config", "check", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "openwebui_jwt_secret" in (r.stdout + r.stderr)
    path.write_text('[auth]\nopenwebui_jwt_secret = "short"\n')
    r = subprocess.run([agentbox_bin(), "config", "check", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "32 bytes" in (r.stdout + r.stderr)


# ---- the browser's preflight ------------------------------------------------------------------

@pytest.mark.parametrize("method,path", [("GET", "/files/cwd"), ("POST", "/files/upload?directory=/"),
                                         ("DELETE", "/files/delete?path=x"), ("POST", "/files/move"),
                                         ("POST", "/api/terminals"), ("GET", "/ports")])
def test_preflights_allow_what_open_webuis_browser_sends(kd, method, path):
    """Open WebUI's direct connection (src/lib/apis/terminal/index.ts) sends the Bearer key,
    X-Session-Id and Content-Type from the page's origin: each preflight must allow them."""
    r = httpx.options(kd.url + path, headers={
        "Origin": "http://owui.example:3000", "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization,content-type,x-session-id"}, timeout=30)
    assert r.status_code == 204, r.text
    assert r.headers["access-control-allow-origin"] == "*"
    assert method in r.headers["access-control-allow-methods"]
    allowed = {h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "x-session-id"} <= allowed
