"""/mcp: agentbox as an MCP server over Streamable HTTP, driven by the official MCP TypeScript
clients (tests/e2e/mcp_client, installed by scripts/install-deps.sh): the v1 SDK for revision
2025-11-25 (client.mjs) and the v2 client for 2026-07-28 (client2.mjs); and by hand for what a
well-behaved client never sends."""
import base64
import json
import pathlib
import subprocess
import uuid

import httpx
import pytest

MCP_CLIENT = pathlib.Path(__file__).resolve().parent / "mcp_client"
MODEL_TOOLS = {"run_command", "get_process_status", "send_process_input", "kill_process", "list_processes",
               "read_file", "write_file", "replace_file_content", "list_files", "grep_search", "glob_search",
               "display_file", "read_user_terminal", "send_user_terminal_input"}


def node(daemon, scenario, *users, key=None):
    assert (MCP_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), "scripts/install-deps.sh"
    run = subprocess.run(["node", str(MCP_CLIENT / "client.mjs"), daemon.url, key or daemon.api_key, scenario, *users],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def new_user(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def tour(daemon):
    return node(daemon, "tour", new_user("mcp"))


def test_initialize_names_the_server_and_opens_a_session(tour):
    assert tour["server"]["name"] == "agentbox"
    assert len(tour["session"]) == 32


def test_the_tools_are_openapis_model_tools_and_every_schema_compiles_in_ajv_strict(tour, daemon):
    assert set(tour["tools"]) == MODEL_TOOLS
    assert {n: t["compile_error"] for n, t in tour["tools"].items() if t["compile_error"]} == {}
    # Generated from /openapi.json: the same names, descriptions and limits.
    doc = httpx.get(daemon.url + "/openapi.json").json()
    ops = {op["operationId"]: op for path in doc["paths"].values() for op in path.values() if "operationId" in op}
    for name, tool in tour["tools"].items():
        assert tool["description"] == ops[name]["description"], name
        for p in ops[name].get("parameters", []):
            described = tool["schema"]["properties"][p["name"]]["description"]
            if (name, p["name"]) == ("run_command", "wait"):  # the MCP default is added to it
                assert described.startswith(p["description"]) and "Default 30" in described, described
                continue
            assert described == p["description"]
    run = tour["tools"]["run_command"]["schema"]
    assert run["required"] == ["command"] and run["properties"]["wait"]["maximum"] == 300
    assert tour["tools"]["get_process_status"]["schema"]["required"] == ["id"]
    assert tour["run_command_accepts_empty"] is False


def test_a_command_runs_in_the_users_box_with_its_output_and_exit_code(tour):
    echo = tour["echo"]
    assert not echo["isError"]
    assert echo["structured"]["status"] == "done" and echo["structured"]["exit_code"] == 0
    out = "".join(c["data"] for c in echo["structured"]["output"])
    assert out.startswith("one"), out


def test_write_then_read_then_grep(tour):
    assert not tour["write"]["isError"], tour["write"]
    assert not tour["read"]["isError"]
    assert "hello mcp" in tour["read"]["text"] and "second line" in tour["read"]["text"]
    matches = json.dumps(tour["grep"]["structured"])
    assert "second line" in matches and "hello.txt" in matches


def test_an_image_read_is_an_image_block(tour):
    image = tour["image"]
    assert not image["isError"], image
    assert image["content"] == [{"type": "image", "data": image["sent"], "mimeType": "image/png"}], image


def test_a_long_command_reports_progress_and_returns_when_done(tour):
    long = tour["long"]
    assert long["structured"]["status"] == "done" and long["structured"]["exit_code"] == 0
    out = "".join(c["data"] for c in long["structured"]["output"])
    assert all(f"tick{i}" in out for i in (1, 2, 3)), out
    assert len(long["progress"]) >= 2, long["progress"]
    progress = [p["progress"] for p in long["progress"]]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert "tick" in "".join(p.get("message", "") for p in long["progress"])


def test_at_the_wait_limit_the_answer_names_the_process_to_poll(tour):
    limited = tour["limited"]["structured"]
    assert limited["status"] == "running" and limited["id"], limited


def test_a_tool_error_is_a_result_with_is_error_and_a_readable_message(tour):
    assert tour["missing"]["isError"] is True
    assert "not found" in tour["missing"]["text"].lower(), tour["missing"]


def test_an_unknown_tool_is_invalid_params(tour):
    assert tour["unknown_tool"]["ok"] is False and tour["unknown_tool"]["code"] == -32602, tour["unknown_tool"]


def test_a_deleted_session_is_refused(tour):
    after = tour["after_delete"]
    assert after["sent_session"] and after["ok"] is False and after["code"] == 404, after


def test_two_users_are_isolated_through_every_tool(daemon):
    got = node(daemon, "isolation", new_user("alice"), new_user("bob"))
    assert "alice-secret-42" in got["alice_reads"]  # the control: the owner reads it
    assert got["alice_path"].endswith("/secret/alice.txt")
    for name, r in got["bob"].items():
        assert "alice-secret-42" not in r["text"], (name, r)
    for name in ("read_file", "list_files", "grep_search", "glob_search"):
        assert got["bob"][name]["isError"] is True, (name, got["bob"][name])


def test_a_session_answers_only_the_user_who_opened_it(daemon):
    alice, bob = new_user("alice"), new_user("bob")
    c = httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.api_key}",
                                                   "Accept": "application/json, text/event-stream"})
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = c.post("/mcp", json=init, headers={"X-User-Id": alice})
    assert r.status_code == 200 and r.json()["result"]["protocolVersion"] == "2025-11-25"
    sid = r.headers["Mcp-Session-Id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert c.post("/mcp", json=ping, headers={"X-User-Id": alice, "Mcp-Session-Id": sid}).json()["result"] == {}
    # Bob naming alice's session: not found, for every method, and DELETE too.
    assert c.post("/mcp", json=ping, headers={"X-User-Id": bob, "Mcp-Session-Id": sid}).status_code == 404
    assert c.delete("/mcp", headers={"X-User-Id": bob, "Mcp-Session-Id": sid}).status_code == 404
    # The X-OpenWebUI-User-Id header names the same account as X-User-Id.
    assert c.post("/mcp", json=ping, headers={"X-OpenWebUI-User-Id": alice, "Mcp-Session-Id": sid}).status_code == 200
    assert c.delete("/mcp", headers={"X-User-Id": alice, "Mcp-Session-Id": sid}).status_code == 204
    assert c.post("/mcp", json=ping, headers={"X-User-Id": alice, "Mcp-Session-Id": sid}).status_code == 404
    # No session header at all, and no user: 400 as the REST API's.
    assert c.post("/mcp", json=ping, headers={"X-User-Id": alice}).status_code == 400
    assert c.post("/mcp", json=init).status_code == 400
    c.close()


def test_a_bad_key_is_401(daemon):
    got = node(daemon, "connect", new_user("mcp"), key="not-the-key")
    assert got["ok"] is False and got["code"] == 401, got
    r = httpx.post(daemon.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                   headers={"Authorization": "Bearer nope", "X-User-Id": "u"})
    assert r.status_code == 401 and r.json()["error"]["code"] == -32600


@pytest.fixture
def session(daemon):
    user = new_user("rpc")
    c = httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.api_key}", "X-User-Id": user,
                                                   "Accept": "application/json, text/event-stream"})
    r = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    c.headers["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
    yield c
    c.close()


def rpc_error(r):
    body = r.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body["error"]["code"], body.get("id")


def test_malformed_json_is_a_parse_error(session):
    r = session.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and rpc_error(r) == (-32700, None)


def test_not_a_request_is_invalid_request(session):
    for bad in ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], {"id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "id": 1, "method": 7}, "ping"):
        r = session.post("/mcp", json=bad)
        assert r.status_code == 400 and rpc_error(r)[0] == -32600, bad


def test_an_unknown_method_is_method_not_found_and_the_session_lives_on(session):
    r = session.post("/mcp", json={"jsonrpc": "2.0", "id": "x", "method": "resources/teleport"})
    assert r.status_code == 200 and rpc_error(r) == (-32601, "x")
    r = session.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                   "params": {"name": "run_command", "arguments": "echo hi"}})
    assert rpc_error(r) == (-32602, 3)
    assert session.post("/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "ping"}).json()["result"] == {}


def test_a_notification_is_accepted_without_an_answer(session):
    r = session.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202 and r.content == b""


def test_sse_when_the_client_accepts_only_sse(session):
    r = session.post("/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                     headers={"Accept": "text/event-stream"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    data = [line[len("data: "):] for line in r.text.splitlines() if line.startswith("data: ")]
    assert json.loads(data[0])["id"] == 9 and json.loads(data[0])["result"]["tools"]


def test_an_oversized_message_is_refused_before_it_is_read(session):
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + b"x" * (17 << 20) + b'"}'
    r = session.post("/mcp", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and rpc_error(r)[0] == -32600
    assert session.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}).json()["result"] == {}


def test_get_is_405_the_server_sends_nothing_unasked(session):
    assert session.get("/mcp").status_code == 405


def test_the_chat_scopes_the_cwd_as_in_the_rest_api(daemon, session):
    """A chat's cwd set over REST is where its MCP tools start; another chat starts in the home."""
    user = session.headers["X-User-Id"]
    rest = daemon.client(user=user, session="chat-a")
    assert rest.post("/files/mkdir", json={"path": "work"}).status_code == 200
    assert rest.post("/files/cwd", json={"path": "work"}).status_code == 200
    home = rest.get("/files/cwd").json()["home"]
    rest.close()

    def pwd(chat, header="X-Session-Id"):
        headers = {header: chat} if chat else {}
        r = session.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"command": "pwd", "wait": 10}}})
        out = r.json()["result"]["structuredContent"]["output"]
        return "".join(c["data"] for c in out).strip()

    assert pwd("chat-a") == home + "/work"
    assert pwd("chat-b") == home
    assert pwd(None) == home
    # Open WebUI names the chat to MCP servers as X-OpenWebUI-Chat-Id: the same chat.
    assert pwd("chat-a", "X-OpenWebUI-Chat-Id") == home + "/work"
    assert pwd("chat-b", "X-OpenWebUI-Chat-Id") == home


