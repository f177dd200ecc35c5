"""Egress (issue 14) against addresses other than 127.0.0.1: the daemon runs inside a world
namespace whose every route leads to a bait namespace holding 203.0.113.7 ("the internet"),
10.0.0.1 ("a private network") and 169.254.169.254 ("cloud metadata"), and recording every
packet world sends it (conftest.py, netns_world.py, bait_recorder.py). A proxy that wrongly
connects, or a box that gets out, reaches only the bait, and the test sees it.

Each attack has its control: the same request or probe where it is allowed (a policy that
allows it, or the world namespace itself, outside any box) does reach the bait, so the
recorder works and the probe is real.
"""
import json
import shlex
import subprocess
import sys
import uuid

import pytest

from e2e_conftest import sh
from .netns_world import INTERNET, METADATA, PRIVATE, WORLD_ADDRESS

# 203.0.113.7 is a documentation address, which the proxy refuses like a private one (no
# public host holds it): whoever reaches "the internet" here has it named by allow_addresses.
PLAIN = f"bait-plain-{uuid.uuid4().hex[:8]}"  # the default policy, nothing added
ALICE = f"bait-alice-{uuid.uuid4().hex[:8]}"  # the default policy and "the internet"
STAR = f"bait-star-{uuid.uuid4().hex[:8]}"    # allow = ["*"]: only the address stage stands
PRIV = f"bait-priv-{uuid.uuid4().hex[:8]}"    # allow_addresses = ["10.0.0.1/32"]

CONFIG = f"""
[policy.default]
allow = ["internet.test", "private.test", "metadata.test", "mapped-metadata.test", "{INTERNET}"]
[policy.users."{ALICE}"]
allow_addresses = ["{INTERNET}/32"]
[policy.users."{STAR}"]
allow = ["*"]
allow_addresses = ["{INTERNET}/32"]
[policy.users."{PRIV}"]
allow_addresses = ["10.0.0.1/32"]
[hosts]
"internet.test" = "{INTERNET}"
"private.test" = "{PRIVATE}"
"metadata.test" = "{METADATA}"
"mapped-metadata.test" = "::ffff:{METADATA}"
"""

PRIVATE_KIND = "a private address"
RESERVED_KIND = "a reserved (documentation, benchmarking or relay) address"
METADATA_KIND = "a link-local address (cloud metadata lives there)"
# "Fail fast": the kernel refuses a box's socket at once (measured: under 10 ms), and curl's
# failure takes about its own start-up (measured: 0.2 s on a loaded machine). A refusal by
# timeout would take curl's --max-time (3 s) or the sockets' (3 s).
FAST_SECONDS = 1.0
CURL_SECONDS = 2.0


@pytest.fixture(scope="module")
def wdaemon(world_daemon_factory, bait):
    return world_daemon_factory("bait", CONFIG)


def _client(daemon, user):
    c = daemon.client(user=user)
    yield c
    c.close()


@pytest.fixture
def alice(wdaemon):
    yield from _client(wdaemon, ALICE)


@pytest.fixture
def star(wdaemon):
    yield from _client(wdaemon, STAR)


@pytest.fixture
def priv(wdaemon):
    yield from _client(wdaemon, PRIV)


@pytest.fixture
def plain(wdaemon):
    yield from _client(wdaemon, PLAIN)


# ---- requests to the box's proxy, written byte for byte ----------------------------------

# Runs in the box: each request on a connection of its own to the proxy its environment names;
# prints everything each one got back before the connection closed.
PROXY_CLIENT = r'''
import json, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
answers = []
for request in json.loads(sys.argv[1]):
    data = b""
    with socket.create_connection((proxy.hostname, proxy.port), timeout=2) as s:
        s.sendall(request.encode())
        try:
            while chunk := s.recv(65536):
                data += chunk
        except socket.timeout:
            data += b"\n(still open after 2 s)"
    answers.append(data.decode(errors="replace"))
print(json.dumps(answers))
'''


def through_proxy(client, requests):
    code, out, err = sh(client, f"python3 -c {shlex.quote(PROXY_CLIENT)} {shlex.quote(json.dumps(requests))}")
    assert code == 0, err
    return json.loads(out)


