"""The daemon's uid range is its alone (docs/SECURITY.md, "uid range"): a range holding a host
account or group, crossing an /etc/subuid or /etc/subgid range, or overlapping the range of
another running daemon is refused at start, with one line on stderr naming the conflict, before
anything is created in the state directory. Controls: the same daemon on a free range serves.
"""
import contextlib
import grp
import os
import pwd
import signal
import subprocess
import time

import pytest

from conftest import UID_RANGE_IN_USE, UID_RANGE_SIZE, agentbox_bin, new_workdir, next_uid_base, remove_workdir

LOCK_DIR = "/run/agentbox/uid-ranges"


@pytest.fixture
def workdir():
    path = new_workdir("uid")
    yield path
    remove_workdir(path)


def serve_refused(workdir, *, uid_base, uid_count=UID_RANGE_SIZE):
    """Runs serve on [uid_base, uid_base + uid_count) from a config file and expects a refusal:
    returns its stderr's one line after checking the exit code, the time and the state dir."""
    config = os.path.join(workdir, "config.toml")
    with open(config, "w") as f:
        f.write(f"[accounts]\nuid_base = {uid_base}\nuid_count = {uid_count}\n")
    state = os.path.join(workdir, "refused-state")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    env["AGENTBOX_API_KEY"] = "k" * 32
    started = time.monotonic()
    r = subprocess.run([agentbox_bin(), "serve", "--listen", "127.0.0.1:0", "--state", state, "--config", config],
                       capture_output=True, text=True, env=env, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert time.monotonic() - started < 10, "a refusal is quick"
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert not os.path.exists(state), "nothing is created for a refused start"
    return lines[0]


def range_text(base, count=UID_RANGE_SIZE):
    return f"{base}-{base + count - 1}"


# ---- host accounts and groups (NSS) ----------------------------------------------------------

def test_a_range_holding_a_host_account_is_refused_naming_it(workdir):
    nobody = pwd.getpwnam("nobody")  # 65534 on Debian
    line = serve_refused(workdir, uid_base=nobody.pw_uid - 5, uid_count=10)
    assert line == (f"agentbox serve: uid range {range_text(nobody.pw_uid - 5, 10)} overlaps passwd entry "
                    f"\"nobody\" (uid {nobody.pw_uid}); pick another [accounts] uid_base"), line


def test_a_range_holding_only_a_host_group_is_refused_naming_it(workdir):
    uids = {p.pw_uid for p in pwd.getpwall()}
    gids = {g.gr_gid for g in grp.getgrall()}
    group = next(g for g in grp.getgrall()
                 if g.gr_gid > 0 and not {g.gr_gid, g.gr_gid + 1} & uids and g.gr_gid + 1 not in gids)
    line = serve_refused(workdir, uid_base=group.gr_gid, uid_count=2)
    assert line == (f"agentbox serve: uid range {range_text(group.gr_gid, 2)} overlaps group entry "
                    f"\"{group.gr_name}\" (gid {group.gr_gid}); pick another [accounts] uid_base"), line


# ---- /etc/subuid and /etc/subgid ---------------------------------------------------------------

@contextlib.contextmanager
def extra_line(path, line):
    """path with line appended, restored byte for byte afterwards (removed if it did not exist),
    also when the test fails."""
    try:
        with open(path, "rb") as f:
            before = f.read()
    except FileNotFoundError:
        before = None
    try:
        with open(path, "ab") as f:
            if before and not before.endswith(b"\n"):
                f.write(b"\n")
            f.write(line.encode() + b"\n")
        yield
    finally:
        if before is None:
            os.unlink(path)
        else:
            with open(path, "wb") as f:  # in place: owner and mode stay
                f.write(before)


@pytest.mark.parametrize("path", ["/etc/subuid", "/etc/subgid"])
def test_a_range_crossing_a_subordinate_id_range_is_refused_naming_the_entry(workdir, make_daemon, path):
    base = next_uid_base()
    entry = f"agentbox-e2e:{base + UID_RANGE_SIZE - 1}:100"  # shares only the range's last id
    with extra_line(path, entry):
        line = serve_refused(workdir, uid_base=base)
        assert line == (f"agentbox serve: uid range {range_text(base)} overlaps {path} entry \"{entry}\"; "
                        "pick another [accounts] uid_base"), line
        # control: the range one uid shorter, with the entry still there
        d = make_daemon(tag="subid", env={"AGENTBOX_UID_BASE": str(base)},
                        config_text=f"[accounts]\nuid_count = {UID_RANGE_SIZE - 1}\n").start()
        assert d.client(user="u").get("/health").status_code == 200


# ---- a second daemon ---------------------------------------------------------------------------

def test_a_second_daemon_on_an_overlapping_range_is_refused_until_the_first_is_gone(workdir, make_daemon):
    first = make_daemon(tag="first").start()
    base = int(first.extra_env["AGENTBOX_UID_BASE"])
    lock_file = os.path.join(LOCK_DIR, range_text(base))
    assert os.path.exists(lock_file)
    # Shares the first's upper half.
    line = serve_refused(workdir, uid_base=base + UID_RANGE_SIZE // 2)
    assert line == (f"agentbox serve: uid range {range_text(base + UID_RANGE_SIZE // 2)} {UID_RANGE_IN_USE} "
                    f"(pid {first.pid}, state dir {first.state_dir}, uids {range_text(base)}); pick another "
                    "[accounts] uid_base or stop that daemon"), line

    # Stopped: its file goes, and the second starts on the overlapping range.
    assert first.stop() == 0
    assert not os.path.exists(lock_file)
    second = make_daemon(tag="second", env={"AGENTBOX_UID_BASE": str(base + UID_RANGE_SIZE // 2)}).start()
    assert second.client(user="u").get("/health").status_code == 200
    line = serve_refused(workdir, uid_base=base)  # and now holds it in turn
    assert f"(pid {second.pid}, state dir {second.state_dir}, " in line, line

    # Killed with SIGKILL: its file stays but nobody holds its lock; the next start takes the range.
    second.stop(sig=signal.SIGKILL)
    assert os.path.exists(os.path.join(LOCK_DIR, range_text(base + UID_RANGE_SIZE // 2)))
    third = make_daemon(tag="third", env={"AGENTBOX_UID_BASE": str(base)}).start()
    assert third.client(user="u").get("/health").status_code == 200
    assert not os.path.exists(os.path.join(LOCK_DIR, range_text(base + UID_RANGE_SIZE // 2))), "stale file removed"