# ---- the modern revision (2026-07-28), through the official v2 client --------------------------

def node2(daemon, scenario, *users, key=None):
    assert (MCP_CLIENT / "node_modules" / "@modelcontextprotocol" / "client").is_dir(), "scripts/install-deps.sh"
    run = subprocess.run(["node", str(MCP_CLIENT / "client2.mjs"), daemon.url, key or daemon.api_key, scenario, *users],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def modern(daemon):
    return node2(daemon, "tour", new_user("mcp2"))


def test_modern_the_client_negotiates_2026_07_28_statelessly(modern):
    assert modern["protocol"] == "2026-07-28"
    assert modern["server"]["name"] == "agentbox"
    # Every request carried the revision in its header and its _meta, and no session.
    assert modern["seen"] and all(s["header"] == "2026-07-28" and s["session"] is None for s in modern["seen"])
    assert all(s["meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28" for s in modern["seen"] if s["meta"])


def test_modern_tools_compile_and_answer_as_the_rest_routes(modern):
    assert set(modern["tools"]) == MODEL_TOOLS
    assert {n: t["compile_error"] for n, t in modern["tools"].items() if t["compile_error"]} == {}
    assert modern["echo"]["structured"]["exit_code"] == 0
    assert "".join(c["data"] for c in modern["echo"]["structured"]["output"]).startswith("one")
    assert "hello modern" in modern["read"]["text"]
    assert "hello modern" in json.dumps(modern["grep"]["structured"])
    long = modern["long"]
    assert long["structured"]["status"] == "done"
    assert all(f"tock{i}" in "".join(c["data"] for c in long["structured"]["output"]) for i in (1, 2, 3))
    assert len(long["progress"]) >= 2 and "tock" in "".join(p.get("message", "") for p in long["progress"])
    assert modern["missing"]["isError"] is True and "not found" in modern["missing"]["text"].lower()
    assert modern["unknown_tool"]["ok"] is False and modern["unknown_tool"]["code"] == -32602


def test_modern_two_users_are_isolated(daemon):
    got = node2(daemon, "isolation", new_user("alice"), new_user("bob"))
    assert "alice-modern-7" in got["alice_reads"]  # the control
    for name, r in got["bob"].items():
        assert "alice-modern-7" not in r["text"], (name, r)
    for name in ("read_file", "list_files", "grep_search"):
        assert got["bob"][name]["isError"] is True, (name, got["bob"][name])


def test_modern_a_bad_key_is_401(daemon):
    got = node2(daemon, "connect", new_user("mcp2"), key="not-the-key")
    assert got["ok"] is False and got["status"] == 401, got


def modern_request(method, version="2026-07-28", meta=True, **params):
    if meta:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": version,
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def test_modern_revision_errors_are_the_ones_the_spec_names(daemon):
    c = httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.api_key}",
                                                   "X-User-Id": new_user("rpc2"),
                                                   "Accept": "application/json, text/event-stream"})
    h = {"MCP-Protocol-Version": "2026-07-28"}
    r = c.post("/mcp", json=modern_request("server/discover"), headers=h)
    assert r.status_code == 200 and r.json()["result"]["supportedVersions"] == ["2026-07-28"]
    assert r.json()["result"]["resultType"] == "complete" and "Mcp-Session-Id" not in r.headers
    # Stateless: a tools/list with no session at all.
    r = c.post("/mcp", json=modern_request("tools/list"), headers=h)
    assert {t["name"] for t in r.json()["result"]["tools"]} == MODEL_TOOLS
    # The header and the _meta disagree: HeaderMismatch.
    r = c.post("/mcp", json=modern_request("tools/list"), headers={"MCP-Protocol-Version": "2026-08-01"})
    assert r.status_code == 400 and rpc_error(r) == (-32020, 7)
    # A revision not spoken: UnsupportedProtocolVersion naming the supported ones.
    r = c.post("/mcp", json=modern_request("tools/list", version="2027-01-01"),
               headers={"MCP-Protocol-Version": "2027-01-01"})
    assert rpc_error(r) == (-32022, 7) and r.json()["error"]["data"]["supported"] == ["2026-07-28"]
    # The header alone, no _meta envelope: invalid params.
    r = c.post("/mcp", json=modern_request("tools/list", meta=False), headers=h)
    assert rpc_error(r) == (-32602, 7)
    r = c.post("/mcp", json=modern_request("resources/teleport"), headers=h)
    assert rpc_error(r) == (-32601, 7)
    c.close()


