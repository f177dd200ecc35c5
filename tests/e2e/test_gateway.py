"""The inference gateway (issue 14): a box reaches the model API through a listener on its own
loopback (ANTHROPIC_BASE_URL) holding only a placeholder key; the daemon drops whatever
credential the box sends, adds the operator's, forwards over TLS (certificate and name
verified), streams the answer back as it comes, counts the tokens and enforces a daily budget.

The "Anthropic API" here is a fake on the host's 127.0.0.1 (TLS with a CA made for the test, or
plain HTTP, which the daemon accepts only to a loopback address). It records every request it
gets, so a request that must not arrive is shown not to have arrived.
"""
import json
import os
import secrets
import shlex
import ssl
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from conftest import run, running_daemon, sh, wait_done, wait_for_output

REAL_KEY = "sk-ant-api03-REAL-" + secrets.token_hex(16)  # what only the daemon may hold
PLACEHOLDER = "sk-ant-agentbox-placeholder-the-gateway-adds-the-real-key"
USAGE = {"input_tokens": 11, "output_tokens": 22, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 4}
USED = sum(USAGE.values())  # what one answer charges the account


def stream_events(text):
    """A streamed Messages API answer, event by event."""
    start_usage = dict(USAGE, output_tokens=1)
    return [
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": [],
                                                                 "usage": start_usage}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": USAGE["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]


