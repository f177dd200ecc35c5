"""Isolation between accounts: bob must never get alice's bytes or touch her processes, through
his own commands or any file route, including through symlinks he plants and swaps under a race."""
import io
import os
import stat
import subprocess
import threading
import time
import urllib.parse
import uuid
import zipfile

import httpx
import pytest

from conftest import agentbox_bin, home_of, run, sh, text_of, wait_for_output

SECRET = "ALICE-SECRET-" + uuid.uuid4().hex
NEEDLE = SECRET.encode()


class World:
    pass


@pytest.fixture(scope="module")
def world(daemon):
    w = World()
    w.daemon = daemon
    w.alice = daemon.client(user=f"alice-{uuid.uuid4().hex[:8]}")
    w.bob = daemon.client(user=f"bob-{uuid.uuid4().hex[:8]}", session="bob-chat")
    try:
        w.alice_home, w.bob_home = home_of(w.alice), home_of(w.bob)
        w.an, w.bn = w.alice_home.split("/")[-1], w.bob_home.split("/")[-1]
        w.alice_host = os.path.join(daemon.state_dir, "volumes", w.an, "home")
        code, _, err = sh(w.alice, f"printf %s {SECRET} > ~/secret && chmod 600 ~/secret && "
                                   f"mkdir -p ~/private && printf %s {SECRET} > ~/private/secret2")
        assert code == 0, err
        links = {
            "link_abs": f"/home/{w.an}/secret",
            "link_host": f"{w.alice_host}/secret",
            "link_rel": f"../{w.an}/secret",
            "link_proc": f"/proc/self/root{w.alice_host}/secret",
            "link_proc1": f"/proc/1/root/home/{w.an}/secret",
            "dir_abs": f"/home/{w.an}",
            "dir_host": w.alice_host,
            "dir_rel": f"../{w.an}",
            "dir_up": "..",
            "dir_root": "/",
        }
        w.links = links
        script = " && ".join(f"ln -s '{t}' ~/{n}" for n, t in links.items())
        code, _, err = sh(w.bob, f"printf harmless > ~/harmless.txt && mkdir -p ~/hdir && "
                                 f"printf 'harmless too' > ~/hdir/secret && {script}")
        assert code == 0, err
        yield w
    finally:
        w.alice.close()
        w.bob.close()


def alice_files(w):
    return sh(w.alice, "cd ~ && find . | sort && cat secret")[1]


def no_secret(resp):
    """True when nothing of alice's secret is in the answer (zip members decompressed)."""
    body = resp.content
    if NEEDLE in body or SECRET[:20].encode() in body:
        return False
    if body[:2] == b"PK":
        z = zipfile.ZipFile(io.BytesIO(body))
        return all(NEEDLE not in z.read(n) for n in z.namelist())
    return True


def attacker_paths(w):
    """Paths bob might use to name alice's secret; all must be refused."""
    st = w.daemon.state_dir
    an, bn = w.an, w.bn
    return [
        f"/home/{an}/secret", f"../{an}/secret", f"~/../{an}/secret", f"/home/{bn}/../{an}/secret",
        f"{w.alice_host}/secret", f"/proc/self/root/home/{an}/secret",
        f"/proc/self/root{w.alice_host}/secret", f"/proc/1/root{w.alice_host}/secret",
        f"/proc/self/cwd/../{an}/secret", f"{st}/volumes/{an}/home/private/secret2",
        f"hdir/../../{an}/secret", f"./../{an}/./secret", f"..//{an}//secret",
        f"/home/{an}/private/../secret",
    ]


def link_paths(w):
    return ["link_abs", "link_host", "link_rel", "link_proc", "link_proc1",
            "dir_abs/secret", "dir_host/secret", "dir_rel/secret", "dir_up/" + w.an + "/secret",
            "dir_root/home/" + w.an + "/secret", "dir_root" + w.alice_host + "/secret",
            "dir_rel/private/secret2"]


def test_alice_reads_her_own_secret(world):
    # The control: the paths the attacks use do reach the secret for its owner.
    w = world
    assert w.alice.get("/files/read", params={"path": "secret"}).json()["content"] == SECRET
    assert w.alice.get("/files/read", params={"path": f"/home/{w.an}/private/../secret"}).json()["content"] == SECRET
    assert w.alice.get("/files/view", params={"path": "~/secret"}).content == NEEDLE
    assert sh(w.alice, "cat ~/secret")[1] == SECRET


