"""Metrics and health (issue 36): a real Prometheus (Debian's) scrapes a daemon's [metrics]
listener while a scripted session runs (two users, a denied egress, a gateway call to the fake
upstream, a quota refusal, a box start that fails); PromQL over Prometheus' HTTP API then finds
each of them counted. `promtool check metrics` accepts the page; a thousand users' requests add
no series; the page is the admin key's on the API and keyless only on its own listener; and
/health/ready says 503, naming the state dir, while the state dir takes no file.
"""
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import httpx
import pytest
import websockets

from conftest import running_daemon, sh
from scripted_session import ACCOUNTS_CONFIG, HOLD_START_ENV, STUCK, fail_a_box_start, refuse_a_write_for_quota

REAL_KEY = "sk-ant-api03-METRICS-" + uuid.uuid4().hex
MB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mdaemon(fake):
    config = f"""
[metrics]
listen = "127.0.0.1:0"
{ACCOUNTS_CONFIG}
[inference.anthropic]
upstream = "{fake.url}"
"""
    env = {**HOLD_START_ENV, "AGENTBOX_ANTHROPIC_API_KEY": REAL_KEY}
    with running_daemon("metrics", lifetime=600, config_text=config, env=env) as d:
        with open(d.log_path) as f:
            m = re.search(r"metrics on (http://127\.0\.0\.1:\d+)/metrics", f.read())
        assert m, d.log_tail()
        d.metrics_url = m.group(1)
        with open(os.path.join(d.state_dir, "admin_key")) as f:
            d.admin_key = f.read().strip()
        yield d