def status_and_body(answer):
    head, _, body = answer.partition("\r\n\r\n")
    return int(head.split()[1]), body


def connect(host, port):
    return f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"


def get(host, path="/latest/meta-data/"):
    return f"GET http://{host}{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"


def assert_refused_and_reached_nothing(client, bait, cases):
    """cases: (host as the request writes it, the 403's line); each via CONNECT and absolute-form."""
    requests, lines = [], []
    for host, line in cases:
        requests += [connect(host, 80), get(host)]
        lines += [line + "\n"] * 2
    with bait.window() as seen:
        answers = through_proxy(client, requests)
    for request, answer, line in zip(requests, answers, lines):
        assert status_and_body(answer) == (403, line), (request, answer)
    assert not seen.packets, seen.summary()


# ---- 1. the proxy's address checks ---------------------------------------------------------

def test_allowed_names_that_resolve_to_private_or_metadata_addresses_are_refused(alice, bait):
    assert_refused_and_reached_nothing(alice, bait, [
        ("private.test", f"agentbox: private.test:80 resolves to {PRIVATE}, {PRIVATE_KIND} this sandbox may not reach"),
        ("metadata.test", f"agentbox: metadata.test:80 resolves to {METADATA}, {METADATA_KIND} this sandbox may not reach"),
        ("mapped-metadata.test",  # [hosts] maps it to ::ffff:169.254.169.254
         f"agentbox: mapped-metadata.test:80 resolves to {METADATA}, {METADATA_KIND} this sandbox may not reach"),
    ])


def test_ip_literals_of_private_and_metadata_addresses_are_refused_even_when_every_name_is_allowed(star, bait):
    assert_refused_and_reached_nothing(star, bait, [
        (PRIVATE, f"agentbox: {PRIVATE}:80 is {PRIVATE_KIND} this sandbox may not reach"),
        (METADATA, f"agentbox: {METADATA}:80 is {METADATA_KIND} this sandbox may not reach"),
        (f"[::ffff:{PRIVATE}]",
         f"agentbox: [::ffff:{PRIVATE}]:80 resolves to {PRIVATE}, {PRIVATE_KIND} this sandbox may not reach"),
        ("[::FFFF:a9fe:a9fe]",  # the same mapped address in hex: judged in canonical form
         f"agentbox: [::ffff:{METADATA}]:80 resolves to {METADATA}, {METADATA_KIND} this sandbox may not reach"),
        ("[64:ff9b::a9fe:a9fe]",  # NAT64 would carry it to 169.254.169.254
         f"agentbox: [64:ff9b::a9fe:a9fe]:80 is {METADATA_KIND} this sandbox may not reach"),
    ])


def test_numeric_shorthands_are_judged_by_the_address_they_resolve_to(star, bait):
    # Not IP literals to the proxy (inet_pton refuses them), so they pass the name stage under
    # "*" and go to the resolver, which reads them as numbers (inet_aton): the address stage
    # still sees 169.254.169.254 / 10.0.0.1. No DNS query leaves world either.
    cases = [(host, f"agentbox: {host}:80 resolves to {address}, {kind} this sandbox may not reach")
             for host, address, kind in [
                 ("2852039166", METADATA, METADATA_KIND),
                 ("0xa9fea9fe", METADATA, METADATA_KIND),
                 ("0251.0376.0251.0376", METADATA, METADATA_KIND),
                 ("169.254.43518", METADATA, METADATA_KIND),
                 ("10.1", PRIVATE, PRIVATE_KIND),
             ]]
    assert_refused_and_reached_nothing(star, bait, cases)


def test_documentation_addresses_are_refused_unless_allow_addresses_names_them(plain, bait):
    # The control's "internet" without the entry that opens it: by name and as a literal.
    assert_refused_and_reached_nothing(plain, bait, [
        ("internet.test", f"agentbox: internet.test:80 resolves to {INTERNET}, {RESERVED_KIND} this sandbox may not reach"),
        (INTERNET, f"agentbox: {INTERNET}:80 is {RESERVED_KIND} this sandbox may not reach"),
    ])


