"""`agentbox run`'s init is a copy of the CLI (no second program start): whatever the caller's
environment held (a token, a key) must not be in that copy's memory, where a flaw in init could
leak it to the box, nor in the command's. The shipped build is the one checked here: the C++
red-team test of the same claim runs in the sanitizer build, whose runtime keeps its own copy of
the environment, so there init is exec'd instead (src/cli/run_command.cpp).

Control: the same scan finds the secret in the memory of `agentbox run` itself.
"""
import os
import re
import subprocess
import time
import uuid

from e2e_conftest import agentbox_bin


def memory_holds(pid, needle):
    """Whether needle is in the readable memory of pid (as root, through /proc/PID/mem)."""
    data = needle.encode()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
            start, end, perms = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
            if perms[0] != "r" or "[vsyscall]" in line or end - start > 1 << 30:
                continue
            chunk = 1 << 20
            for at in range(start, end, chunk):  # chunks overlap by the needle's length
                try:
                    mem.seek(at)
                    block = mem.read(min(end - at, chunk + len(data)))
                except OSError:
                    break  # a mapping that cannot be read (a guard page)
                if data in block:
                    return True
    return False


def children_of(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def test_the_run_inits_memory_holds_none_of_the_callers_environment(tmp_path):
    secret = f"abx-caller-secret-{uuid.uuid4().hex}"
    env = dict(os.environ, ABX_CALLER_SECRET=secret)
    env.pop("AGENTBOX_INIT", None)  # the shipped way: init in place
    run = subprocess.Popen([agentbox_bin(), "run", "--no-profile", "--home", str(tmp_path / "home"), "--",
                            "sleep", "30"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        init = command = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and command is None:
            kids = children_of(run.pid)
            init = kids[0] if kids else None
            grandkids = children_of(init) if init else []
            command = grandkids[0] if grandkids else None
            if command is None:
                time.sleep(0.05)
        assert init and command, "the box's init and its command did not appear"
        assert not memory_holds(init, secret), "the caller's environment is in the box's init"
        assert not memory_holds(command, secret), "the caller's environment reached the command"
        assert memory_holds(run.pid, secret), "control: the scan finds the secret in agentbox run itself"
    finally:
        run.kill()
        run.wait(timeout=30)
