"""The command line around the server: `agentbox config check`, configuration precedence
(flags > AGENTBOX_* environment > file > defaults) and clear one-line errors for bad settings."""
import os
import socket
import subprocess

import httpx
import pytest

from conftest import _children, agentbox_bin, new_workdir, next_uid_base, remove_workdir, READY_LINE


@pytest.fixture
def workdir():
    d = new_workdir("cli")
    yield d
    remove_workdir(d)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def check(path):
    return subprocess.run([agentbox_bin(), "config", "check", path], capture_output=True,
                          text=True, timeout=30)


def test_config_check_accepts_a_good_file(workdir):
    path = write(os.path.join(workdir, "good.toml"),
                 'listen = "127.0.0.1:9000"\n[box]\nmemory = "1G"\n[exec]\nretention = 60\n')
    r = check(path)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_config_check_names_every_problem_with_key_and_line(workdir):
    path = write(os.path.join(workdir, "bad.toml"),
                 'listen = "127.0.0.1:9000"\nlisen = "x"\n[box]\nmemory = "lots"\n')
    r = check(path)
    assert r.returncode == 1
    assert "lisen" in r.stderr and "line 2" in r.stderr, r.stderr
    assert "memory" in r.stderr and "line 4" in r.stderr, r.stderr


def test_config_check_of_a_missing_file_fails(workdir):
    r = check(os.path.join(workdir, "nope.toml"))
    assert r.returncode != 0
    assert "nope.toml" in r.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(args, env_extra, workdir, timeout=20):
    """Starts serve, returns (process, url) once ready, or (process, None) if it exited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    env["AGENTBOX_UID_BASE"] = str(next_uid_base())  # a range of its own (conftest.py)
    env.update(env_extra)
    log = os.path.join(workdir, "serve.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(["timeout", "-k", "5", "60", agentbox_bin(), "serve", *args],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir)
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = open(log, "rb").read().decode(errors="replace")
        m = READY_LINE.search(text)
        if m:
            return proc, m.group(1), text
        if proc.poll() is not None:
            return proc, None, text
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve neither started nor failed:\n" + open(log).read())


def stop(proc):
    """SIGTERM to the daemon itself (the child of `timeout`); its exit code via timeout's."""
    for pid in _children(proc.pid) or [proc.pid]:
        os.kill(pid, 15)
    return proc.wait(20)


KEY = "0123456789abcdef" * 2  # the shortest key the daemon takes


def test_flag_beats_environment_beats_file(workdir):
    file_port, env_port, flag_port = free_port(), free_port(), free_port()
    config = write(os.path.join(workdir, "c.toml"),
                   f'listen = "127.0.0.1:{file_port}"\nstate_dir = "{workdir}/state-file"\n')
    # environment over file
    proc, url, log = serve(["--config", config],
                           {"AGENTBOX_LISTEN": f"127.0.0.1:{env_port}", "AGENTBOX_API_KEY": KEY}, workdir)
    try:
        assert url == f"http://127.0.0.1:{env_port}", log
        assert os.path.isdir(f"{workdir}/state-file"), "state_dir from the file (no env/flag for it)"
    finally:
        assert stop(proc) == 0
    # flag over environment
    proc, url, log = serve(["--config", config, "--listen", f"127.0.0.1:{flag_port}"],
                           {"AGENTBOX_LISTEN": f"127.0.0.1:{env_port}", "AGENTBOX_API_KEY": KEY}, workdir)
    try:
        assert url == f"http://127.0.0.1:{flag_port}", log
        r = httpx.get(url + "/health", timeout=10)
        assert r.json() == {"status": "ok"}
    finally:
        assert stop(proc) == 0


def test_defaults_keep_state_in_the_current_directory_and_generate_a_private_key(workdir):
    # No config, no AGENTBOX_* but the uid range: state goes to ./agentbox-state (listen is
    # overridden only so the test does not depend on port 8000 being free).
    proc, url, log = serve(["--listen", "127.0.0.1:0"], {}, workdir)
    try:
        assert url, log
        key_file = os.path.join(workdir, "agentbox-state", "api_key")
        assert key_file.split(workdir)[1] in log or "api_key" in log, "the start-up says where the key is"
        assert os.stat(key_file).st_mode & 0o777 == 0o600
        key = open(key_file).read().strip()
        ok = httpx.get(url + "/system", headers={"Authorization": f"Bearer {key}", "X-User-Id": "u"}, timeout=30)
        assert ok.status_code == 200, ok.text
        assert "Invalid API key" in httpx.get(url + "/system", headers={"X-User-Id": "u"}, timeout=10).text
    finally:
        assert stop(proc) == 0


