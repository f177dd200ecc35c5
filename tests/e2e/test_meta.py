"""Authentication, user identity and the small routes: /health, /api/config, /system, /files/cwd."""
import re
import uuid

import httpx

import pytest

from conftest import home_of, sh

# Every authenticated route of API.md Part A (+ the stream of Part B), with a harmless request.
PROTECTED = [
    ("GET", "/system", None),
    ("GET", "/files/cwd", None),
    ("POST", "/files/cwd", {"path": "."}),
    ("GET", "/files/list?directory=.", None),
    ("GET", "/files/read?path=x", None),
    ("GET", "/files/display?path=x", None),
    ("GET", "/files/view?path=x", None),
    ("GET", "/files/serve/x", None),
    ("POST", "/files/write", {"path": "x", "content": ""}),
    ("POST", "/files/replace", {"path": "x", "replacements": []}),
    ("POST", "/files/mkdir", {"path": "d"}),
    ("DELETE", "/files/delete?path=x", None),
    ("POST", "/files/move", {"source": "x", "destination": "y"}),
    ("GET", "/files/grep?query=x", None),
    ("GET", "/files/glob?pattern=*", None),
    ("POST", "/files/upload?directory=.", None),
    ("POST", "/files/archive", {"paths": ["x"]}),
    ("GET", "/execute", None),
    ("POST", "/execute", {"command": "true"}),
    ("GET", "/execute/abc/status", None),
    ("POST", "/execute/abc/input", {"input": "x"}),
    ("DELETE", "/execute/abc", None),
    ("GET", "/execute/abc/stream", None),
    ("GET", "/ports", None),
    ("GET", "/proxy/8124/", None),
    ("POST", "/proxy/8124/x", {"a": 1}),
    ("GET", "/skills", None),
    ("GET", "/skills/read?name=x", None),
    ("GET", "/skills/x", None),
    ("GET", "/user-terminal/read", None),
    ("POST", "/user-terminal/input", {"text": "x"}),
]
IDS = [f"{m} {p.split('?')[0]}" for m, p, _ in PROTECTED]


def test_health_needs_no_key(clients):
    r = clients(key=None).get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_api_config_needs_no_key(clients):
    r = clients(key=None).get("/api/config")
    assert r.status_code == 200
    assert r.json() == {"features": {"terminal": True, "notebooks": True, "system": True}}


def test_openapi_needs_no_key(clients):
    r = clients(key=None).get("/openapi.json")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["openapi"].startswith("3.")


@pytest.mark.parametrize("method,path,body", PROTECTED, ids=IDS)
@pytest.mark.parametrize("auth", [None, "Bearer wrong-key", "Basic dXNlcjpwYXNz", "Bearer"],
                         ids=["missing", "wrong", "basic", "empty"])
def test_every_route_refuses_a_missing_or_wrong_key(clients, method, path, body, auth):
    c = clients(user="someone", key=None)
    headers = {"Authorization": auth} if auth else {}
    r = c.request(method, path, json=body, headers=headers)
    assert r.status_code == 401, r.text
    assert r.json() == {"detail": "Invalid API key"}


# GET /system without a user header describes a generic box instead (tested below).
WITHOUT_USER = [(m, p, b, u) for m, p, b in PROTECTED for u in (None, "") if not (p == "/system" and u is None)]


@pytest.mark.parametrize("method,path,body,user", WITHOUT_USER,
                         ids=[f"{m} {p.split('?')[0]} {'absent' if u is None else 'empty'}" for m, p, _, u in WITHOUT_USER])
def test_every_route_refuses_a_request_without_user(clients, method, path, body, user):
    r = clients(user=user).request(method, path, json=body)
    assert r.status_code == 400, r.text
    assert "X-User-Id" in r.json()["detail"]


def test_api_key_is_compared_exactly(clients, daemon):
    for key in (daemon.api_key + "x", daemon.api_key[:-1], daemon.api_key.upper()):
        if key == daemon.api_key:
            continue
        r = clients(user="someone", key=key).get("/execute")
        assert r.status_code == 401


def test_system_without_a_user_describes_any_users_box(clients):
    """Open WebUI fetches the system prompt once with the key only (no user header)."""
    r = clients().get("/system")
    assert r.status_code == 200, r.text
    prompt = r.json()["prompt"]
    assert "an account of your own" in prompt and "run_command" in prompt
    assert "/home/" not in prompt.replace("under /home", ""), prompt


def test_system_prompt_names_the_users_box(clients):
    c = clients.user("sys")
    r = c.get("/system")
    assert r.status_code == 200
    prompt = r.json()["prompt"]
    home = home_of(c)
    assert home in prompt
    assert home.split("/")[-1] in prompt


def test_files_cwd_is_the_home_and_names_are_valid(clients):
    c = clients.user("Cwd.User@example.com")
    r = c.get("/files/cwd")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["cwd"] == body["home"] == home_of(c)
    name = body["home"].removeprefix("/home/")
    assert re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name), name
    if "root" in body and body["root"] is not None:
        assert set(body["root"]) >= {"path", "label"}