# ---- through commands in bob's box ----------------------------------------------------------

def test_bob_cannot_reach_alice_from_his_box(world):
    w = world
    code, out, err = sh(w.bob, "ls -a /home")
    assert code == 0 and out.split() == [".", "..", w.bn]
    for cmd in [f"cat /home/{w.an}/secret", f"cat {w.alice_host}/secret",
                "cat ~/link_abs ~/link_host ~/link_rel ~/link_proc ~/link_proc1",
                f"cat ~/dir_rel/secret ~/dir_up/{w.an}/secret ~/dir_root/home/{w.an}/secret",
                f"cat /proc/1/root/home/{w.an}/secret", f"ls -la /home/{w.an} {w.alice_host}",
                f"ls -R {w.daemon.state_dir}", "grep -r ALICE-SECRET /home /tmp /proc/1/root/home"]:
        code, out, err = sh(w.bob, cmd)
        assert SECRET not in out + err, cmd
        assert code != 0, cmd


def test_bob_cannot_see_alices_processes(world):
    w = world
    p = run(w.alice, "echo ready; sleep 271", wait=0, pty=False)
    wait_for_output(w.alice, p["id"], "ready")
    try:
        listing = 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done'
        assert "sleep 271" not in sh(w.bob, listing)[1]
        assert "sleep 271" in sh(w.alice, listing)[1]

        bob_ids = [x["id"] for x in w.bob.get("/execute").json()]
        assert p["id"] not in bob_ids
        assert all(x["command"] != "echo ready; sleep 271" for x in w.bob.get("/execute").json())
        assert w.bob.get(f"/execute/{p['id']}/status").status_code == 404
        assert w.bob.get(f"/execute/{p['id']}/status", params={"wait": 1, "offset": 0}).status_code == 404
        assert w.bob.post(f"/execute/{p['id']}/input", json={"input": "\\x03"}).status_code == 404
        assert w.bob.delete(f"/execute/{p['id']}", params={"force": "true"}).status_code == 404
        assert w.bob.delete(f"/execute/{p['id']}").status_code == 404
        with w.bob.stream("GET", f"/execute/{p['id']}/stream") as r:
            assert r.status_code == 404
            assert NEEDLE not in r.read()

        q = w.alice.get(f"/execute/{p['id']}/status").json()
        assert q["status"] == "running" and text_of(q) == "ready\n"
    finally:
        assert w.alice.delete(f"/execute/{p['id']}").status_code == 200
    assert w.alice.get(f"/execute/{p['id']}/status").json()["status"] == "killed"


# ---- ports: another box's servers, the daemon ------------------------------------------------

ALICE_PORT = 8131
# Prints "connected" or the name of the error (one line, no double quotes: it goes in sh -c "...").
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3); print('connected')\n"
           "except OSError as e:\n"
           "    print(type(e).__name__)")


def connect_from(client, port):
    code, out, err = sh(client, f'/usr/bin/python3 -c "{CONNECT}" {port}')
    assert code == 0, err
    return out.strip()


@pytest.fixture(scope="module")
def alice_serves(world):
    """An http.server in alice's box on ALICE_PORT, serving ~/private (her secret2)."""
    w = world
    p = run(w.alice, f"/usr/bin/python3 -m http.server {ALICE_PORT} --bind 127.0.0.1 --directory ~/private",
            wait=0, pty=False)
    deadline = time.monotonic() + 20
    while ALICE_PORT not in [x["port"] for x in w.alice.get("/ports").json()["ports"]]:
        assert time.monotonic() < deadline, "alice's server did not come up"
        time.sleep(0.1)
    yield ALICE_PORT
    w.alice.delete(f"/execute/{p['id']}", params={"force": "true"})


