"""Egress from a box through its proxy (issue 14): a box reaches the hosts its policy allows, by
name, through the proxy its environment names, and nothing else. Everything here stays on this
machine: the "hosts" are names the config maps to 127.0.0.1 ([hosts]), where this test runs an
origin server, and `allow_addresses = ["127.0.0.1/32"]` lets the proxy go there. A box reaching
that server without the proxy would have left its network namespace: the direct probe below
shows it cannot.
"""
import json
import os
import shlex
import signal
import time
import uuid

import pytest

from conftest import run, running_daemon, sh, text_of, wait_done, wait_for_output

ALICE = f"egress-alice-{uuid.uuid4().hex[:8]}"
BOB = f"egress-bob-{uuid.uuid4().hex[:8]}"

HOSTS = """
[hosts]
"bait.test" = "127.0.0.1"
"tunnel.test" = "127.0.0.1"
"denied.test" = "127.0.0.1"
"alice-only.test" = "127.0.0.1"
"elsewhere.test" = "127.0.0.1"
"""

CONFIG = f"""
[policy.default]
allow = ["bait.test", "tunnel.test", "*.denied.test", "denied.test"]
deny = ["denied.test"]
allow_addresses = ["127.0.0.1/32"]
[policy.users."{ALICE}"]
allow = ["alice-only.test"]
""" + HOSTS


@pytest.fixture(scope="module")
def edaemon():
    with running_daemon("egress", config_text=CONFIG) as d:
        yield d


@pytest.fixture
def alice(edaemon):
    c = edaemon.client(user=ALICE)
    yield c
    c.close()


@pytest.fixture
def bob(edaemon):
    c = edaemon.client(user=BOB)
    yield c
    c.close()


def curl(client, url, *extra):
    """curl in the box with its own environment (the proxy variables); returns (exit, stdout)."""
    args = " ".join(extra)
    code, out, err = sh(client, f"curl -sS --max-time 10 {args} '{url}'")
    return code, out + err


def test_the_box_environment_names_its_proxy(alice):
    code, out, _ = sh(alice, 'printf "%s %s %s" "$HTTP_PROXY" "$https_proxy" "$NO_PROXY"')
    assert code == 0
    assert out == "http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1"


def test_an_allowed_host_is_reached_by_name_through_the_proxy(alice, origin):
    code, out = curl(alice, f"http://bait.test:{origin.port}/hello?x=1")
    assert code == 0, out
    assert out == f"origin saw /hello?x=1 host=bait.test:{origin.port}"
    # Python's urllib reads the same variables: tools work through it unchanged.
    code, out, err = sh(alice, f"python3 -c \"import urllib.request as u; "
                               f"print(u.urlopen('http://bait.test:{origin.port}/py').read().decode())\"")
    assert code == 0, err
    assert out.strip() == f"origin saw /py host=bait.test:{origin.port}"


def test_a_connect_tunnel_carries_a_connection(alice, origin):
    # --proxytunnel: CONNECT, then HTTP inside the tunnel, as TLS would go.
    code, out = curl(alice, f"http://tunnel.test:{origin.port}/tunneled", "--proxytunnel")
    assert code == 0, out
    assert out.startswith("origin saw /tunneled")


def test_what_the_policy_does_not_allow_is_refused_with_a_line_an_agent_can_act_on(alice, origin):
    before = list(origin.paths)
    code, out, _ = sh(alice, f"curl -s --max-time 10 -w ' %{{http_code}}' http://elsewhere.test:{origin.port}/")
    assert out == (f"agentbox: elsewhere.test:{origin.port} is not in this sandbox's network allowlist\n 403")
    code, out, _ = sh(alice, f"curl -s --max-time 10 -w ' %{{http_code}}' http://denied.test:{origin.port}/")
    assert "is denied by this sandbox's network policy" in out and out.endswith(" 403")
    code, out = curl(alice, f"http://elsewhere.test:{origin.port}/", "--proxytunnel")
    assert code != 0 and "403" in out
    assert origin.paths == before  # nothing refused reached the origin