def test_control_allowed_places_are_reached_and_the_bait_records_them(alice, priv, star, bait):
    with bait.window() as seen:
        by_name = through_proxy(alice, [
            get("internet.test", "/by-name"),
            connect("internet.test", 80) + "GET /tunneled HTTP/1.1\r\nHost: internet.test\r\nConnection: close\r\n\r\n",
        ])
        private = through_proxy(priv, [get("private.test", "/allowed-range"), get("metadata.test")])
        literal = through_proxy(star, [get(INTERNET, "/literal")])
    assert status_and_body(by_name[0]) == (200, f"bait saw /by-name host=internet.test at {INTERNET}")
    assert by_name[1].startswith("HTTP/1.1 200 Connection established\r\n\r\n"), by_name[1]
    assert by_name[1].endswith(f"bait saw /tunneled host=internet.test at {INTERNET}"), by_name[1]
    assert status_and_body(private[0]) == (200, f"bait saw /allowed-range host=private.test at {PRIVATE}")
    # allow_addresses opens exactly its range: metadata stays out for the same user.
    assert status_and_body(private[1])[0] == 403, private[1]
    assert status_and_body(literal[0]) == (200, f"bait saw /literal host={INTERNET} at {INTERNET}")

    assert sorted(seen.requests) == sorted([(INTERNET, "/by-name", "internet.test"),
                                            (INTERNET, "/tunneled", "internet.test"),
                                            (PRIVATE, "/allowed-range", "private.test"),
                                            (INTERNET, "/literal", INTERNET)])
    syns = sorted((p.src, p.dst, p.dport) for p in seen.packets if p.syn)
    assert syns == sorted([(WORLD_ADDRESS, INTERNET, 80)] * 3 + [(WORLD_ADDRESS, PRIVATE, 80)]), seen.summary()
    assert all(p.dst != METADATA for p in seen.packets), seen.summary()


# ---- 2. from inside a box, around the proxy --------------------------------------------------

# Runs in a box (as its user) and, as the control, in world as root. Each probe is one attempt
# with numeric addresses only; prints what each got and how long it took.
PROBES = r'''
import errno, json, socket, struct, subprocess, sys, time
api_port, world_address = int(sys.argv[1]), sys.argv[2]
INTERNET, PRIVATE, METADATA = "203.0.113.7", "10.0.0.1", "169.254.169.254"
results = []

def attempt(name, fn):
    started = time.monotonic()
    try:
        ok, detail = True, fn()
    except OSError as e:
        ok, detail = False, errno.errorcode.get(e.errno, str(e))
    results.append({"name": name, "ok": ok, "detail": detail, "seconds": time.monotonic() - started})

def tcp(host, port, payload=b"probe"):
    def go():
        with socket.create_connection((host, port), timeout=3) as s:
            s.sendall(payload)
        return "connected"
    return go

def udp(host, port, payload=b"probe"):
    def go():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(payload, (host, port))
        return "sent"
    return go

def icmp_echo(host):
    def go():
        header = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + b"probe!"
        total = sum(struct.unpack("!7H", header))
        total = (total >> 16) + (total & 0xFFFF)
        checksum = ~(total + (total >> 16)) & 0xFFFF
        packet = header[:2] + struct.pack("!H", checksum) + header[4:]
        with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
            s.sendto(packet, (host, 0))
        return "sent"
    return go

def curl_without_proxy(url):
    def go():
        unset = [a for v in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
                 for a in ("-u", v)]
        r = subprocess.run(["env", *unset, "curl", "-sS", "--max-time", "3", url], capture_output=True, text=True)
        if r.returncode:
            raise OSError(f"curl exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout
    return go

DNS_QUERY = struct.pack("!6H", 0x4242, 0x0100, 1, 0, 0, 0) + b"\x05probe\x07example\x00" + struct.pack("!2H", 1, 1)
for host in (INTERNET, PRIVATE, METADATA):
    attempt(f"tcp {host}:80", tcp(host, 80))
    attempt(f"udp {host}:123", udp(host, 123))
attempt(f"dns udp {INTERNET}:53", udp(INTERNET, 53, DNS_QUERY))
attempt(f"dns tcp {INTERNET}:53", tcp(INTERNET, 53, struct.pack("!H", len(DNS_QUERY)) + DNS_QUERY))
attempt(f"raw icmp {INTERNET}", icmp_echo(INTERNET))
attempt(f"api 127.0.0.1:{api_port}", tcp("127.0.0.1", api_port, b""))
attempt(f"api {world_address}:{api_port}", tcp(world_address, api_port, b""))
attempt(f"curl without proxy {INTERNET}", curl_without_proxy(f"http://{INTERNET}/no-proxy"))
print(json.dumps(results))
'''


