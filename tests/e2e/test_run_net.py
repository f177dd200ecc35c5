"""`agentbox run --allow-net`: the one-shot box gets the daemon's egress proxy and rules (issue 14).

Everything stays on this machine: the origin is an HTTP server on the host's 127.0.0.1, named
inside the box by `--add-host origin.test=127.0.0.1` and let through by `--allow-address
127.0.0.1/32` (loopback is refused otherwise). A box that reached it without the proxy would have
left its network namespace: the direct probes below show it cannot, and the origin counts every
request it gets.
"""
import os
import subprocess
import time

import pytest

from conftest import agentbox_bin, new_workdir, remove_workdir

DENIED_LINE = "agentbox: {host}:{port} is not in this sandbox's network allowlist"
PROXY = "http://127.0.0.1:3128"


@pytest.fixture
def workdir():
    d = new_workdir("runnet")
    os.chmod(d, 0o755)  # the ordinary-user test's agentbox reaches its home under it
    yield d
    remove_workdir(d)


def run(workdir, flags, command, *, as_nobody=False, timeout=60, profile=None):
    """agentbox run --no-profile (or --profile PROFILE) FLAGS -- sh -c COMMAND; returns the
    CompletedProcess."""
    home = os.path.join(workdir, "home-nobody" if as_nobody else "home")
    preexec = None
    if as_nobody:
        os.makedirs(home, exist_ok=True)
        os.chown(home, 65534, 65534)

        def preexec():
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
    env = {"PATH": "/usr/bin:/bin", "HOME": workdir}
    which = ["--profile", profile] if profile else ["--no-profile"]
    return subprocess.run([agentbox_bin(), "run", *which, "--home", home, *flags, "--", "sh", "-c", command],
                          capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=preexec,
                          stdin=subprocess.DEVNULL)


def reach_origin(origin):
    return ["--allow-net", "origin.test", "--add-host", "origin.test=127.0.0.1", "--allow-address", "127.0.0.1/32"]


def test_an_allowed_name_reaches_the_origin_through_the_proxy(workdir, origin):
    before = len(origin.paths)
    # Absolute-form (plain http through the proxy) and a CONNECT tunnel (-p).
    r = run(workdir, reach_origin(origin),
            f"curl -sS --max-time 10 http://origin.test:{origin.port}/plain; echo; "
            f"curl -sS --max-time 10 -p http://origin.test:{origin.port}/tunnel")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"origin saw /plain host=origin.test:{origin.port}\n"
                        f"origin saw /tunnel host=origin.test:{origin.port}")
    assert origin.paths[before:] == ["/plain", "/tunnel"]
    assert r.stderr == ""  # nothing was denied, nothing to say


def test_the_box_environment_names_the_proxy_as_the_servers_boxes_do(workdir, origin):
    r = run(workdir, reach_origin(origin),
            'printf "%s|%s|%s|%s|%s|%s" "$HTTP_PROXY" "$HTTPS_PROXY" "$http_proxy" "$https_proxy" '
            '"$NO_PROXY" "$no_proxy"')
    assert r.returncode == 0, r.stderr
    assert r.stdout == "|".join([PROXY] * 4 + ["localhost,127.0.0.1,::1"] * 2)


def test_a_name_not_listed_gets_403_and_one_line_on_stderr(workdir, origin):
    before = len(origin.paths)
    # other.test maps to the origin too: only the allowlist stands between them. Asked twice,
    # the person is told once.
    url = f"http://other.test:{origin.port}/secret"
    r = run(workdir, reach_origin(origin) + ["--add-host", "other.test=127.0.0.1"],
            f"curl -sS --max-time 10 -w '%{{http_code}}\\n' {url}; curl -sS --max-time 10 -p {url}; echo \"tunnel $?\"")
    line = DENIED_LINE.format(host="other.test", port=origin.port)
    # The program reads why (the 403's body); curl's CONNECT says 56 with the status.
    assert r.stdout.splitlines() == [line, "403", "tunnel 56"], r.stdout
    assert "CONNECT tunnel failed, response 403" in r.stderr
    assert r.stderr.splitlines().count(line) == 1, r.stderr
    assert origin.paths[before:] == []


def test_a_listed_name_on_a_loopback_address_is_refused_unless_the_address_is_allowed(workdir, origin):
    before = len(origin.paths)
    r = run(workdir, ["--allow-net", "origin.test", "--add-host", "origin.test=127.0.0.1"],
            f"curl -sS --max-time 10 -w '%{{http_code}}\\n' http://origin.test:{origin.port}/loopback")
    why, status = r.stdout.splitlines()
    assert status == "403"
    assert why.startswith(f"agentbox: origin.test:{origin.port} resolves to 127.0.0.1, ") and "loopback" in why, why
    assert r.stderr.splitlines() == [why]
    assert origin.paths[before:] == []


def test_a_port_rule_allows_that_port_only(workdir, origin):
    before = len(origin.paths)
    r = run(workdir, ["--allow-net", f"*.test:{origin.port + 1},origin.test:{origin.port}",
                      "--add-host", "origin.test=127.0.0.1", "--add-host", "two.test=127.0.0.1",
                      "--allow-address", "127.0.0.1/32"],
            f"curl -sS --max-time 10 http://origin.test:{origin.port}/port; echo; "
            f"curl -sS --max-time 10 http://two.test:{origin.port}/other-name")
    assert r.stdout.splitlines() == [f"origin saw /port host=origin.test:{origin.port}",
                                     DENIED_LINE.format(host="two.test", port=origin.port)]
    assert origin.paths[before:] == ["/port"]