def test_without_the_proxy_nothing_outside_the_box_is_reachable(alice, origin):
    before = list(origin.paths)
    started = time.monotonic()
    code, out = curl(alice, f"http://127.0.0.1:{origin.port}/direct", "--noproxy '*'")
    assert code != 0, out  # the host's loopback is not the box's
    code, out, _ = sh(alice, f"env -u http_proxy -u HTTP_PROXY curl -sS --max-time 10 http://bait.test:{origin.port}/")
    assert code != 0, out  # no proxy, no name resolution, no route
    assert time.monotonic() - started < 15  # refused at once, not a timeout
    assert origin.paths == before


def test_a_response_streams_through_the_proxy_as_it_arrives(alice, origin):
    # The origin holds its second part back until the box has shown the first: a proxy that
    # waited for more of the body (or all of it) before passing it on never gets there.
    p = run(alice, f"curl -sSN --max-time 30 http://bait.test:{origin.port}/stream", wait=0, pty=False)
    wait_for_output(alice, p["id"], "first part\n", timeout=10)
    origin.release.set()
    done = wait_done(alice, p["id"])
    assert (done["exit_code"], text_of(done)) == (0, "first part\nsecond part\n"), done


def test_a_users_additions_are_theirs_only(alice, bob, origin):
    code, out = curl(alice, f"http://alice-only.test:{origin.port}/a")
    assert code == 0 and out.startswith("origin saw /a"), out
    code, out, _ = sh(bob, f"curl -s --max-time 10 -w ' %{{http_code}}' http://alice-only.test:{origin.port}/b")
    assert out.endswith(" 403") and "not in this sandbox's network allowlist" in out
    assert "/b" not in origin.paths


def test_the_network_log_shows_the_callers_own_decisions(alice, bob, origin):
    curl(alice, f"http://bait.test:{origin.port}/logged")
    sh(alice, f"curl -s --max-time 10 http://elsewhere.test:{origin.port}/")
    sh(bob, f"curl -s --max-time 10 http://bait.test:{origin.port}/bobs")
    deadline = time.monotonic() + 10
    while True:  # decisions are stored by a writer thread, in batches gathered for 20 ms
        entries = alice.get("/network/log", params={"limit": 50}).json()["entries"]
        hosts = {(e["host"], e["allowed"]) for e in entries}
        bob_hosts = {e["host"] for e in bob.get("/network/log").json()["entries"]}
        if ("bait.test", True) in hosts and ("elsewhere.test", False) in hosts and "bait.test" in bob_hosts \
                or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert ("bait.test", True) in hosts and ("elsewhere.test", False) in hosts, entries
    allowed = next(e for e in entries if e["host"] == "bait.test" and e["allowed"])
    assert allowed["port"] == origin.port and allowed["address"] == "127.0.0.1" and allowed["bytes_down"] > 0
    denied = next(e for e in entries if e["host"] == "elsewhere.test")
    assert denied["reason"].startswith("agentbox: elsewhere.test:") and denied["address"] == ""
    assert "bait.test" in bob_hosts and "elsewhere.test" not in bob_hosts  # only alice asked for that one
    assert alice.get("/network/log", params={"limit": 0}).status_code == 422


def test_the_system_prompt_states_the_rules(alice, bob):
    prompt = alice.get("/system").json()["prompt"]
    assert "bait.test" in prompt and "alice-only.test" in prompt and "HTTP_PROXY" in prompt
    assert "alice-only.test" not in bob.get("/system").json()["prompt"]