def probe_args(wdaemon):
    return [str(wdaemon.api_port), WORLD_ADDRESS]


def by_name(results):
    return {r["name"]: r for r in results}


def test_from_inside_a_box_every_way_around_the_proxy_fails_fast_and_reaches_nothing(alice, wdaemon, bait):
    args = " ".join(shlex.quote(a) for a in probe_args(wdaemon))
    with bait.window() as seen:
        code, out, err = sh(alice, f"python3 -c {shlex.quote(PROBES)} {args}")
    assert code == 0, err
    results = by_name(json.loads(out))
    api = wdaemon.api_port
    expected = {
        **{f"tcp {h}:80": "ENETUNREACH" for h in (INTERNET, PRIVATE, METADATA)},
        **{f"udp {h}:123": "ENETUNREACH" for h in (INTERNET, PRIVATE, METADATA)},
        f"dns udp {INTERNET}:53": "ENETUNREACH",
        f"dns tcp {INTERNET}:53": "ENETUNREACH",
        f"raw icmp {INTERNET}": "EPERM",
        f"api 127.0.0.1:{api}": "ECONNREFUSED",  # the box's own lo: nothing listens there
        f"api {WORLD_ADDRESS}:{api}": "ENETUNREACH",
    }
    assert {n: r["detail"] for n, r in results.items() if n in expected} == expected, results
    curl = results[f"curl without proxy {INTERNET}"]
    assert not curl["ok"] and curl["detail"].startswith("curl exit 7:"), curl
    slow = {n: r["seconds"] for n, r in results.items()
            if r["seconds"] >= (CURL_SECONDS if n.startswith("curl") else FAST_SECONDS)}
    assert not slow, f"refusals must come at once, these took seconds: {slow}"
    assert not seen.packets and not seen.connections and not seen.datagrams, seen.summary()


def test_control_the_same_probes_from_world_reach_the_bait(wdaemon, bait):
    with bait.window() as seen:  # root in world: the daemon's wrap is `nsenter --net=WORLD`
        r = subprocess.run(wdaemon.wrap + [sys.executable, "-c", PROBES, *probe_args(wdaemon)],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    results = by_name(json.loads(r.stdout))
    failed = {n: x["detail"] for n, x in results.items() if not x["ok"]}
    assert not failed, failed
    assert results[f"curl without proxy {INTERNET}"]["detail"] == f"bait saw /no-proxy host={INTERNET} at {INTERNET}"

    syns = {(p.dst, p.dport) for p in seen.packets if p.syn}
    assert syns >= {(INTERNET, 80), (PRIVATE, 80), (METADATA, 80), (INTERNET, 53)}, seen.summary()
    datagrams = {(p.dst, p.dport) for p in seen.packets if p.proto == "udp"}
    assert datagrams >= {(INTERNET, 123), (PRIVATE, 123), (METADATA, 123), (INTERNET, 53)}, seen.summary()
    assert any(p.proto == "icmp" and p.dst == INTERNET for p in seen.packets), seen.summary()
    assert (INTERNET, "/no-proxy", INTERNET) in seen.requests
    # The bait's listeners took them too: three datagrams on 123, the query on 53, one connection on 53.
    datagrams = seen.wait_for("datagrams", lambda d: len(d) >= 4)
    assert sorted(port for port, _ in datagrams) == [53, 123, 123, 123], datagrams
    assert any(port == 53 and b"\x05probe\x07example" in data for port, data in datagrams), datagrams
    assert seen.wait_for("connections", lambda c: c) == [(INTERNET, 53)]