def test_a_box_reaches_neither_the_daemon_nor_another_box(world, alice_serves):
    w = world
    assert connect_from(w.alice, alice_serves) == "connected"  # the control: her own loopback
    assert connect_from(w.bob, alice_serves) == "ConnectionRefusedError"
    # The daemon's API port: this test talks to it on 127.0.0.1; no box's 127.0.0.1 is that one.
    assert w.bob.get("/health").status_code == 200
    assert connect_from(w.bob, w.daemon.port) == "ConnectionRefusedError"
    assert connect_from(w.alice, w.daemon.port) == "ConnectionRefusedError"


def test_bobs_proxy_reaches_his_own_box_not_alices(world, alice_serves):
    w = world
    r = w.alice.get(f"/proxy/{alice_serves}/secret2")  # the control
    assert r.status_code == 200 and r.content == NEEDLE
    assert alice_serves in [x["port"] for x in w.alice.get("/ports").json()["ports"]]

    assert sh(w.bob, "true")[0] == 0  # bob's box runs: the proxy tries his namespace, not "no box"
    for path in (f"/proxy/{alice_serves}/secret2", f"/proxy/{alice_serves}/",
                 f"/proxy/{alice_serves}/secret2?user_id={w.bob.headers['X-User-Id']}"):
        r = w.bob.get(path)
        assert r.status_code == 502, (path, r.text)
        assert "refused" in r.json()["detail"] and NEEDLE not in r.content
    assert alice_serves not in [x["port"] for x in w.bob.get("/ports").json()["ports"]]
    # Naming alice in the query while the header names bob is refused, not resolved to either.
    r = w.bob.get(f"/proxy/{alice_serves}/secret2", params={"user_id": w.alice.headers["X-User-Id"]})
    assert r.status_code == 400 and NEEDLE not in r.content, r.text


def test_the_boxs_init_gives_nothing_away(world):
    """The daemon's inits are cloned by its zygote: inside a box, init is PID 1 named
    agentbox-init, its environment, descriptors and memory are closed to the box's user (as
    with an exec'd init), and no process of the host (the daemon, the zygote) is in view."""
    w = world
    code, out, err = sh(w.bob, "tr -d '\\0' < /proc/1/cmdline; echo; ps -eo pid=,comm=")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "agentbox-init"
    assert [x.split()[1] for x in lines[1:]][:1] == ["agentbox-init"]
    assert not any("agentbox-serve" in x or "zygote" in x for x in lines), out
    for probe in ["cat /proc/1/environ", "ls /proc/1/fd", "head -c1 /proc/1/mem", "cat /proc/1/maps"]:
        code, out, err = sh(w.bob, probe)
        assert code != 0 and "Permission denied" in err, (probe, out, err)
        assert "PATH=" not in out and "socket:" not in out, probe
    # Control: the same reads of its own processes work for bob.
    code, out, err = sh(w.bob, "cat /proc/self/environ | tr '\\0' '\\n' | grep -c . ; ls /proc/self/fd | wc -l")
    assert code == 0 and all(int(n) > 0 for n in out.split()), (out, err)


def host_process(cmdline, timeout=15):
    """Host pid of the process whose command line is exactly `cmdline` (argv joined by spaces)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if f.read().replace(b"\0", b" ").strip() == cmdline.encode():
                        return int(d)
            except OSError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"no process {cmdline!r}")


def parent_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("PPid:")).split()[1])


def descriptors_of(pid):
    """fd -> what it is; a character device by its numbers (its path depends on the mount
    namespace it was opened in: /dev/null opened before the box's root was built reads "/null")."""
    fd_dir = f"/proc/{pid}/fd"
    out = {}
    for n in os.listdir(fd_dir):
        path = os.path.join(fd_dir, n)
        st = os.stat(path)
        out[int(n)] = f"chr {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if stat.S_ISCHR(st.st_mode) \
            else os.readlink(path)
    return out


def assert_init_holds_nothing_of_its_starter(fds):
    assert [fds.get(n) for n in (0, 1, 2)] == ["chr 1:3"] * 3, fds  # /dev/null
    # Beyond stdio only its own sockets and kernel objects (epoll, signalfd, pidfds): no file.
    assert all(t.startswith(("socket:", "anon_inode:")) for n, t in fds.items() if n > 2), fds


def test_a_boxs_init_holds_dev_null_and_its_own_sockets_only(world, tmp_path):
    """Seen from the host (a box's user may not list /proc/1/fd): no descriptor of the daemon's,
    its log least of all, in a box's init; nor the caller's terminal under `agentbox run`."""
    w = world
    seconds = 700000 + uuid.uuid4().int % 100000  # a command line no other process has
    p = run(w.bob, f"sleep {seconds}", wait=0, pty=False)
    try:
        sleeper = host_process(p["command"])
        init = parent_of(sleeper)
        with open(f"/proc/{init}/comm") as f:
            assert f.read().strip() == "agentbox-init"
        assert_init_holds_nothing_of_its_starter(descriptors_of(init))
        # Control: the daemon itself holds its log as stdout (what init used to inherit).
        daemon_fds = descriptors_of(w.daemon.pid)
        assert daemon_fds[1].endswith(".log"), daemon_fds[1]
    finally:
        w.bob.delete(f"/execute/{p['id']}", params={"force": "true"})

    # `agentbox run` execs init itself (no zygote), from a caller whose stdout is a file.
    seconds += 1
    log = tmp_path / "run.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen([agentbox_bin(), "run", "--", "sleep", str(seconds)], stdout=out, stderr=out,
                                stdin=subprocess.DEVNULL)
    try:
        init = parent_of(host_process(f"sleep {seconds}"))
        assert_init_holds_nothing_of_its_starter(descriptors_of(init))
    finally:
        proc.kill()
        proc.wait(10)