def test_sighup_reloads_the_policy_without_dropping_boxes(make_daemon, origin):
    d = make_daemon(tag="egress-reload", config_text='[policy.default]\nallow_addresses = ["127.0.0.1/32"]\n' + HOSTS)
    d.start()
    user = f"reload-{uuid.uuid4().hex[:8]}"
    with d.client(user=user) as c:
        code, out, _ = sh(c, "sleep 600 > /dev/null 2>&1 & echo $!")  # a process that must survive the reload
        keeper = out.strip()
        _, out, _ = sh(c, f"curl -s --max-time 10 -w ' %{{http_code}}' http://bait.test:{origin.port}/")
        assert out.endswith(" 403")

        with open(d.config_path, "w") as f:
            f.write('[policy.default]\nallow = ["bait.test"]\nallow_addresses = ["127.0.0.1/32"]\n' + HOSTS)
        os.kill(d.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while True:
            code, out, _ = sh(c, f"curl -s --max-time 10 http://bait.test:{origin.port}/after")
            if out.startswith("origin saw /after") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert out.startswith("origin saw /after"), out

        # A file with an error changes nothing.
        with open(d.config_path, "w") as f:
            f.write('[policy.default]\nallow = ["bait.test:0"]\n')
        os.kill(d.pid, signal.SIGHUP)
        time.sleep(0.5)  # nothing to await: the point is that nothing changes
        code, out, _ = sh(c, f"curl -s --max-time 10 http://bait.test:{origin.port}/still")
        assert out.startswith("origin saw /still"), out
        assert sh(c, f"kill -0 {keeper} && echo alive")[1].strip() == "alive"
    assert "policy stays as it was" in d.log_tail()


# Runs in the box: a client that stops half way holds the account's only proxy slot, another
# request meanwhile is turned away (429), the proxy drops the staller after its idle timeout,
# and then the slot serves again. Once for a request body that never ends, once for a tunnel
# that carries nothing.
STALLER = r'''
import json, os, socket, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
port = int(sys.argv[1])

def connection():
    return socket.create_connection((proxy.hostname, proxy.port), timeout=10)

def until_closed(s):
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data.decode(errors="replace")

def ask():
    with connection() as s:
        s.sendall(f"GET http://bait.test:{port}/next HTTP/1.1\r\nHost: bait.test:{port}\r\nConnection: close\r\n\r\n".encode())
        return until_closed(s)

def stall(first_bytes):
    staller = connection()
    staller.sendall(first_bytes)
    started = time.monotonic()
    refused = ask()
    got = until_closed(staller)
    dropped_after = time.monotonic() - started
    staller.close()
    deadline = time.monotonic() + 5
    while True:  # the dropped session gives its slot back as it ends, a moment after the close
        after = ask()
        if " 429 " not in after.split("\r\n")[0] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return {"got": got, "dropped_after": dropped_after, "refused": refused, "after": after}

body_begun = (f"POST http://bait.test:{port}/upload HTTP/1.1\r\nHost: bait.test:{port}\r\n"
              f"Content-Length: 1000\r\n\r\n" + "x" * 10)
tunnel = f"CONNECT bait.test:{port} HTTP/1.1\r\nHost: bait.test:{port}\r\n\r\n"
print(json.dumps([stall(body_begun.encode()), stall(tunnel.encode())]))
'''


def test_a_client_that_never_finishes_is_dropped_after_the_idle_timeout_and_frees_its_slot(make_daemon, origin):
    # The unit tests cover a head that never ends (header timeout); here the daemon's own
    # [egress] settings: one connection per account, 1 s idle for requests and tunnels.
    d = make_daemon(tag="egress-stall", config_text="[egress]\nconnections = 1\nidle_timeout = 1\n"
                    "tunnel_idle_timeout = 1\n" + CONFIG)
    d.start()
    with d.client(user=f"stall-{uuid.uuid4().hex[:8]}") as c:
        code, out, err = sh(c, f"python3 -c {shlex.quote(STALLER)} {origin.port}")
    assert code == 0, err
    body, tunnel = json.loads(out)
    for case in (body, tunnel):
        assert case["refused"].startswith("HTTP/1.1 429 "), case
        assert "may have 1 connection open through its proxy at once" in case["refused"]
        assert 0.9 <= case["dropped_after"] < 3, case  # the configured 1 s, not never, not at once
        assert case["after"].startswith("HTTP/1.1 200 ") and case["after"].endswith("origin saw /next host=bait.test:"
                                                                                    f"{origin.port}"), case
    assert body["got"] == ""  # the head had gone out: the proxy can only cut the connection
    deadline = time.monotonic() + 5
    while ("/upload", 10) not in origin.posts and time.monotonic() < deadline:
        time.sleep(0.05)  # the origin notes the body when its read ends, on its own thread
    assert ("/upload", 10) in origin.posts, origin.posts  # it reached the origin: 10 bytes, then the cut
    assert tunnel["got"] == "HTTP/1.1 200 Connection established\r\n\r\n"
