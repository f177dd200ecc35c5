"""The model gateway opens only the model API (issue 30, finding 4). The operator's credential
opens more than the Messages API: with an OAuth token the endpoint that mints an API key
(/api/oauth/claude_cli/create_api_key) and the account's profile; with an API key the Files and
Message Batches APIs of the whole workspace (one user's uploads and batch results, read or
deleted by any box). A box reached all of them through its ANTHROPIC_BASE_URL, and `..` or
`%2e%2e` after /v1/messages left the path it was given.

Each attack is sent from inside a box, with each kind of credential, and must get 403 with a
reason the box can read (an Anthropic-shaped permission_error), be in the network log as
refused, and never arrive at the upstream: the fake (tests/fakes/fake_anthropic.py) records
every request it gets, any method. The control is the same daemon: the routes the pinned
Claude Code CLI uses reach the fake with the operator's credential, and a real Claude Code
turn with a tool call runs through the gateway.
"""
import json
import pathlib
import secrets
import shlex
import time
import uuid

import pytest

from e2e_conftest import running_daemon, sh
from fake_anthropic import FakeAnthropic, bash

REPO = pathlib.Path(__file__).resolve().parents[2]
CLAUDE = REPO / "deps" / "claude-code" / "node_modules" / ".bin" / "claude"
API_KEY = "sk-ant-api03-REDTEAM-" + secrets.token_hex(12)
OAUTH_TOKEN = "sk-ant-oat01-REDTEAM-" + secrets.token_hex(12)
FILE_ID = "file_011CNha8iCJcU1wXNR6q4V8w"
BATCH_ID = "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d"

# (method, target, what it is). Targets go to curl with --path-as-is: byte for byte.
ATTACKS = [
    ("POST", "/api/oauth/claude_cli/create_api_key", "mints an API key with an OAuth token"),
    ("GET", "/api/oauth/profile", "the OAuth account's profile"),
    ("GET", "/v1/files", "the workspace's uploads"),
    ("GET", f"/v1/files/{FILE_ID}/content", "another user's upload"),
    ("DELETE", f"/v1/files/{FILE_ID}", "deletes another user's upload"),
    ("POST", "/v1/messages/batches", "a batch: tokens no budget saw"),
    ("GET", f"/v1/messages/batches/{BATCH_ID}/results", "another user's batch results"),
    ("DELETE", f"/v1/messages/batches/{BATCH_ID}", "deletes another user's batch"),
    ("GET", "/v1/messages/../files", "a raw dot segment"),
    ("POST", "/v1/messages/../../api/oauth/claude_cli/create_api_key", "raw dot segments to the OAuth API"),
    ("GET", "/v1/messages/%2e%2e/files", "an encoded dot segment"),
    ("GET", "/v1/messages/%2E%2E/%2E%2E/api/oauth/profile", "upper-case encoding"),
    ("GET", "/v1/messages/%252e%252e/files", "a dot segment encoded twice"),
    ("GET", "/v1/messages%2f..%2ffiles", "an encoded slash"),
    ("POST", "/v1/messages/.%2e/batches", "half encoded"),
    ("GET", "/v1/messages", "the Messages API by another method"),
    ("DELETE", "/v1/messages", "the Messages API by another method"),
    ("POST", "/v1/complete", "an API the CLI does not use"),
]

# What the pinned CLI uses (src/net/gateway_routes.hpp): each reaches the upstream.
ALLOWED = [
    ("POST", "/v1/messages?beta=true"),
    ("POST", "/v1/messages/count_tokens?beta=true"),
    ("GET", "/v1/models?limit=1000"),
]

BODY = json.dumps({"model": "claude-test", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})

# Runs in the box: each request on a connection of its own, as curl sends it with the path as
# given; prints one JSON line per request: {"status": ..., "body": ...}.
SEND = r'''
import json, subprocess, sys
for method, target in json.loads(sys.argv[1]):
    out = subprocess.run(["curl", "-sS", "--path-as-is", "--max-time", "20", "-X", method,
                          "-H", "x-api-key: placeholder-of-the-box", "-H", "content-type: application/json",
                          "--data-binary", sys.argv[2], "-w", "\n%{http_code}",
                          "http://127.0.0.1:3129" + target], capture_output=True, text=True)
    body, _, status = out.stdout.rpartition("\n")
    print(json.dumps({"status": int(status or 0), "body": body, "err": out.stderr}))
'''


@pytest.fixture(scope="module")
def fake():
    f = FakeAnthropic()
    yield f
    f.close()


@pytest.fixture(scope="module", params=["api_key", "oauth_token"])
def gdaemon(request, fake):
    if not CLAUDE.exists():
        pytest.skip(f"Claude Code CLI not installed at {CLAUDE} (scripts/install-deps.sh installs it)")
    env = ({"AGENTBOX_ANTHROPIC_API_KEY": API_KEY} if request.param == "api_key"
           else {"AGENTBOX_ANTHROPIC_OAUTH_TOKEN": OAUTH_TOKEN})
    config = f'[inference.anthropic]\nupstream = "http://127.0.0.1:{fake.port}"\n[agent]\nclaude = "{CLAUDE}"\n'
    with running_daemon(f"gw-routes-{request.param}", config_text=config, env=env) as d:
        d.credential = request.param
        yield d