def test_no_proc_or_etc_file_in_a_box_names_the_state_directory(world):
    """The daemon's state directory (every account's volume, the database, the keys) is a host
    path no box has any business knowing: not in its mountinfo, its init's command line, any
    /proc or /etc file. The red-team probe searches them all from inside bob's box."""
    w = world
    probe = os.path.join(os.path.dirname(agentbox_bin()), "tests", "abx-probe")
    with open(probe, "rb") as f:
        r = w.bob.post("/files/upload", params={"directory": "."}, files={"file": (".abx-probe", f.read())})
    assert r.status_code == 200, r.text
    needle = w.daemon.state_dir.encode().hex()
    code, out, err = sh(w.bob, f"chmod +x ~/.abx-probe && ~/.abx-probe find-text {needle} /etc /proc")
    assert code == 1 and out.startswith("BLOCKED: not found"), (code, out, err)
    # Control: the same search finds it in the daemon's own /proc directory on the host.
    control = subprocess.run([probe, "find-text", needle, f"/proc/{w.daemon.pid}"], capture_output=True, text=True)
    assert control.returncode == 0 and control.stdout.startswith("ALLOWED: found the text"), control


# ---- through the file routes ----------------------------------------------------------------

def read_routes(w, path):
    q = urllib.parse.quote(path, safe="/~")
    routes = [("GET", f"/files/read?path={q}", {}), ("GET", f"/files/view?path={q}", {}),
              ("GET", f"/files/grep?query=ALICE&path={q}", {}),
              ("POST", "/files/archive", {"json": {"paths": [path]}})]
    if not path.startswith("~"):  # serve takes an absolute box path (httpx resolves "..")
        serve = path if path.startswith("/") else f"{w.bob_home}/{path}"
        routes.append(("GET", f"/files/serve{urllib.parse.quote(serve, safe='/~')}", {}))
    return routes


def test_percent_encoded_dots_are_refused(world):
    w = world
    # Query values are decoded once: these are "../NAME/secret" and must be refused as such.
    for url in [f"/files/read?path=%2e%2e/{w.an}/secret", f"/files/read?path=%2E%2E%2F{w.an}%2Fsecret",
                f"/files/view?path=~/%2e%2e/{w.an}/secret"]:
        r = w.bob.get(url)
        assert no_secret(r), url
        assert r.status_code == 403, (url, r.status_code)
    # In the URL path, encoded dots and slashes either climb (403) or name nothing (404).
    assert w.bob.get(f"/files/serve/home/{w.bn}/harmless.txt").status_code == 200
    for url in [f"/files/serve/home/{w.bn}/%2e%2e/{w.an}/secret",
                f"/files/serve/home/{w.bn}/..%2f{w.an}%2fsecret",
                f"/files/serve/home%2f{w.an}%2fsecret"]:
        r = w.bob.get(url)
        assert no_secret(r), url
        assert r.status_code in (400, 403, 404), (url, r.status_code)