class FakeAnthropic:
    """POST /v1/messages: a JSON answer, or with "stream": true an SSE answer in chunks. The model
    "gated" stops after message_start until the test opens the gate."""

    def __init__(self, tls_files=None):
        self.requests = []
        self.gate = threading.Event()
        self.first_sent = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                fake.requests.append({"path": self.path,
                                      "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": body})
                request = json.loads(body or b"{}")
                if not request.get("stream"):
                    answer = json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                                         "content": [{"type": "text", "text": "hello from the fake"}],
                                         "usage": USAGE}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i, (name, data) in enumerate(stream_events("streamed words")):
                    chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                    if i == 0 and request.get("model") == "gated":
                        fake.first_sent.set()
                        fake.gate.wait(30)
                self.wfile.write(b"0\r\n\r\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls_files:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls_files)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.server.handle_error = lambda *a: None  # a refused handshake is the test's point
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A CA made for this test and a certificate it signed for the name "localhost" only."""
    d = tmp_path_factory.mktemp("gateway-tls")

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=agentbox test CA")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "server.pem"), "key": str(d / "server.key")}


@pytest.fixture(scope="module")
def tls_fake(tls_files):
    f = FakeAnthropic((tls_files["cert"], tls_files["key"]))
    yield f
    f.close()


@pytest.fixture(scope="module")
def gdaemon(tls_fake, tls_files):
    """A daemon whose gateway goes to the TLS fake by name, trusting the test's CA; the key
    comes from its environment."""
    config = f"""
[inference.anthropic]
upstream = "https://localhost:{tls_fake.port}"
ca_file = "{tls_files['ca']}"
"""
    with running_daemon("gateway", config_text=config, env={"AGENTBOX_ANTHROPIC_API_KEY": REAL_KEY}) as d:
        yield d


@pytest.fixture
def user(gdaemon):
    c = gdaemon.client(user=f"gw-{uuid.uuid4().hex[:8]}")
    yield c
    c.close()


def body_of(stream=False, model="claude-test"):
    return json.dumps({"model": model, "max_tokens": 16, "stream": stream,
                       "messages": [{"role": "user", "content": "hi"}]})


# What a budget reserves for ask()'s request: max_tokens, and its body's bytes plus the
# allowance for the prompts the API adds (src/net/request_worst_case.hpp).
WORST = 16 + len(body_of()) + 1024


def ask(client, *, stream=False, model="claude-test", extra_headers="", expect_http=None):
    """curl in the box to its gateway, as an SDK would; returns (http status, body)."""
    body = body_of(stream, model)
    command = (f'curl -sS --max-time 20 -w "\\n%{{http_code}}" "$ANTHROPIC_BASE_URL/v1/messages" '
               f'-H "x-api-key: $ANTHROPIC_API_KEY" -H "anthropic-version: 2023-06-01" '
               f'-H "content-type: application/json" {extra_headers} -d {shlex.quote(body)}')
    code, out, err = sh(client, command)
    assert code == 0, err
    text, status = out.rsplit("\n", 1)
    if expect_http is not None:
        assert int(status) == expect_http, text
    return int(status), text


def tokens_today(client):
    r = client.get("/usage")
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def wait_tokens(client, total, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        t = tokens_today(client)
        if t["today"]["total_tokens"] >= total or time.monotonic() > deadline:
            return t
        time.sleep(0.05)


def test_the_box_holds_a_base_url_on_its_loopback_and_a_placeholder_key(user):
    code, out, _ = sh(user, 'printf "%s %s" "$ANTHROPIC_BASE_URL" "$ANTHROPIC_API_KEY"')
    assert code == 0
    assert out == f"http://127.0.0.1:3129 {PLACEHOLDER}"
    ports = user.get("/ports").json()["ports"]
    assert all(p["port"] not in (3128, 3129) for p in ports), ports  # the daemon's listeners, not the user's


def test_the_upstream_gets_the_operators_key_and_never_the_boxs(user, tls_fake):
    before = len(tls_fake.requests)
    status, text = ask(user, extra_headers='-H "authorization: Bearer stolen-or-made-up" -H "anthropic-beta: tools-1"',
                       expect_http=200)
    assert json.loads(text)["content"][0]["text"] == "hello from the fake"
    seen = tls_fake.requests[before:]
    assert len(seen) == 1
    headers = seen[0]["headers"]
    assert headers["x-api-key"] == REAL_KEY
    assert "authorization" not in headers  # what the box sent is dropped, not passed beside the key
    assert PLACEHOLDER not in json.dumps(headers)
    assert headers["host"] == f"localhost:{tls_fake.port}"
    assert headers["anthropic-beta"] == "tools-1" and headers["anthropic-version"] == "2023-06-01"
    assert seen[0]["path"] == "/v1/messages" and json.loads(seen[0]["body"])["model"] == "claude-test"


def test_tokens_are_counted_per_account_and_shown_by_usage(gdaemon, user):
    assert tokens_today(user)["today"]["total_tokens"] == 0
    ask(user, expect_http=200)
    ask(user, stream=True, expect_http=200)
    t = wait_tokens(user, 2 * USED)
    assert t["gateway"] is True and t["daily_budget"] is None
    assert t["today"]["requests"] == 2
    assert t["today"]["input_tokens"] == 2 * USAGE["input_tokens"]
    assert t["today"]["output_tokens"] == 2 * USAGE["output_tokens"]  # the stream's last count, not a sum
    assert t["today"]["total_tokens"] == 2 * USED
    assert t["days"][0]["day"] == t["today"]["day"]
    with gdaemon.client(user=f"gw-other-{uuid.uuid4().hex[:8]}") as other:
        assert tokens_today(other)["today"]["total_tokens"] == 0  # the caller's own only


def test_a_streamed_answer_reaches_the_box_as_it_is_made(user, tls_fake):
    tls_fake.gate.clear()
    tls_fake.first_sent.clear()
    body = json.dumps({"model": "gated", "max_tokens": 16, "stream": True, "messages": []})
    p = run(user, f'curl -sN --max-time 40 "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" '
                  f'-H "content-type: application/json" -d {shlex.quote(body)}', wait=0, pty=False)
    try:
        assert tls_fake.first_sent.wait(20)
        # The upstream is holding back everything after message_start: the box has it already.
        seen = wait_for_output(user, p["id"], "message_start")
        assert "message_stop" not in seen
    finally:
        tls_fake.gate.set()
    done = wait_done(user, p["id"])
    out = "".join(c["data"] for c in done["output"])
    assert done["exit_code"] == 0 and "message_stop" in out and "streamed words" in out


# Run in the box: looks for the key in every process's environment and command line and in
# every readable file under the trees a box can write or read config from. It gets the key in
# two halves, so that no command line but its own (which it skips) holds it whole.
FIND_KEY = r"""
import os, sys
key = (sys.argv[1] + sys.argv[2]).encode()
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == os.getpid():
        continue
    for part in ("environ", "cmdline"):
        try:
            if key in open(f"/proc/{pid}/{part}", "rb").read():
                found.append(f"/proc/{pid}/{part}")
        except OSError:
            pass
for top in ("/etc", "/home", "/tmp", "/var", "/run", "/opt", "/usr/local", "/root"):
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                # A key is kept in a config or state file, not in a large binary or data file:
                # past 8 MiB is skipped (the host's /opt alone can hold ~700 MB).
                if not os.path.islink(path) and os.path.getsize(path) < (8 << 20) and key in open(path, "rb").read():
                    found.append(path)
            except OSError:
                pass
print("found:", found)
"""


def test_the_key_is_nowhere_a_box_can_look(gdaemon, user):
    ask(user, expect_http=200)  # the gateway has used the key at least once
    marker = REAL_KEY.split("-REAL-")[1]
    half = len(marker) // 2
    code, out, err = sh(user, f"python3 -c {shlex.quote(FIND_KEY)} {marker[:half]} {marker[half:]}")
    assert code == 0 and out.strip() == "found: []", out + err
    code, out, _ = sh(user, f'env; curl -s "$ANTHROPIC_BASE_URL/nothing-here"')
    assert marker[:half] not in out  # not in the environment, not in an answer
    # Nor in the daemon's own log, its network log, /usage, or its environment after start
    # (cleared once read: nothing it starts can inherit it).
    with open(gdaemon.log_path, "rb") as f:
        assert marker.encode() not in f.read()
    assert marker not in user.get("/network/log").text and marker not in user.get("/usage").text
    with open(f"/proc/{gdaemon.pid}/environ", "rb") as f:
        assert marker.encode() not in f.read()


def test_a_gateway_request_is_in_the_network_log(user):
    ask(user, expect_http=200)
    deadline = time.monotonic() + 10
    while True:
        entries = [e for e in user.get("/network/log").json()["entries"] if e["kind"] == "gateway"]
        if entries or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert entries and entries[0]["allowed"] and entries[0]["host"] == "localhost"
    assert entries[0]["reason"].startswith("POST /v1/messages -> 200") and entries[0]["bytes_down"] > 0


def test_the_gateway_is_not_a_proxy(user):
    code, out, _ = sh(user, 'curl -s -x "$ANTHROPIC_BASE_URL" -w " %{http_code}" http://bait.test/')
    assert out.endswith(" 400") and "not a proxy" in out


# ---- daemons of their own: budget, upstream down, TLS refused, OAuth ----------------------

@pytest.fixture(scope="module")
def plain_fake():
    f = FakeAnthropic()
    yield f
    f.close()


def own_daemon(make_daemon, config, env=None):
    d = make_daemon(tag="gateway-own", config_text=config, env=env or {"AGENTBOX_ANTHROPIC_API_KEY": REAL_KEY})
    d.start()
    return d


def test_a_spent_daily_budget_answers_429_without_reaching_the_upstream(make_daemon, plain_fake):
    # Room for two answers of USED tokens each, then one worst case less a token.
    budget = 2 * USED + WORST - 1
    d = own_daemon(make_daemon, f'[inference.anthropic]\nupstream = "http://127.0.0.1:{plain_fake.port}"\n'
                                f"daily_tokens = {budget}\n")
    with d.client(user=f"budget-{uuid.uuid4().hex[:8]}") as c:
        ask(c, expect_http=200)
        ask(c, stream=True, expect_http=200)  # its worst case (a byte shorter) still fits
        wait_tokens(c, 2 * USED)
        before = len(plain_fake.requests)
        status, text = ask(c)
        assert status == 429
        error = json.loads(text)
        assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
        assert "daily token budget" in error["error"]["message"]
        assert len(plain_fake.requests) == before
        t = tokens_today(c)
        assert t["daily_budget"] == budget and t["remaining_today"] == WORST - 1
        with d.client(user=f"budget-other-{uuid.uuid4().hex[:8]}") as other:
            ask(other, expect_http=200)  # one account's budget is its own


def test_a_users_chats_spend_one_daily_budget(make_daemon, plain_fake):
    # A context box (its own network namespace and gateway listener) spends its user's budget:
    # two answers in chat A leave less than a worst case, so the user's default box is refused.
    budget = 2 * USED + WORST - 1
    d = own_daemon(make_daemon, f'[inference.anthropic]\nupstream = "http://127.0.0.1:{plain_fake.port}"\n'
                                f'daily_tokens = {budget}\n[profiles.chats]\nisolation = "context"\n')
    user = f"budget-chats-{uuid.uuid4().hex[:8]}"
    chat = httpx.Client(base_url=f"{d.url}/p/chats", timeout=60,
                        headers={"Authorization": f"Bearer {d.api_key}", "X-User-Id": user,
                                 "X-Terminal-Context-Id": "chat:a"})
    with chat, d.client(user=user) as plain:
        ask(chat, expect_http=200)
        ask(chat, expect_http=200)
        assert wait_tokens(plain, 2 * USED)["today"]["total_tokens"] == 2 * USED  # the user's, seen by default
        status, text = ask(plain)
        assert status == 429 and "daily token budget" in text
        with d.client(user=f"budget-chats-other-{uuid.uuid4().hex[:8]}") as other:
            ask(other, expect_http=200)  # the control: another user's budget is untouched


def test_an_upstream_that_is_down_gives_the_box_a_clean_502(make_daemon):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    d = own_daemon(make_daemon, f'[inference.anthropic]\nupstream = "http://127.0.0.1:{port}"\n')
    with d.client(user=f"down-{uuid.uuid4().hex[:8]}") as c:
        status, text = ask(c)
        assert status == 502
        error = json.loads(text)["error"]
        assert error["type"] == "api_error" and f"127.0.0.1:{port}" in error["message"]
        assert REAL_KEY not in text
        code, out, _ = sh(c, "echo still here")
        assert out == "still here\n"


@pytest.mark.parametrize("how", ["name-mismatch", "untrusted-ca"])
def test_an_upstream_whose_certificate_does_not_hold_gets_nothing(make_daemon, tls_fake, tls_files, how):
    if how == "name-mismatch":  # the certificate names localhost; 127.0.0.1 is checked as an address
        config = f'upstream = "https://127.0.0.1:{tls_fake.port}"\nca_file = "{tls_files["ca"]}"\n'
    else:  # the system store does not hold the test's CA
        config = f'upstream = "https://localhost:{tls_fake.port}"\n'
    d = own_daemon(make_daemon, "[inference.anthropic]\n" + config)
    before = len(tls_fake.requests)
    with d.client(user=f"tls-{uuid.uuid4().hex[:8]}") as c:
        status, text = ask(c)
    assert status == 502 and "certificate verify failed" in json.loads(text)["error"]["message"]
    assert len(tls_fake.requests) == before


def test_an_oauth_token_goes_as_a_bearer_with_its_beta(make_daemon, plain_fake):
    token = "sk-ant-oat01-" + secrets.token_hex(8)
    d = own_daemon(make_daemon, f'[inference.anthropic]\nupstream = "http://127.0.0.1:{plain_fake.port}"\n',
                   env={"AGENTBOX_ANTHROPIC_OAUTH_TOKEN": token})
    before = len(plain_fake.requests)
    with d.client(user=f"oauth-{uuid.uuid4().hex[:8]}") as c:
        ask(c, extra_headers='-H "anthropic-beta: tools-1"', expect_http=200)
    headers = plain_fake.requests[before]["headers"]
    assert headers["authorization"] == f"Bearer {token}" and "x-api-key" not in headers
    assert headers["anthropic-beta"] == "tools-1,oauth-2025-04-20"


def test_no_credential_means_no_gateway_in_the_box(daemon):
    with daemon.client(user=f"nogw-{uuid.uuid4().hex[:8]}") as c:
        code, out, _ = sh(c, 'printf "[%s][%s]" "$ANTHROPIC_BASE_URL" "$ANTHROPIC_API_KEY"')
        assert out == "[][]"
        assert c.get("/usage").json()["tokens"] == {"gateway": False}


def test_a_gateway_configured_without_a_credential_refuses_to_start(make_daemon):
    d = make_daemon(tag="gateway-nokey", config_text="[inference.anthropic]\ndaily_tokens = 5\n")
    with pytest.raises(RuntimeError, match="no credential"):
        d.start()