def test_distinct_user_ids_get_distinct_accounts(clients):
    homes = {home_of(clients(user=uid)) for uid in ("Same-Prefix-A", "same-prefix-a", "same-prefix-a.")}
    assert len(homes) == 3
    # And one user id always maps to the same account.
    assert home_of(clients(user="Same-Prefix-A")) in homes


def test_session_cwd_is_kept_per_session(clients):
    uid = clients.user("sess").headers["X-User-Id"]
    a = clients(user=uid, session="chat-a")
    b = clients(user=uid, session="chat-b")
    home = home_of(a)
    assert sh(a, "mkdir -p proj/sub")[0] == 0

    r = a.post("/files/cwd", json={"path": "proj/sub"})
    assert r.status_code == 200, r.text
    assert a.get("/files/cwd").json()["cwd"] == f"{home}/proj/sub"
    assert sh(a, "pwd")[1] == f"{home}/proj/sub\n"
    # Relative file paths resolve against it.
    assert a.post("/files/write", json={"path": "here.txt", "content": "x"}).status_code == 200
    assert sh(a, "cat ~/proj/sub/here.txt")[1] == "x"

    # Another session of the same user is unaffected.
    assert b.get("/files/cwd").json()["cwd"] == home
    assert sh(b, "pwd")[1] == f"{home}\n"

    # ~ and absolute forms work, ".." climbs back.
    assert a.post("/files/cwd", json={"path": ".."}).json()["cwd"] == f"{home}/proj"
    assert a.post("/files/cwd", json={"path": "~"}).json()["cwd"] == home
    assert a.post("/files/cwd", json={"path": f"{home}/proj"}).json()["cwd"] == f"{home}/proj"


def test_set_cwd_errors(clients):
    c = clients.user("cwderr", session="s1")
    home = home_of(c)
    sh(c, "touch afile")
    assert c.post("/files/cwd", json={"path": "missing"}).status_code == 404
    assert c.post("/files/cwd", json={"path": "afile"}).status_code in (400, 404)
    for outside in ("/", "/etc", "..", "~/..", f"{home}/../", "/proc/self/root"):
        r = c.post("/files/cwd", json={"path": outside})
        assert r.status_code == 403, (outside, r.text)
    assert c.post("/files/cwd", json={}).status_code == 422
    assert c.post("/files/cwd", json={"path": 5}).status_code == 422
    # Without a session there is no cwd to keep.
    r = clients(user=c.headers["X-User-Id"]).post("/files/cwd", json={"path": "."})
    assert r.status_code == 400


def test_cors_preflight(clients):
    r = clients(key=None).options("/execute", headers={
        "Origin": "http://webui.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-user-id"})
    assert r.status_code in (200, 204)
    assert r.headers.get("access-control-allow-origin") in ("*", "http://webui.example")


def test_unknown_route_is_404_json(clients):
    r = clients.user().get("/no/such/route")
    assert r.status_code == 404
    assert "detail" in r.json()


def test_a_deleted_session_cwd_falls_back_to_the_home(clients):
    c = clients.user("gone", session="chat-gone")
    home = home_of(c)
    assert sh(c, "mkdir -p proj")[0] == 0
    assert c.post("/files/cwd", json={"path": "proj"}).status_code == 200
    assert sh(c, "pwd")[1].strip() == home + "/proj"
    assert sh(c, "rmdir " + home + "/proj")[0] == 0
    code, out, _ = sh(c, "pwd")
    assert (code, out.strip()) == (0, home)
    assert c.get("/files/list").status_code == 200
    assert c.get("/files/cwd").json()["cwd"] == home


def test_open_webuis_user_header_names_the_same_account(clients, daemon):
    """Open WebUI's generic tool-server mode sends X-OpenWebUI-User-Id."""
    user = f"owui-{uuid.uuid4().hex[:8]}"
    ours = clients(user=user)
    theirs = daemon.client(key="default")
    theirs.headers["X-OpenWebUI-User-Id"] = user
    try:
        assert sh(theirs, "whoami")[1] == sh(ours, "whoami")[1]
        assert theirs.get("/files/cwd").json()["home"] == home_of(ours)
    finally:
        theirs.close()


def test_two_user_headers_that_disagree_or_repeat_are_refused(clients, daemon):
    """Whoever can add a header must not pick the account (a proxy that appends instead of
    replacing): disagreeing or repeated user headers are 400."""
    key = {"Authorization": f"Bearer {daemon.api_key}"}
    for headers in ([("X-User-Id", "mallory"), ("X-OpenWebUI-User-Id", "alice")],
                    [("X-User-Id", "mallory"), ("X-User-Id", "alice")],
                    [("X-OpenWebUI-User-Id", "a"), ("X-OpenWebUI-User-Id", "a")]):
        r = httpx.get(daemon.url + "/files/cwd", headers=list(key.items()) + headers, timeout=30)
        assert r.status_code == 400, (headers, r.text)