def test_literal_paths_outside_home_are_refused(world):
    w = world
    for path in attacker_paths(w):
        for method, url, kw in read_routes(w, path):
            r = w.bob.request(method, url, **kw)
            assert no_secret(r), (method, url)
            assert r.status_code == 403, (method, url, r.status_code, r.text[:200])
        r = w.bob.get("/files/display", params={"path": path})
        assert r.status_code == 403, (path, r.text)


def test_symlinks_out_of_home_are_refused(world):
    w = world
    for path in link_paths(w):
        for method, url, kw in read_routes(w, path):
            r = w.bob.request(method, url, **kw)
            assert no_secret(r), (method, url)
            # An archive may keep a link as a link entry; everything else refuses.
            allowed = (200, 403, 404) if url == "/files/archive" else (403, 404)
            assert r.status_code in allowed, (method, url, r.status_code, r.text[:200])
        r = w.bob.get("/files/display", params={"path": path})
        assert no_secret(r)
        assert r.status_code == 403 or r.json()["exists"] is False, (path, r.text)


def test_listing_and_searching_do_not_follow_links_out(world):
    w = world
    # The links themselves are listed as entries of bob's home.
    r = w.bob.get("/files/list", params={"directory": "."})
    assert r.status_code == 200
    names = {e["name"] for e in r.json()["entries"]}
    assert set(w.links) <= names
    for d in ("dir_abs", "dir_host", "dir_rel", "dir_up", "dir_root", "..", "/home",
              f"/home/{w.an}", w.alice_host, f"/proc/self/root/home/{w.an}", "/"):
        r = w.bob.get("/files/list", params={"directory": d})
        assert r.status_code in (403, 404), (d, r.text[:200])
        assert '"secret"' not in r.text and '"private"' not in r.text, d
    # grep/glob over bob's home skip the links out; rooted elsewhere they are refused.
    r = w.bob.get("/files/grep", params={"query": "ALICE", "path": "."})
    assert r.status_code == 200 and r.json()["matches"] == [] and no_secret(r)
    r = w.bob.get("/files/grep", params={"query": "harmless", "path": "."})
    assert {m["file"].split("/")[-1] for m in r.json()["matches"]} == {"harmless.txt", "secret"}
    assert all(m["file"].startswith(f"{w.bob_home}/hdir") or m["file"].endswith("harmless.txt")
               for m in r.json()["matches"])
    r = w.bob.get("/files/glob", params={"pattern": "**/secret*"})
    assert r.status_code == 200
    # Paths relative to the searched directory (Open Terminal) or absolute in the box.
    assert [m["path"].removeprefix(w.bob_home + "/") for m in r.json()["matches"]] == ["hdir/secret"]
    for pattern, root in [("*/secret", ".."), ("**/secret", "/home"), ("secret", f"/home/{w.an}"),
                          ("../*/secret", "."), (f"../{w.an}/*", "."), ("/home/*/secret", "."),
                          ("**/../../*/secret", ".")]:
        r = w.bob.get("/files/glob", params={"pattern": pattern, "path": root})
        assert r.status_code in (200, 400, 403, 422), (pattern, root)
        if r.status_code == 200:
            for m in r.json()["matches"]:
                rel = m["path"].removeprefix(w.bob_home + "/")
                assert not rel.startswith("/") and ".." not in rel.split("/"), r.text
                assert w.an not in rel and "dir_" not in rel, r.text
    for root in ("..", "/home", f"/home/{w.an}", w.alice_host, "dir_rel", "dir_root"):
        r = w.bob.get("/files/grep", params={"query": "ALICE", "path": root})
        assert r.status_code in (403, 404) and no_secret(r), root


def test_archive_of_the_home_with_links_leaks_nothing(world):
    w = world
    r = w.bob.post("/files/archive", json={"paths": ["."]})
    assert r.status_code == 200 and no_secret(r)
    r = w.bob.post("/files/archive", json={"paths": list(w.links)})
    assert r.status_code in (200, 403, 404) and no_secret(r)


