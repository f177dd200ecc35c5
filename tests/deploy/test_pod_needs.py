"""The capability list `agentbox doctor` checks is enough and each entry is needed: root with
exactly those capabilities (setpriv's bounding set, as a pod with capabilities drop ALL + add
gets them) starts boxes, through `agentbox run` and through the daemon's /execute; without any
one of them doctor names it. The same under the shipped Localhost seccomp profile, and doctor
names what a runtime's default profile refuses."""
import os
import subprocess

import pytest

from .conftest import REPO, agentbox_bin, e2e, run_doctor, setpriv_caps


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}


def test_exactly_the_needed_capabilities_start_a_box(doctor_caps):
    r = subprocess.run([*setpriv_caps(doctor_caps), agentbox_bin(), "run", "--", "sh", "-c",
                        "grep CapEff /proc/self/status; id -u"],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CapEff:\t0000000000000000" in r.stdout  # the box itself has none
    assert r.stdout.split()[-1] == "1000000"


def test_doctor_passes_with_exactly_the_needed_capabilities(doctor_caps):
    r = run_doctor(setpriv_caps(doctor_caps))
    assert r.returncode == 0, r.stdout
    assert "CapEff has all the 9 needed" in r.stdout
    assert "trial box starts" in r.stdout and "FAILED" not in r.stdout, r.stdout


def test_the_daemon_serves_boxes_with_exactly_the_needed_capabilities(doctor_caps):
    with e2e.running_daemon("deploy-caps", wrap=setpriv_caps(doctor_caps)) as d:
        status = open(f"/proc/{d.pid}/status").read()
        cap_eff = int(next(l for l in status.splitlines() if l.startswith("CapEff:")).split()[1], 16)
        cap_bnd = int(next(l for l in status.splitlines() if l.startswith("CapBnd:")).split()[1], 16)
        assert cap_eff == cap_bnd and bin(cap_eff).count("1") == len(doctor_caps)
        with d.client(user="alice") as c:
            proc = e2e.run(c, "id -u; echo made > ~/f; cat ~/f; ls -ld ~ | cut -c1-10")
            assert proc["exit_code"] == 0, proc
            out = e2e.text_of(proc).replace("\r\n", "\n")  # a pty's line ends
            assert "made\ndrwx------" in out, out
            assert 0 < int(out.split()[0]) - int(d.extra_env["AGENTBOX_UID_BASE"]) < 65536, out
            # the file routes (setfsuid as the account) and a second command in the same box
            assert c.get("/files/read", params={"path": "f"}).status_code == 200
            assert e2e.run(c, "true")["exit_code"] == 0
    assert not d.leftovers


@pytest.mark.parametrize("dropped", ["SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "SETPCAP", "CHOWN",
                                     "FOWNER", "DAC_OVERRIDE", "KILL"])
def test_doctor_names_each_missing_capability(doctor_caps, dropped):
    assert dropped in doctor_caps
    r = run_doctor(setpriv_caps([c for c in doctor_caps if c != dropped]))
    assert r.returncode == 1, r.stdout
    assert f"CapEff lacks {dropped} (" in r.stdout, r.stdout
    assert "missing: capabilities — run the daemon as root with SYS_ADMIN, NET_ADMIN" in r.stdout
    # Only that one is named as lacking.
    lacks = r.stdout.split("CapEff lacks ", 1)[1].split(";", 1)[0]
    assert [c for c in doctor_caps if c in lacks.split()] == [dropped], lacks


# deploy/k8s/seccomp/agentbox.json, loaded as a runtime loads a Localhost profile
# (seccomp_exec.py, through libseccomp), around root with exactly the needed capabilities.
PROFILE = REPO / "deploy" / "k8s" / "seccomp" / "agentbox.json"
SECCOMP_EXEC = REPO / "tests" / "deploy" / "seccomp_exec.py"


def under_profile(caps, *without):
    drops = [w for name in without for w in ("--without", name)]
    return [*setpriv_caps(caps), "/usr/bin/python3", str(SECCOMP_EXEC), str(PROFILE), *drops, "--"]


def test_boxes_start_under_the_shipped_seccomp_profile(doctor_caps):
    r = subprocess.run([*under_profile(doctor_caps), agentbox_bin(), "run", "--", "sh", "-c",
                        "grep Seccomp_filters /proc/self/status; echo hi"],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "Seccomp_filters:\t2\nhi\n"  # the pod's profile, then the box's own
    r = run_doctor(under_profile(doctor_caps))
    assert r.returncode == 0, r.stdout
    assert "this process is filtered (Seccomp: 2); it lets through pivot_root, clone3, mount_setattr" in r.stdout
    with e2e.running_daemon("deploy-seccomp", wrap=under_profile(doctor_caps)) as d:
        assert "Seccomp:\t2" in open(f"/proc/{d.pid}/status").read()
        with d.client(user="carol") as c:
            proc = e2e.run(c, "echo hi > ~/a && cat ~/a")
            assert proc["exit_code"] == 0, proc
            assert c.get("/files/read", params={"path": "a"}).status_code == 200
    assert not d.leftovers


def test_doctor_names_what_a_runtimes_default_profile_refuses(doctor_caps):
    # The profile without what agentbox adds to containerd's RuntimeDefault: an older runtime's
    # default, which refuses pivot_root even with CAP_SYS_ADMIN.
    added = ["pivot_root", "clone3", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
             "move_mount", "mount_setattr", "quotactl", "quotactl_fd"]
    r = run_doctor(under_profile(doctor_caps, *added))
    assert r.returncode == 1, r.stdout
    assert "it refuses pivot_root: EPERM, clone3: EPERM, mount_setattr: EPERM" in r.stdout, r.stdout
    assert "missing: seccomp profile — run the daemon without a seccomp filter" in r.stdout
    # and a box start there fails at pivot_root, as doctor said
    r = subprocess.run([*under_profile(doctor_caps, "pivot_root"), agentbox_bin(), "run", "--", "true"],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    assert r.returncode == 125 and "pivot_root(" in r.stderr, r.stderr