def test_run_command_without_wait_answers_with_the_output_of_a_short_command(daemon):
    got = node(daemon, "default_wait", new_user("mcp"))
    assert got["wait_schema"]["default"] == 30 and "Default 30" in got["wait_schema"]["description"], got
    for case in ("plain", "polled"):
        done = got[case]["structured"]
        assert done["status"] == "done" and done["exit_code"] == 0, (case, done)
        assert f"late-{case}" in "".join(c["data"] for c in done["output"]), (case, done)
    assert got["plain"]["seconds"] >= 1.5, got["plain"]  # it waited for the command, not for nothing
    assert got["polled"]["progress"], got["polled"]  # the progress path still streams
    # The control: an explicit wait 0 still answers at once, with the id to poll.
    now = got["now"]["structured"]
    assert now["status"] == "running" and now["id"], now


# ---- the user's files as resources, through both clients -------------------------------------

@pytest.mark.parametrize("client", ["client.mjs", "client2.mjs"])
def test_the_users_files_are_resources_listed_in_pages_and_read_as_text_or_blob(daemon, client):
    alice, bob = new_user("alice"), new_user("bob")
    run = subprocess.run(["node", str(MCP_CLIENT / client), daemon.url, daemon.api_key, "resources", alice, bob],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["capabilities"] is not None, got
    # 132 files: two pages of at most 100, every file once, as file:// URIs of the box's paths.
    # (The v2 client walks the pages itself when asked without a cursor: one list of all 132,
    # which it can only have by following the first page's nextCursor.)
    assert got["pages"] == ([100, 32] if client == "client.mjs" else [132]), got["pages"]
    names = sorted(r["name"] for r in got["resources"])
    assert names == sorted(["res/a b.txt", "res/bin.dat"] + [f"res/many/f{i}.txt" for i in range(1, 131)])
    text_uri = next(r["uri"] for r in got["resources"] if r["name"] == "res/a b.txt")
    assert text_uri.startswith("file:///home/") and text_uri.endswith("/res/a%20b.txt"), text_uri
    assert [t["uriTemplate"] for t in got["templates"]] == ["file:///{path}"]
    assert got["text"] == [{"uri": text_uri, "mimeType": got["text"][0]["mimeType"], "text": "alpha resource\n"}]
    assert got["text"][0]["mimeType"].startswith("text/plain")
    assert got["binary"][0]["blob"] == base64.b64encode(b"\x00\x01\xff").decode(), got["binary"]
    assert "text" not in got["binary"][0]
    # Outside the home, and alice's file by its URI from bob: not found (alice read it above).
    assert got["outside"]["ok"] is False and got["outside"]["code"] == -32002, got["outside"]
    assert got["bob_reads_alice"]["ok"] is False and got["bob_reads_alice"]["code"] == -32002, got["bob_reads_alice"]
    assert not any(alice in uri for uri in got["bob_lists"]), got["bob_lists"]


def test_a_bad_cursor_or_uri_is_invalid_params(session):
    def rpc(method, params):
        return session.post("/mcp", json={"jsonrpc": "2.0", "id": 5, "method": method, "params": params})
    assert rpc_error(rpc("resources/list", {"cursor": "not-ours"})) == (-32602, 5)
    assert rpc_error(rpc("resources/read", {"uri": "http://example.com/x"})) == (-32602, 5)
    assert rpc_error(rpc("resources/read", {})) == (-32602, 5)
    # The control: a real first page answers.
    assert "resources" in rpc("resources/list", {}).json()["result"]