def test_writes_through_links_and_outside_paths_are_refused(world):
    w = world
    before = alice_files(w)
    attempts = []
    for path in link_paths(w) + attacker_paths(w) + ["dir_rel/new.txt", "dir_host/new.txt"]:
        attempts += [("POST", "/files/write", {"json": {"path": path, "content": "pwned"}}),
                     ("POST", "/files/replace", {"json": {"path": path, "replacements": [
                         {"target": "ALICE", "replacement": "pwned"}]}})]
        if "/" in path:  # a bare link name is bob's own entry: he may move or delete it
            attempts += [("DELETE", "/files/delete", {"params": {"path": path}}),
                         ("POST", "/files/mkdir", {"json": {"path": path + ".d"}}),
                         ("POST", "/files/move", {"json": {"source": path, "destination": "stolen"}}),
                         ("POST", "/files/move", {"json": {"source": "harmless.txt", "destination": path + ".x"}})]
    for d in ("dir_rel", "dir_abs", "dir_host", f"../{w.an}", f"/home/{w.an}"):
        attempts += [("POST", "/files/upload", {"params": {"directory": d}, "files": {"file": ("up.txt", b"pwned")}}),
                     ("POST", "/files/cwd", {"json": {"path": d}}),
                     ("POST", "/execute", {"json": {"command": "cat secret", "cwd": d}})]
    for method, url, kw in attempts:
        r = w.bob.request(method, url, **kw)
        assert r.status_code in (400, 403, 404, 409), (method, url, kw, r.status_code, r.text[:200])
        assert no_secret(r)
    assert alice_files(w) == before
    assert SECRET in before
    assert w.bob.get("/files/cwd").json()["cwd"] == w.bob_home
    assert w.bob.get("/files/read", params={"path": "harmless.txt"}).json()["content"] == "harmless"
    assert set(sh(w.bob, "ls ~")[1].split()) == {"harmless.txt", "hdir", *w.links}


def test_links_out_can_be_moved_and_deleted_as_entries(world):
    w = world
    r = w.bob.post("/files/move", json={"source": "link_rel", "destination": "moved_link"})
    assert r.status_code == 200, r.text
    assert w.bob.get("/files/read", params={"path": "moved_link"}).status_code in (403, 404)
    r = w.bob.delete("/files/delete", params={"path": "moved_link"})
    assert r.status_code == 200, r.text
    r = w.bob.delete("/files/delete", params={"path": "dir_rel"})
    assert r.status_code == 200, r.text
    assert SECRET in alice_files(w)  # the targets are untouched
    assert "./private/secret2" in alice_files(w)
    sh(w.bob, f"ln -s '../{w.an}/secret' ~/link_rel && ln -s '../{w.an}' ~/dir_rel")


# ---- the race -------------------------------------------------------------------------------

ATTACKER = r"""
import os, sys
os.chdir(os.environ["HOME"])
evil, evil_dirs = sys.argv[1].split("|"), sys.argv[2].split("|")
print("ready", flush=True)
i = 0
while True:
    f = "harmless.txt" if i % 2 == 0 else evil[(i // 2) % len(evil)]
    d = "hdir" if i % 2 == 0 else evil_dirs[(i // 2) % len(evil_dirs)]
    for name, target in (("race", f), ("raced", d)):
        try:
            os.unlink(name + ".tmp")
        except FileNotFoundError:
            pass
        os.symlink(target, name + ".tmp")
        os.rename(name + ".tmp", name)
    i += 1
"""


def start_attacker(w, evil, evil_dirs, timeout):
    """Bob's swapping loop in his box: `race` and `raced` alternate between harmless targets and
    the evil ones; returns the process (bounded by `timeout` seconds)."""
    assert sh(w.bob, "test -x /usr/bin/python3")[0] == 0, "the race needs python3 in the box"
    sh(w.bob, "cat > ~/attacker.py", stdin=ATTACKER)
    p = run(w.bob, f"exec /usr/bin/python3 ~/attacker.py '{'|'.join(evil)}' '{'|'.join(evil_dirs)}'",
            wait=0, pty=False, timeout=timeout)
    wait_for_output(w.bob, p["id"], "ready")
    return p


