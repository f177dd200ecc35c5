"""deploy/systemd/agentbox.service: systemd accepts it, it bounds the daemon to exactly the
capabilities doctor checks, it leaves out the options that would break boxes, and its
hardening does not break them. systemd is not PID 1 here, so the last part runs the daemon
under the same restrictions made by hand: a mount namespace with /usr, /boot, /etc read-only
(ProtectSystem=full), /home and /root read-only (ProtectHome=read-only) and a private /tmp
(PrivateTmp), then setpriv with no_new_privs (NoNewPrivileges) and the bounding set
(CapabilityBoundingSet). Delegate=, KillMode= and the limits need a running systemd: untested."""
import os
import re
import shutil
import subprocess

import pytest

from .conftest import REPO, agentbox_bin, e2e, setpriv_caps

UNIT = REPO / "deploy" / "systemd" / "agentbox.service"


def directives():
    out = {}
    for line in UNIT.read_text().splitlines():
        if re.match(r"^[A-Za-z]+=", line):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (package systemd)")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    # The unit names /opt/agentbox; verify checks that ExecStart's binary exists, so the copy
    # verified names this build's instead.
    unit = tmp_path / "agentbox.service"
    text = UNIT.read_text()
    assert "ExecStart=/opt/agentbox/build/agentbox serve" in text
    unit.write_text(text.replace("/opt/agentbox/build/agentbox", agentbox_bin()))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "agentbox.service" not in r.stderr, r.stderr  # no warning about the unit itself


def test_the_unit_bounds_the_daemon_to_what_doctor_checks(doctor_caps):
    d = directives()
    assert d["CapabilityBoundingSet"][0].split() == ["CAP_" + c for c in doctor_caps]
    assert d["Delegate"] == ["yes"] and d["KillMode"] == ["mixed"]
    assert d["StateDirectory"] == ["agentbox"]
    assert "/var/lib/agentbox" in d["ExecStart"][0]
    assert int(d["LimitNOFILE"][0]) >= 65536
    assert d["NoNewPrivileges"] == ["yes"]


def test_the_unit_leaves_out_what_breaks_boxes():
    d = directives()
    # mounts, loop devices, namespaces, cgroups, sethostname, JIT in boxes, /proc of boxes
    for key in ("PrivateDevices", "RestrictNamespaces", "ProtectControlGroups", "ProtectKernelTunables",
                "PrivateUsers", "SystemCallFilter", "ProtectHostname", "MemoryDenyWriteExecute",
                "ProtectProc", "DevicePolicy", "DynamicUser", "User"):
        assert key not in d, key


def hardened_wrap(caps):
    """ProtectSystem=full, ProtectHome=read-only, PrivateTmp, NoNewPrivileges and the bounding
    set, made by hand in a mount namespace of its own (nothing propagates back)."""
    mounts = "".join(f"[ -d {p} ] && mount -o bind,ro {p} {p}; " for p in ("/usr", "/boot", "/etc", "/home", "/root"))
    script = (f"set -e; {mounts}mount -t tmpfs -o mode=1777 tmpfs /tmp; mount -t tmpfs -o mode=1777 tmpfs /var/tmp; "
              f"exec setpriv --no-new-privs {' '.join(setpriv_caps(caps)[1:])} \"$@\"")
    return ["unshare", "--mount", "--propagation", "slave", "--", "sh", "-c", script, "sh"]


@pytest.fixture
def installed(monkeypatch):
    """The binaries where a unit's ExecStart would find them: outside /tmp, /var/tmp and /home,
    which the hardening hides or makes read-only (a checkout under /tmp, as CI's may be, would
    vanish behind the private /tmp). Returns the copied `agentbox`; AGENTBOX_BIN names it."""
    where = f"/var/lib/agentbox-deploy-test-bin-{os.getpid()}"
    os.makedirs(where, exist_ok=True)
    build = os.path.dirname(agentbox_bin())
    for name in ("agentbox", "agentbox-serve", "agentbox-init"):
        shutil.copy2(os.path.join(build, name), os.path.join(where, name))
    monkeypatch.setenv("AGENTBOX_BIN", os.path.join(where, "agentbox"))
    yield os.path.join(where, "agentbox")
    shutil.rmtree(where, ignore_errors=True)


def test_boxes_start_under_the_units_hardening(doctor_caps, installed):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    r = subprocess.run([*hardened_wrap(doctor_caps), installed, "run", "--", "sh", "-c",
                        "grep NoNewPrivs /proc/self/status; touch /tmp/x; echo ok"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NoNewPrivs:\t1" in r.stdout and r.stdout.endswith("ok\n"), r.stdout


def test_the_daemon_serves_under_the_units_hardening(doctor_caps, installed):
    # The state dir is outside the private /tmp (the test could not see into it), where the
    # unit's StateDirectory is: /var/lib.
    workdir = e2e.new_workdir("deploy-unit")
    state = f"/var/lib/agentbox-deploy-test-{os.getpid()}"
    try:
        d = e2e.Daemon(workdir, state_dir=state, api_key="k" * 32, wrap=hardened_wrap(doctor_caps))
        d.start()
        try:
            status = open(f"/proc/{d.pid}/status").read()
            assert "NoNewPrivs:\t1" in status
            with d.client(user="bob") as c:
                proc = e2e.run(c, "echo hi > ~/a && cat ~/a && id -u")
                assert proc["exit_code"] == 0, proc
                assert e2e.text_of(proc).replace("\r\n", "\n").startswith("hi\n"), proc
                assert c.get("/files/read", params={"path": "a"}).status_code == 200
        finally:
            d.stop()
        assert not d.leftovers
    finally:
        e2e.remove_workdir(workdir)
        e2e.remove_workdir(state)


def test_the_unit_waits_for_ready_on_the_health_route():
    d = directives()
    (post,) = d["ExecStartPost"]
    assert "http://127.0.0.1:8000/health/ready" in post and "--listen 127.0.0.1:8000" in d["ExecStart"][0]
