"""A daemon killed with SIGKILL leaves its boxes' cgroups (`box-<its pid>-<serial>` under
agentbox/ in every hierarchy: memory, pids, cpu, cpuacct on cgroup v1; the v2 tree too where it
holds any) and whatever still ran in them (issue 37). Its successor finds them at start, kills what
is left in them and removes them (box/cgroup_orphans.hpp). Control: the groups exist after the
SIGKILL and before the restart, so it is the successor that removed them; a live daemon's groups
are not touched by another daemon's start.
"""
import glob
import os
import signal
import time

from conftest import EXEC_WAIT, run as execute, sh

CONFIG = '[accounts]\ndisk = "0"\n'
ROOT = "/sys/fs/cgroup"


def groups_of(pid):
    """Every box group directory of daemon pid, in any hierarchy under /sys/fs/cgroup."""
    return sorted(glob.glob(f"{ROOT}/*/agentbox/box-{pid}-*") + glob.glob(f"{ROOT}/agentbox/box-{pid}-*"))


def tasks_in(groups):
    pids = set()
    for g in groups:
        for name in ("cgroup.procs", "tasks"):
            try:
                with open(os.path.join(g, name)) as f:
                    pids |= {int(p) for p in f.read().split()}
            except OSError:
                pass
    return pids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def kill_only_the_daemon(d):
    """SIGKILL to the daemon alone: its boxes are not touched here, as after a real crash."""
    os.kill(d.pid, signal.SIGKILL)
    d.proc.wait(20)
    d.proc = None


def start_busy_boxes(d, users):
    for user in users:
        with d.client(user=user) as c:
            # A process of the box's own that outlives the request (its own session).
            code, out, err = sh(c, "setsid -f sleep 600 >/dev/null 2>&1; echo started")
            assert "started" in out, (out, err)


def test_a_sigkilled_daemons_groups_and_processes_are_gone_once_its_successor_runs(make_daemon):
    # Another daemon, alive throughout, whose groups the successor must not touch (started first:
    # a daemon's start sweeps, so one started after the SIGKILL would sweep them itself).
    other = make_daemon(tag="orphans-live", config_text=CONFIG)
    other.start()
    start_busy_boxes(other, ["live-a"])
    live_groups = groups_of(other.pid)
    assert live_groups

    d = make_daemon(tag="orphans", config_text=CONFIG)
    d.start()
    start_busy_boxes(d, ["orphan-a", "orphan-b"])
    old = d.pid
    before = groups_of(old)
    hierarchies = {g.split("/agentbox/")[0] for g in before}
    assert len(before) >= 2 * 3 and len(hierarchies) >= 3, before  # memory, pids, cpu at least
    tasks = tasks_in(before)
    assert tasks, before

    kill_only_the_daemon(d)
    left = groups_of(old)
    assert left == before, "the control: a SIGKILLed daemon leaves its groups behind"

    d.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (groups_of(old) or any(alive(p) for p in tasks)):
        time.sleep(0.1)
    assert groups_of(old) == [], groups_of(old)
    assert not [p for p in tasks if alive(p)], "the old boxes' processes are killed"
    assert "groups left by a daemon that is gone" in d.log_tail(20000)
    assert groups_of(other.pid) == live_groups, "a live daemon's groups stay"
    with other.client(user="live-a") as c:
        assert execute(c, "echo still here", wait=EXEC_WAIT)["status"] == "done"
    # The successor serves the same users with new groups of its own.
    with d.client(user="orphan-a") as c:
        code, out, _ = sh(c, "echo back")
        assert out.strip() == "back"
    assert groups_of(d.pid)
