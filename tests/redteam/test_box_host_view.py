"""What a box can see of the host (issue 30, finding 10): its /proc/self/mountinfo gives, for
every bind, the bound entry's path inside its filesystem, so a bind of a host directory tells
the box where the host keeps it; /proc/diskstats and /proc/partitions list every block device,
and every account's volume is one. Inside a daemon's box none of the three names a host path
(the state directory, the Claude Code CLI's install path, the skills directory, the daemon's
working directory) or another user's volume.

Controls: the same files read on the host (the daemon's own mountinfo, the host's diskstats and
partitions) do name them, and a box that binds the CLI from its host path (as every box did)
shows that path in its mountinfo; the box still runs the CLI and reads the skills.
"""
import os
import re
import subprocess
import tempfile
import uuid

import pytest

from e2e_conftest import agentbox_bin, home_of, remove_workdir, running_daemon, sh


@pytest.fixture(scope="module")
def skills():
    d = tempfile.mkdtemp(prefix="abx-skills-", dir="/tmp")
    os.makedirs(f"{d}/demo")
    with open(f"{d}/demo/SKILL.md", "w") as f:
        f.write("---\nname: demo\ndescription: a test skill\n---\nsay hello\n")
    os.chmod(d, 0o755)
    os.chmod(f"{d}/demo", 0o755)
    yield d
    remove_workdir(d)


@pytest.fixture(scope="module")
def daemon(skills):
    with running_daemon("hostview", config_text=f'[agent]\nskills_dir = "{skills}"\n') as d:
        yield d


def claude_of(daemon):
    """The CLI's host path as the daemon found it (its start-up line), or None without one."""
    with open(daemon.log_path) as f:
        m = re.search(r"^agent: Claude Code (\S+) in every box", f.read(), re.M)
    return m.group(1) if m else None


def loop_device_of(mountinfo, mount_point):
    """The device mounted at mount_point in a mountinfo text (the last mount there)."""
    device = None
    for line in mountinfo.splitlines():
        fields = line.split()
        if fields[4] == mount_point:
            device = fields[fields.index("-") + 2]
    return device


def box_views(c):
    code, out, err = sh(c, "cat /proc/self/mountinfo; echo @@; cat /proc/diskstats; echo @@; cat /proc/partitions")
    assert code == 0, err
    return dict(zip(("mountinfo", "diskstats", "partitions"), out.split("@@\n")))


def test_a_boxs_mountinfo_diskstats_and_partitions_name_no_host_path_and_no_other_user(daemon, skills):
    with daemon.client(user=f"view-alice-{uuid.uuid4().hex[:8]}") as alice, \
            daemon.client(user=f"view-bob-{uuid.uuid4().hex[:8]}") as bob:
        bob_name = home_of(bob).rsplit("/", 1)[1]  # bob's volume is mounted now
        home_of(alice)
        state = os.path.realpath(daemon.state_dir)
        with open(f"/proc/{daemon.pid}/mountinfo") as f:
            host_mountinfo = f.read()
        bob_device = loop_device_of(host_mountinfo, f"{state}/volumes/{bob_name}")
        assert bob_device and bob_device.startswith("/dev/loop"), bob_device

        needles = {"the state directory": state, "bob's account": bob_name, "the skills directory": skills,
                   "bob's volume": bob_device}
        cli = claude_of(daemon)
        if cli:
            needles["the CLI's install path"] = os.path.dirname(cli)
            needles["the CLI's install tree"] = "/" + cli.split("/")[1] + "/"  # e.g. /work/
        cwd = os.path.realpath(f"/proc/{daemon.pid}/cwd")
        if cwd != "/":
            needles["the daemon's working directory"] = cwd

        views = box_views(alice)
        for what, needle in needles.items():
            for name, text in views.items():
                hit = re.search(re.escape(needle) + r"(?![0-9])", text)  # /dev/loop1 is not /dev/loop12
                assert not hit, f"{name} in alice's box names {what} ({needle}):\n{text}"
        assert views["diskstats"] == "" and views["partitions"] == "", views

        # The box still has what the binds are for: the CLI runs, the skills are there.
        if cli:
            code, out, err = sh(alice, "/agentbox/bin/claude --version")
            assert code == 0 and "Claude Code" in out, (out, err)
        code, out, _ = sh(alice, "cat /etc/claude-code/.claude/skills/demo/SKILL.md")
        assert code == 0 and "say hello" in out, out

        # Controls: on the host, the same files name what the box's do not.
        assert state in host_mountinfo and bob_name in host_mountinfo
        device = bob_device.rsplit("/", 1)[1]
        for path in ("/proc/diskstats", "/proc/partitions"):
            with open(path) as f:
                assert re.search(rf"\b{device}\b", f.read()), f"{device} not in the host's {path}"


def test_control_a_bind_from_a_host_path_names_it_in_the_boxs_mountinfo(daemon, tmp_path):
    """What every daemon box showed before the CLI was sealed into an image of its own: a bind's
    mountinfo root is its source's path in the host's filesystem."""
    cli = claude_of(daemon)
    if not cli:
        pytest.skip("no Claude Code CLI here (scripts/install-deps.sh)")
    r = subprocess.run([agentbox_bin(), "run", "--no-profile", "--home", str(tmp_path / "home"),
                        "--ro-bind", f"{cli}:/agentbox/bin/claude", "--", "cat", "/proc/self/mountinfo"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"{cli} /agentbox/bin/claude " in r.stdout, r.stdout