@pytest.fixture(scope="module")
def prometheus(mdaemon):
    """Debian's Prometheus scraping the daemon's metrics listener every second, for at most the
    module's lifetime (timeout), on a port and a data dir of its own."""
    workdir = tempfile.mkdtemp(prefix="agentbox-e2e-prometheus-")
    target = mdaemon.metrics_url.removeprefix("http://")
    with open(os.path.join(workdir, "prometheus.yml"), "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: agentbox
    static_configs:
      - targets: ["{target}"]
""")
    port = free_port()
    log = open(os.path.join(workdir, "prometheus.log"), "wb")
    proc = subprocess.Popen(
        ["timeout", "-k", "5", "300", "prometheus", f"--config.file={workdir}/prometheus.yml",
         f"--storage.tsdb.path={workdir}/data", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, open(log.name).read()[-3000:]
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def query(prom, promql):
    """The instant vector of promql as {labels as a sorted tuple: value}."""
    r = httpx.get(f"{prom}/api/v1/query", params={"query": promql}, timeout=10)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["resultType"] == "vector", data
    return {tuple(sorted((k, v) for k, v in s["metric"].items() if k not in ("job", "instance"))): float(s["value"][1])
            for s in data["result"]}


def scalar(prom, promql):
    v = query(prom, promql)
    assert len(v) == 1, (promql, v)
    return next(iter(v.values()))


def wait_scraped(prom, promql, want, timeout=30):
    """Waits until Prometheus holds a scrape where promql is want (scrapes come every second)."""
    deadline = time.monotonic() + timeout
    while True:
        v = query(prom, promql)
        if v and next(iter(v.values())) == want:
            return
        assert time.monotonic() < deadline, (promql, v, want)
        time.sleep(0.5)


def page(daemon):
    r = httpx.get(f"{daemon.metrics_url}/metrics", timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return r.text


def series(text):
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


# ---- a scripted session, counted by Prometheus -------------------------------------------------

def test_prometheus_counts_a_scripted_session(mdaemon, prometheus, fake):
    alice_id, bob_id = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    with mdaemon.client(user=alice_id) as alice, mdaemon.client(user=bob_id) as bob:
        # Two users, each with a box.
        assert sh(alice, "echo hi")[1] == "hi\n"
        assert sh(bob, "echo hi")[1] == "hi\n"
        assert alice.get("/files/list", params={"directory": "."}).status_code == 200

        # A denied egress: no policy allows anything, so the proxy refuses with 403.
        code, out, _ = sh(alice, "curl -s --max-time 10 -w ' %{http_code}' http://nowhere.test/")
        assert out.endswith(" 403"), out

        # A gateway call, relayed to the fake upstream.
        code, out, err = sh(alice, 'curl -sS --max-time 20 -o /dev/null -w "%{http_code}" '
                                   '"$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" '
                                   '-H "anthropic-version: 2023-06-01" -H "content-type: application/json" '
                                   """-d '{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'""")
        assert out == "200", (out, err)

        # A quota refusal: bob's volume filled, then a write through the API.
        refuse_a_write_for_quota(bob)

        # A command that runs on: the gauge of commands in boxes sees it, and sees it end.
        r = alice.post("/execute", params={"wait": 0}, json={"command": "sleep 60"})
        assert r.status_code == 200 and r.json()["status"] == "running", r.text
        wait_scraped(prometheus, "agentbox_box_commands_running", 1)
        assert alice.delete(f"/execute/{r.json()['id']}").status_code in (200, 204)
        wait_scraped(prometheus, "agentbox_box_commands_running", 0)

    # A box start that fails: its init never answers, and the start times out.
    fail_a_box_start(mdaemon)

    wait_scraped(prometheus, 'agentbox_box_start_failures_total{reason="timeout"}', 1)
    p = prometheus
    assert scalar(p, 'up{job="agentbox"}') == 1
    assert scalar(p, "agentbox_boxes_started_total") == 2
    assert scalar(p, "agentbox_box_start_duration_seconds_count") == 2
    assert scalar(p, 'sum(agentbox_box_start_failures_total{reason!="timeout"})') == 0
    assert scalar(p, "agentbox_boxes_running") == 2
    assert scalar(p, "agentbox_box_commands_running") == 0  # every command of the session ended
    assert scalar(p, "agentbox_accounts_known") == 3
    assert scalar(p, 'agentbox_egress_decisions_total{verdict="denied"}') == 1
    assert scalar(p, 'agentbox_egress_decisions_total{verdict="allowed"}') == 0
    assert scalar(p, 'agentbox_gateway_requests_total{verdict="allowed"}') == 1
    assert scalar(p, 'agentbox_gateway_upstream_responses_total{class="2xx"}') == 1
    tokens = {dict(k)["kind"]: v for k, v in query(p, "agentbox_gateway_tokens_total").items()}
    used = fake.requests[-1]  # the usage the fake answered with is what was counted
    assert tokens["input"] == 25 and tokens["output"] == 10, (tokens, used)
    assert scalar(p, "agentbox_storage_refusals_total") == 1
    assert scalar(p, 'agentbox_http_requests_total{route="/files/write",method="POST",status="507"}') == 1
    assert scalar(p, 'agentbox_http_requests_total{route="/files/list",method="GET",status="200"}') == 1
    assert scalar(p, 'agentbox_http_requests_total{route="/execute",method="POST",status="503"}') == 1
    assert scalar(p, 'agentbox_http_requests_total{route="/execute/{id}",method="DELETE"}') == 1
    assert scalar(p, 'agentbox_http_request_duration_seconds_count{route="/files/write"}') == 1
    assert scalar(p, 'agentbox_build_info') == 1
    assert scalar(p, "process_threads") > 1 and scalar(p, "process_open_fds") > 0
    assert scalar(p, "process_resident_memory_bytes") > 1 * MB
    # No label anywhere holds a user id or an account's path.
    text = page(mdaemon)
    for who in (alice_id, bob_id, STUCK, "note.txt", "/home/"):
        assert who not in text


def test_promtool_accepts_the_page(mdaemon):
    with mdaemon.client(user=f"lint-{uuid.uuid4().hex[:8]}") as c:
        assert c.get("/files/list", params={"directory": "."}).status_code == 200
    r = subprocess.run(["promtool", "check", "metrics"], input=page(mdaemon), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", (r.stdout, r.stderr)


def requests_total(text, route, method, status):
    m = re.search(rf'^agentbox_http_requests_total\{{route="{re.escape(route)}",method="{method}",'
                  rf'status="{status}"\}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def test_takeover_routes_are_counted_under_their_pattern(mdaemon):
    # The terminal WebSocket and /proxy take the connection over from the HTTP layer: their
    # answers (101, the proxied status) are counted all the same, by pattern.
    user = f"takeover-{uuid.uuid4().hex[:8]}"
    before = page(mdaemon)
    with mdaemon.client(user=user) as c:
        r = c.post("/api/terminals")
        assert r.status_code == 200, r.text
        tid = r.json()["id"]

        async def session():
            url = f"ws://127.0.0.1:{mdaemon.port}/api/terminals/{tid}?user_id={user}"
            async with websockets.connect(url, open_timeout=15, ping_interval=None) as ws:
                await ws.send(json.dumps({"type": "auth", "token": mdaemon.api_key}))
                await ws.send(b"echo took-$((40+2))\n")
                seen = b""
                while b"took-42" not in seen:
                    seen += await asyncio.wait_for(ws.recv(), 15)

        asyncio.run(session())
        proxied = c.get("/proxy/1/somewhere").status_code  # nothing listens on port 1 in the box
    after = page(mdaemon)
    ws_route = "/api/terminals/{id}"
    assert requests_total(after, ws_route, "GET", 101) == requests_total(before, ws_route, "GET", 101) + 1
    proxy_route = "/proxy/{port}/{path:path}"
    assert (requests_total(after, proxy_route, "GET", proxied) ==
            requests_total(before, proxy_route, "GET", proxied) + 1), proxied
    for what in (tid, user, "/proxy/1", "somewhere"):  # labels are patterns, never paths
        assert what not in after


def test_a_thousand_users_requests_add_no_series(mdaemon):
    def round_of(n, tag):
        with httpx.Client(base_url=mdaemon.url, timeout=10) as c, mdaemon.client(user=f"{tag}-one") as own:
            for i in range(n):
                user = f"{tag}-user-{i}-{uuid.uuid4().hex[:6]}"
                # Refused keys (no account is made), paths no route has, and a real user's
                # listings of many paths: every one names a user or a path of its own.
                assert c.get("/files/list", params={"directory": f"/d{i}"},
                             headers={"X-User-Id": user, "Authorization": "Bearer wrong"}).status_code == 401
                assert c.get(f"/no/such/{user}", headers={"X-User-Id": user}).status_code == 404
                assert own.get("/files/list", params={"directory": f"dir-{i}"}).status_code == 404

    round_of(1, "warm")  # each (route, status) seen once
    before = series(page(mdaemon))
    round_of(1000, "many")
    after = series(page(mdaemon))
    assert after == before, sorted(after ^ before)
    assert "many-user" not in page(mdaemon)


def test_the_page_takes_the_admin_key_on_the_api_and_none_on_its_own_listener(mdaemon):
    with httpx.Client(base_url=mdaemon.url, timeout=10) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"Authorization": f"Bearer {mdaemon.api_key}"}).status_code == 403
        r = c.get("/metrics", headers={"Authorization": f"Bearer {mdaemon.admin_key}"})
        assert r.status_code == 200 and "agentbox_build_info{" in r.text
    with httpx.Client(base_url=mdaemon.metrics_url, timeout=10) as m:
        r = m.get("/metrics")
        assert r.status_code == 200 and "agentbox_http_requests_total{" in r.text
        # The keyless listener serves the page and the health checks, nothing else.
        assert m.get("/health/ready").status_code == 200
        assert m.get("/files/list", headers={"Authorization": f"Bearer {mdaemon.api_key}"}).status_code == 404
        assert m.get("/admin/accounts", headers={"Authorization": f"Bearer {mdaemon.admin_key}"}).status_code == 404


# ---- health ------------------------------------------------------------------------------------

def test_ready_is_503_naming_the_state_dir_while_it_takes_no_file_and_200_after(mdaemon):
    with httpx.Client(base_url=mdaemon.url, timeout=10) as c:
        assert c.get("/health").json() == {"status": "ok"}  # stays as it was
        assert c.get("/health/live").status_code == 200
        assert c.get("/health/ready").json() == {"status": "ready"}
        subprocess.run(["chattr", "+i", mdaemon.state_dir], check=True)
        try:
            deadline = time.monotonic() + 5
            while (r := c.get("/health/ready")).status_code == 200:
                assert time.monotonic() < deadline, "ready stayed 200 with an immutable state dir"
                time.sleep(0.2)
            assert r.status_code == 503, r.text
            assert r.json()["detail"].startswith("state_dir: cannot create a file in "), r.text
            assert c.get("/health/live").status_code == 200  # alive, only not ready
        finally:
            subprocess.run(["chattr", "-i", mdaemon.state_dir], check=True)
        deadline = time.monotonic() + 5
        while (r := c.get("/health/ready")).status_code != 200:
            assert time.monotonic() < deadline, r.text
            time.sleep(0.2)
        assert r.json() == {"status": "ready"}
        assert not [n for n in os.listdir(mdaemon.state_dir) if n.startswith(".ready-probe")]


# ---- the dashboard (deploy/grafana) ------------------------------------------------------------

def test_every_dashboard_query_parses_and_names_families_the_page_has(mdaemon, prometheus):
    dashboard = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "grafana", "agentbox-dashboard.json")
    with open(dashboard) as f:
        panels = json.load(f)["panels"]
    families = set(re.findall(r"^# TYPE (\S+) ", page(mdaemon), re.M))
    # The mirror's gauges appear after a first pass only; this daemon has no [backup] dir.
    families |= {"agentbox_mirror_last_pass_end_timestamp_seconds", "agentbox_mirror_last_pass_duration_seconds",
                 "agentbox_mirror_last_pass_errors"}
    assert len(panels) >= 12
    for panel in panels:
        for target in panel["targets"]:
            expr = (target["expr"].replace("$__rate_interval", "1m").replace("$instance", ".*").replace("$job", ".*"))
            r = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
            assert r.status_code == 200, (panel["title"], expr, r.text)
            for name in re.findall(r"\b((?:agentbox|process)_[a-z_]+)", expr):
                assert re.sub(r"_bucket$", "", name) in families, (panel["title"], name)