def test_symlink_swap_race_never_leaks(world):
    w = world
    p = start_attacker(w, [f"../{w.an}/secret", f"/home/{w.an}/secret", f"{w.alice_host}/secret",
                           f"/proc/self/root{w.alice_host}/secret"],
                       [f"../{w.an}", f"/home/{w.an}", w.alice_host, "/"], timeout=150)

    total, threads = 10_000, 8
    serve_race = urllib.parse.quote(f"{w.bob_home}/race")
    routes = ["/files/read?path=race", "/files/view?path=race", f"/files/serve{serve_race}",
              "/files/read?path=raced/secret", "/files/view?path=raced/secret",
              f"/files/read?path=raced{urllib.parse.quote(w.alice_host)}/secret",
              "/files/read?path=raced/home/" + w.an + "/secret"]
    lock = threading.Lock()
    results = {"leaks": [], "harmless": 0, "refused": 0, "other": {}}
    counter = iter(range(total))

    def worker():
        with w.daemon.client(user=w.bob.headers["X-User-Id"], timeout=httpx.Timeout(30.0)) as c:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                r = c.get(routes[i % len(routes)])
                with lock:
                    if not no_secret(r):
                        results["leaks"].append((routes[i % len(routes)], r.status_code, r.text[:100]))
                    elif r.status_code == 200 and b"harmless" in r.content:
                        results["harmless"] += 1
                    elif r.status_code in (403, 404):
                        results["refused"] += 1
                    else:
                        results["other"][r.status_code] = results["other"].get(r.status_code, 0) + 1

    started = time.monotonic()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=150)
    took = time.monotonic() - started
    still = [t for t in pool if t.is_alive()]
    q = w.bob.get(f"/execute/{p['id']}/status").json()
    w.bob.delete(f"/execute/{p['id']}", params={"force": "true"})
    assert not still, "reader threads did not finish in time"
    assert q["status"] == "running", f"the attacker stopped early: {q}"
    print(f"race: {total} reads in {took:.1f} s: {results['harmless']} harmless, "
          f"{results['refused']} refused, other {results['other']}")
    assert results["leaks"] == []
    # The attack was real: both states of the links were observed.
    assert results["harmless"] > 100 and results["refused"] > 100
    assert results["harmless"] + results["refused"] + sum(results["other"].values()) == total
    assert set(results["other"]) <= {400}, results["other"]


def test_symlink_swap_race_on_writes_never_touches_alice(world):
    w = world
    before = alice_files(w)
    p = start_attacker(w, [f"../{w.an}/secret", f"/home/{w.an}/secret", f"{w.alice_host}/secret"],
                       [f"../{w.an}", f"/home/{w.an}", w.alice_host], timeout=120)
    codes = {}
    lock = threading.Lock()
    counter = iter(range(1500))

    def worker():
        with w.daemon.client(user=w.bob.headers["X-User-Id"], timeout=httpx.Timeout(30.0)) as c:
            while (i := next(counter, None)) is not None:
                kind = i % 3
                if kind == 0:
                    r = c.post("/files/write", json={"path": "raced/secret", "content": "pwned"})
                elif kind == 1:
                    r = c.post("/files/replace", json={"path": "raced/secret", "replacements": [
                        {"target": "ALICE", "replacement": "pwned"}]})
                else:
                    r = c.post("/files/mkdir", json={"path": "raced/pwned-dir"})
                with lock:
                    codes[r.status_code] = codes.get(r.status_code, 0) + 1

    pool = [threading.Thread(target=worker) for _ in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=100)
    w.bob.delete(f"/execute/{p['id']}", params={"force": "true"})
    assert not any(t.is_alive() for t in pool)
    print(f"write race: {codes}")
    assert set(codes) <= {200, 400, 403, 404, 409}, codes
    assert codes.get(200, 0) > 0  # some landed in bob's own hdir: the race was live
    assert alice_files(w) == before


def test_same_session_id_does_not_share_cwd(world):
    w = world
    sh(w.alice, "mkdir -p ~/work")
    with w.daemon.client(user=w.alice.headers["X-User-Id"], session="shared-chat") as a, \
            w.daemon.client(user=w.bob.headers["X-User-Id"], session="shared-chat") as b:
        assert a.post("/files/cwd", json={"path": "work"}).status_code == 200
        assert b.get("/files/cwd").json()["cwd"] == w.bob_home
        assert sh(b, "pwd")[1] == w.bob_home + "\n"