@pytest.fixture
def user(gdaemon):
    c = gdaemon.client(user=f"gwr-{uuid.uuid4().hex[:8]}")
    yield c
    c.close()


def send(client, requests):
    code, out, err = sh(client, f"python3 -c {shlex.quote(SEND)} {shlex.quote(json.dumps(requests))} "
                                f"{shlex.quote(BODY)}")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def the_operators_credential(request, kind):
    if kind == "api_key":
        return request.headers.get("x-api-key") == API_KEY and "authorization" not in request.headers
    return request.headers.get("authorization") == f"Bearer {OAUTH_TOKEN}" and "x-api-key" not in request.headers


def refusals_in_log(client, targets):
    """The reasons of the gateway's refused entries, once each target is named in one."""
    deadline = time.monotonic() + 10
    while True:
        reasons = [e["reason"] for e in client.get("/network/log", params={"limit": 500}).json()["entries"]
                   if e["kind"] == "gateway" and not e["allowed"]]
        if all(any(t in r for r in reasons) for t in targets) or time.monotonic() > deadline:
            return reasons


def test_what_else_the_credential_opens_is_refused_and_never_reaches_the_upstream(user, fake, gdaemon):
    before = len(fake.requests)
    answers = send(user, [(m, t) for m, t, _ in ATTACKS])
    # The control on the same connection-less path, sent last: the first request the upstream
    # gets after the attacks is this one, so nothing of theirs is still on its way.
    control = send(user, [("POST", "/v1/messages?beta=true")])[0]
    assert control["status"] == 200, control
    arrived = fake.requests[before:]
    assert [(r.method, r.path) for r in arrived] == [("POST", "/v1/messages")], \
        [(r.method, r.path, r.query) for r in arrived]
    for (method, target, what), answer in zip(ATTACKS, answers):
        assert answer["status"] == 403, (method, target, what, answer)
        error = json.loads(answer["body"])
        assert error["type"] == "error" and error["error"]["type"] == "permission_error", answer
        message = error["error"]["message"]
        assert message.startswith("agentbox: the model gateway"), message
        assert API_KEY not in answer["body"] and OAUTH_TOKEN not in answer["body"]
    # Each is in the network log as refused, naming what was refused and why.
    reasons = refusals_in_log(user, [t for _, t, _ in ATTACKS])
    for _, target, _ in ATTACKS:
        assert any(target in r for r in reasons), (target, reasons)
    for why in ("forwards only the model API", "'.' or '..' segment", "no percent-encoding"):
        assert any(why in r for r in reasons), (why, reasons)


def test_control_the_model_api_reaches_the_upstream_with_the_operators_credential(user, fake, gdaemon):
    before = len(fake.requests)
    answers = send(user, ALLOWED)
    arrived = fake.requests[before:]
    assert [(r.method, r.path) for r in arrived] == [(m, t.split("?")[0]) for m, t in ALLOWED]
    assert [a["status"] for a in answers[:2]] == [200, 200]  # the fake has no model list: 404 from it
    assert json.loads(answers[2]["body"])["error"]["message"].startswith("fake_anthropic has no GET /v1/models")
    assert all(the_operators_credential(r, gdaemon.credential) for r in arrived)
    assert arrived[0].query == {"beta": "true"} and arrived[2].query == {"limit": "1000"}


def test_control_a_chunked_body_reaches_the_upstream_whole(user, fake):
    before = len(fake.requests)
    code, out, err = sh(user, f"curl -sS --max-time 20 -H 'transfer-encoding: chunked' -H 'content-type: application/json' "
                              f"--data-binary {shlex.quote(BODY)} -w '\\n%{{http_code}}' http://127.0.0.1:3129/v1/messages")
    assert code == 0 and out.endswith("\n200"), (out, err)
    arrived = fake.requests[before:]
    assert len(arrived) == 1 and arrived[0].raw == BODY.encode(), arrived


def test_control_a_claude_code_turn_with_a_tool_call_runs_through_the_gateway(user, fake, gdaemon):
    marker = "m" + uuid.uuid4().hex[:10]
    fake.route(lambda r: marker in json.dumps(r.body or {}), *bash(f"echo {marker}-ran", then=f"finished {marker}"))
    before = len(fake.requests)
    code, out, err = sh(user, f"claude -p {shlex.quote('run it ' + marker)} --output-format stream-json --verbose "
                              "--permission-mode bypassPermissions")
    assert code == 0, (out, err)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "result" and events[-1]["result"] == f"finished {marker}", events[-1]
    turns = [r for r in fake.requests[before:] if marker in json.dumps(r.body or {})]
    assert len(turns) == 2  # the tool call, then the turn that carries its result
    assert f"{marker}-ran" in json.dumps(turns[1].tool_results)
    assert all(r.method == "POST" and r.path == "/v1/messages" and r.query == {"beta": "true"} for r in turns)
    assert all(the_operators_credential(r, gdaemon.credential) for r in turns)