def test_the_profile_holds_the_same_policy(workdir, origin):
    profile = os.path.join(workdir, "run.toml")
    with open(profile, "w") as f:
        f.write('[policy.default]\nallow = ["origin.test"]\nallow_addresses = ["127.0.0.1/32"]\n'
                '[hosts]\n"origin.test" = "127.0.0.1"\n"other.test" = "127.0.0.1"\n')
    before = len(origin.paths)
    r = run(workdir, [], f"curl -sS --max-time 10 http://origin.test:{origin.port}/profile; echo; "
                         f"curl -sS --max-time 10 http://other.test:{origin.port}/profile-denied", profile=profile)
    line = DENIED_LINE.format(host="other.test", port=origin.port)
    assert r.stdout.splitlines() == [f"origin saw /profile host=origin.test:{origin.port}", line], r.stdout + r.stderr
    assert r.stderr.splitlines() == [line]
    assert origin.paths[before:] == ["/profile"]


def test_the_box_cannot_go_around_the_proxy(workdir, origin):
    # The attack: the origin's address directly, the proxy variables ignored. The control: the
    # same box reaches it through the proxy.
    before = len(origin.paths)
    r = run(workdir, reach_origin(origin),
            f"curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{origin.port}/direct; echo \"direct $?\"; "
            f"curl -sS --max-time 10 -o /dev/null -w '%{{http_code}}' http://origin.test:{origin.port}/via-proxy")
    assert "direct 7" in r.stdout, r.stdout  # connection refused: nothing listens there in the box
    assert r.stdout.endswith("200"), r.stdout
    assert origin.paths[before:] == ["/via-proxy"]


def test_without_allow_net_there_is_no_proxy_and_no_connection(workdir, origin):
    before = len(origin.paths)
    r = run(workdir, [],
            "env | grep -i _proxy; echo \"vars $?\"; "
            f"curl -sS --max-time 5 http://127.0.0.1:{origin.port}/direct; echo \"direct $?\"; "
            "curl -sS --max-time 5 http://127.0.0.1:3128/; echo \"proxy port $?\"")
    assert r.stdout.splitlines() == ["vars 1", "direct 7", "proxy port 7"], r.stdout + r.stderr
    assert origin.paths[before:] == []


def test_an_ordinary_user_gets_the_same_proxy(workdir, origin):
    # As an ordinary user the box's network namespace belongs to its user namespace; the
    # listener is made there (net::listen_in_netns_of).
    before = len(origin.paths)
    r = run(workdir, reach_origin(origin) + ["--add-host", "other.test=127.0.0.1"],
            f"id -u; curl -sS --max-time 10 http://origin.test:{origin.port}/nobody; echo; "
            f"curl -sS --max-time 10 http://other.test:{origin.port}/nobody-denied", as_nobody=True)
    line = DENIED_LINE.format(host="other.test", port=origin.port)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["65534", f"origin saw /nobody host=origin.test:{origin.port}", line]
    assert r.stderr.splitlines() == [line]
    assert origin.paths[before:] == ["/nobody"]


def test_the_run_ends_with_its_command_while_a_tunnel_is_open(workdir, origin):
    # A background client holds a CONNECT tunnel open past the command's end; agentbox must not
    # wait for it (the box's processes go with the box, the proxy's thread with agentbox).
    client = ("import socket, time\n"
              "s = socket.create_connection(('127.0.0.1', 3128))\n"
              f"s.sendall(b'CONNECT origin.test:{origin.port} HTTP/1.1\\r\\nHost: origin.test\\r\\n\\r\\n')\n"
              "print(s.recv(100).split(b'\\r\\n')[0].decode(), flush=True)\n"
              "time.sleep(60)\n")
    start = time.monotonic()
    r = run(workdir, reach_origin(origin),
            f'mkfifo /tmp/said; python3 -c "{client}" > /tmp/said & read line < /tmp/said; echo "$line"; exit 3',
            timeout=30)
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith("HTTP/1.1 200"), r.stdout
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("flags, message", [
    (["--allow-net", "a b.test"], "agentbox: --allow-net: \"a b.test\" is not a host rule: "),
    (["--allow-net", "a.test,,b.test"], "agentbox: --allow-net: empty item in \"a.test,,b.test\""),
    (["--allow-net", "a.test:99999"], "agentbox: --allow-net: \"a.test:99999\" is not a host rule: "),
    (["--allow-net", "a.test", "--allow-address", "10.0.0.0/33"], "agentbox: --allow-address: "),
    (["--allow-net", "a.test", "--add-host", "a.test"],
     "agentbox: --add-host: expected NAME=ADDRESS, got \"a.test\""),
    (["--allow-net", "a.test", "--add-host", "a.test=nowhere"],
     "agentbox: --add-host: \"nowhere\" is not an IP address"),
    (["--allow-net", "a.test", "--add-host", "10.1.2.3=127.0.0.1"],
     "agentbox: --add-host: \"10.1.2.3\" is not a host name"),
    (["--allow-address", "127.0.0.1/32"], "agentbox: --allow-address and --add-host need --allow-net HOST"),
])
def test_bad_flag_values_are_one_line_and_exit_2(workdir, flags, message):
    r = run(workdir, flags, "echo ran")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(message), r.stderr