@pytest.mark.parametrize("args,env,needle", [
    (["--listen", "localhost:80x"], {}, "listen"),
    # a bad variable is reported even when a flag overrides it: a typo should not hide
    (["--listen", "127.0.0.1:0"], {"AGENTBOX_LISTEN": "nonsense"}, "AGENTBOX_LISTEN"),
    (["--config", "/nonexistent/agentbox.toml"], {}, "/nonexistent/agentbox.toml"),
    (["--bogus"], {}, "bogus"),
    # a guessable key is no key where the network can try it: refused before anything starts
    (["--listen", "0.0.0.0:0"], {"AGENTBOX_API_KEY": "changeme"}, "API key is 8 characters long; listening on 0.0.0.0"),
    (["--listen", "[::]:0"], {"AGENTBOX_ADMIN_KEY": "x" * 31}, "at least 32"),
])
def test_bad_settings_give_one_clear_line(workdir, args, env, needle):
    proc, url, log = serve(args, {"AGENTBOX_API_KEY": KEY, **env}, workdir)
    assert url is None, "must not start with " + " ".join(args)
    assert proc.wait(10) == 2, log
    lines = [l for l in log.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], log


def readme_first_command():
    """The serve half of the README's first command, as written there (`... && build/agentbox serve`)."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    block = readme.split("```sh", 1)[1].split("```", 1)[0]
    first = block.strip().splitlines()[0].split("#", 1)[0].strip()
    assert "&&" in first, first
    return first.split("&&", 1)[1].strip()


def test_a_short_typed_key_serves_on_loopback_with_a_warning(workdir):
    """A newcomer's first try with a typed key (12 characters): on loopback it serves, says the
    key is short, and opens the API; the same key beyond loopback is refused (the test above)."""
    proc, url, log = serve(["--listen", "127.0.0.1:0"], {"AGENTBOX_API_KEY": "my-test-key1"}, workdir)
    try:
        assert url, log
        assert "warning: API key is 12 characters long: accepted on loopback only" in log, log
        r = httpx.get(url + "/system", headers={"Authorization": "Bearer my-test-key1", "X-User-Id": "u"}, timeout=30)
        assert r.status_code == 200, r.text
    finally:
        assert stop(proc) == 0


def test_the_readmes_first_command_serves_and_runs_a_command_from_a_fresh_directory(workdir):
    """A newcomer's first command exactly as the README writes it, from a fresh directory that
    holds the build (the checkout's `build/`), with no configuration: the state is the relative
    ./agentbox-state, on the default 127.0.0.1:8000. Its first command must run (a relative
    state directory once made every /execute answer 500)."""
    command = readme_first_command()
    assert command == "build/agentbox serve", command
    os.symlink(os.path.dirname(os.path.abspath(agentbox_bin())), os.path.join(workdir, "build"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    log = os.path.join(workdir, "serve.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(["timeout", "-k", "5", "120", "bash", "-c", "exec " + command],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir)
    try:
        import time
        deadline = time.monotonic() + 30
        while not READY_LINE.search(open(log).read()):
            assert proc.poll() is None, open(log).read()
            assert time.monotonic() < deadline, open(log).read()
            time.sleep(0.05)
        url = READY_LINE.search(open(log).read()).group(1)
        assert url == "http://127.0.0.1:8000", url
        key = open(os.path.join(workdir, "agentbox-state", "api_key")).read().strip()
        r = httpx.post(url + "/execute", params={"wait": 20}, json={"command": "echo first && pwd"},
                       headers={"Authorization": f"Bearer {key}", "X-User-Id": "newcomer"}, timeout=30)
        assert r.status_code == 200, r.text
        p = r.json()
        assert p["status"] == "done" and p["exit_code"] == 0, p
        assert "first" in "".join(c["data"] for c in p["output"]), p
    finally:
        assert stop(proc) == 0


def test_help_names_the_program():
    r = subprocess.run([agentbox_bin(), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert r.stdout.startswith("agentbox: ") or "Usage: agentbox " in r.stdout, r.stdout[:200]
    assert "Usage: agentbox [OPTIONS] SUBCOMMAND" in r.stdout, r.stdout[:300]


# Only the subcommand named gets its options built (main.cpp): each one's help must still show
# them, --help-all every command's (one level deep, as CLI11 prints it), and a bad option of the
# named one is still an error.
@pytest.mark.parametrize("args,needles", [
    (["--help"], ["run ", "doctor ", "serve ", "config ", "backup ", "accounts ", "cluster "]),
    (["run", "--help"], ["--allow-net", "--memory", "--ro-bind", "--no-profile", "command"]),
    (["doctor", "--help"], ["--config"]),
    (["config", "check", "--help"], ["file"]),
    (["backup", "restore", "--help"], ["--date", "--all", "--listen", "--state"]),
    (["accounts", "move", "--help"], ["--to", "--cluster", "--router-dir"]),
    (["cluster", "nginx-conf", "--help"], ["--http-only", "--pins-map", "--read-timeout"]),
    (["workspaces", "delete", "--help"], ["--profile", "context", "--listen"]),
    (["--help-all"], ["--allow-net", "--config", "check ", "restore ", "move ", "--cluster", "nginx-conf "]),
])
def test_every_subcommand_still_shows_its_options(args, needles):
    r = subprocess.run([agentbox_bin(), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    for needle in needles:
        assert needle in r.stdout, (args, needle, r.stdout)


@pytest.mark.parametrize("args,needle", [
    (["run", "--bogus", "--", "true"], "--bogus"),
    (["backup", "status", "--bogus"], "--bogus"),
    (["cluster", "owner"], "user"),  # a required argument of a subcommand
    (["workspaces", "delete", "alice"], "context"),
    (["bogus"], "subcommand"),
])
def test_a_bad_command_line_is_one_line_and_exit_2(args, needle):
    r = subprocess.run([agentbox_bin(), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("agentbox: ") and needle in r.stderr, r.stderr


def test_the_cli_links_no_crypto_library():
    """`agentbox run` starts the static `agentbox`: libcrypto in it would probe the CPU's features
    at every start (cpuid: a trap to the hypervisor on a VM). Nothing in it speaks TLS."""
    r = subprocess.run(["nm", agentbox_bin()], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    symbols = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    assert "main" in symbols  # a symbol table to look at: the check below cannot pass vacuously
    crypto = sorted(s for s in symbols if s.startswith(("OPENSSL_", "EVP_", "SSL_", "CRYPTO_")))
    assert not crypto, crypto[:10]


def test_the_cli_links_no_logging_library():
    """spdlog is agentbox-serve's log sink (daemon/spdlog_sink); the static `agentbox` logs
    through util/log's default sink and maps nothing of spdlog's."""
    r = subprocess.run(["nm", agentbox_bin()], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    symbols = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
    assert "main" in symbols  # a symbol table to look at: the check below cannot pass vacuously
    spdlog = sorted(s for s in symbols if "spdlog" in s)
    assert not spdlog, spdlog[:10]


def test_run_never_hands_the_callers_terminal_to_the_box(workdir):
    """stdin piped, stdout and stderr a terminal: the box gets pipes (its output is relayed to
    the terminal), and whatever it does to its stdout cannot reach the caller's terminal: here
    it tries to turn echo off, which used to stay off after the run."""
    import pty
    import termios
    master, slave = pty.openpty()
    try:
        assert termios.tcgetattr(slave)[3] & termios.ECHO
        home = os.path.join(workdir, "home")
        script = ("test -t 1 && echo stdout-is-a-terminal || echo stdout-is-a-pipe; "
                  "stty -echo 2>/dev/null <&1; stty -F /proc/self/fd/1 -echo 2>/dev/null; echo done")
        r = subprocess.run([agentbox_bin(), "run", "--home", home, "--", "sh", "-c", script],
                           stdout=slave, stderr=slave, input=b"", timeout=60)
        assert r.returncode == 0
        out = b""
        import select
        while select.select([master], [], [], 0.5)[0]:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            out += chunk
        assert b"stdout-is-a-pipe" in out and b"done" in out, out
        assert termios.tcgetattr(slave)[3] & termios.ECHO, "the box turned echo off on the caller's terminal"
    finally:
        os.close(master)
        os.close(slave)
