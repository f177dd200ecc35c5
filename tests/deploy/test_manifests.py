"""deploy/k8s validated offline: every render (the base and each overlay) against the Kubernetes
schemas with unknown keys refused, and agentbox's policy for a node pod, with the capability
list taken from `agentbox doctor` (validate_manifests.mjs). Each broken copy below must fail:
the validator is only worth something if it rejects what it should."""
import json
import pathlib
import re
import shutil
import subprocess

import pytest

from .conftest import REPO

K8S = REPO / "deploy" / "k8s"
SCRIPT = REPO / "tests" / "deploy" / "validate_manifests.mjs"
MODULES = REPO / "tests" / "deploy" / "node_modules"

pytestmark = pytest.mark.skipif(shutil.which("node") is None,
                                reason="node is not installed: the schema check runs on kubernetes-models (npm)")


def validate(caps, root=K8S):
    assert (MODULES / "kubernetes-models" / "package.json").exists(), \
        "tests/deploy/node_modules is missing: run scripts/install-deps.sh"
    return subprocess.run(["node", str(SCRIPT), "--caps", ",".join(caps), str(root)],
                          capture_output=True, text=True, timeout=120)


def broken_copy(tmp_path, rel, old, new, count=1):
    root = tmp_path / "k8s"
    shutil.copytree(K8S, root)
    path = root / rel
    text = path.read_text()
    assert text.count(old) >= count, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, count))
    return root


def test_every_render_is_valid_and_keeps_the_policy(doctor_caps):
    r = validate(doctor_caps)
    assert r.returncode == 0, r.stdout + r.stderr
    for render in ("base", "overlays/daemonset", "overlays/host-users-false",
                   "overlays/privileged-cgroup", "overlays/seccomp-localhost"):
        assert re.search(rf"^{render}: \d+ objects$", r.stdout, re.M), r.stdout


def test_the_manifests_add_exactly_what_doctor_checks(doctor_caps):
    # The list doctor prints is the manifests' list; with one cap more or less on the doctor
    # side, every node pod disagrees.
    for caps in (doctor_caps[:-1], doctor_caps + ["SYS_PTRACE"]):
        r = validate(caps)
        assert r.returncode == 1
        assert "capabilities.add is" in r.stdout, r.stdout


@pytest.mark.parametrize("rel,old,new,message", [
    # The typo the API server would accept silently (the pod gets host users).
    ("overlays/host-users-false/userns.yaml", "      hostUsers: false", "      hostUser: false",
     "unknown key .spec.template.spec.hostUser"),
    ("base/statefulset.yaml", "            runAsUser: 0", "            runAsUsr: 0",
     "unknown key .spec.template.spec.containers[0].securityContext.runAsUsr"),
    ("base/statefulset.yaml", "  persistentVolumeClaimRetentionPolicy:",
     "  persistentVolumeClaimRetentionPolicys:", "unknown key .spec.persistentVolumeClaimRetentionPolicys"),
    ("base/router.yaml", "  replicas: 2", "  replicas: two", "schema: /spec/replicas"),
])
def test_a_typo_fails(doctor_caps, tmp_path, rel, old, new, message):
    r = validate(doctor_caps, broken_copy(tmp_path, rel, old, new))
    assert r.returncode == 1, r.stdout
    assert message in r.stdout, r.stdout


@pytest.mark.parametrize("rel,old,new,message", [
    ("base/statefulset.yaml", ", KILL]", "]", "capabilities.add is"),
    ("base/statefulset.yaml", "            runAsUser: 0",
     "            runAsUser: 0\n            allowPrivilegeEscalation: false", "allowPrivilegeEscalation: false"),
    ("base/statefulset.yaml", "            seccompProfile:\n              type: Unconfined",
     "            seccompProfile:\n              type: RuntimeDefault", "seccompProfile must be"),
    ("base/statefulset.yaml", "            appArmorProfile:\n              type: Unconfined",
     "            appArmorProfile:\n              type: RuntimeDefault", "appArmorProfile must be Unconfined"),
    ("base/statefulset.yaml", "accessModes: [ReadWriteOnce]", "accessModes: [ReadWriteMany]",
     "accessModes must be [ReadWriteOnce]"),
    ("base/statefulset.yaml", "    whenScaled: Retain", "    whenScaled: Delete",
     "persistentVolumeClaimRetentionPolicy must be Retain/Retain"),
    ("base/statefulset.yaml", "  replicas: 3 ", "  replicas: 4 ", "needs a Service agentbox-3"),
    ("base/services.yaml", "statefulset.kubernetes.io/pod-name: agentbox-1",
     "statefulset.kubernetes.io/pod-name: agentbox-0", "needs a Service agentbox-1"),
    ("base/router.yaml", "  replicas: 2", "  replicas: 1", "agentbox-router must have 2 replicas"),
    ("base/namespace.yaml", "enforce: privileged", "enforce: baseline", "pod-security.kubernetes.io/enforce"),
    ("base/pdb.yaml", "      app.kubernetes.io/component: router", "      app.kubernetes.io/component: routers",
     "no PodDisruptionBudget selects the router"),
    ("overlays/host-users-false/userns.yaml", "            procMount: Unmasked", "            procMount: Default",
     "hostUsers: false needs procMount: Unmasked"),
    ("overlays/host-users-false/userns.yaml", 'value: "10000"', 'value: "20000"',
     "must lie within the pod's 0-65535"),
    ("overlays/host-users-false/config.yaml", 'disk = "0"', 'disk = "10G"', 'disk must be "0"'),
    ("overlays/seccomp-localhost/seccomp.yaml", "profiles/agentbox.json", "profiles/other.json",
     "seccompProfile must be"),
])
def test_a_policy_breach_fails(doctor_caps, tmp_path, rel, old, new, message):
    r = validate(doctor_caps, broken_copy(tmp_path, rel, old, new))
    assert r.returncode == 1, r.stdout
    assert message in r.stdout, r.stdout


def test_the_seccomp_profile_is_the_runtime_default_plus_what_a_box_start_calls():
    profile = json.loads((K8S / "seccomp" / "agentbox.json").read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = set(profile["syscalls"][0]["names"])
    assert profile["syscalls"][0]["action"] == "SCMP_ACT_ALLOW"
    added = {"pivot_root", "clone3", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
             "move_mount", "mount_setattr", "quotactl"}
    assert added <= allowed, added - allowed
    # What the daemon itself calls (SCALING-NOTES §8) and the RuntimeDefault's usual ones.
    assert {"unshare", "setns", "mount", "umount2", "sethostname", "setresuid", "setresgid",
            "setgroups", "setfsuid", "capset", "prctl", "seccomp", "pidfd_open",
            "landlock_create_ruleset", "landlock_restrict_self", "read", "execve"} <= allowed
    # Still refused: what neither a box start nor the daemon needs.
    assert not allowed & {"kexec_load", "init_module", "finit_module", "reboot", "open_by_handle_at",
                          "chroot", "swapon", "acct", "settimeofday"}
    socket_rules = [s for s in profile["syscalls"] if s["names"] == ["socket"]]
    assert len(socket_rules) == 3  # every family but AF_ALG and AF_VSOCK, as containerd's


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (scripts/install-deps.sh installs it)")
def test_the_routers_placeholder_config_is_valid_nginx(tmp_path):
    # The ConfigMap the router starts with, before `agentbox cluster nginx-conf` replaces it,
    # included as the router image includes it (/etc/agentbox/*.conf inside http).
    extract = ("const Y = require('yaml'); const fs = require('fs');"
               "for (const d of Y.parseAllDocuments(fs.readFileSync(process.argv[1], 'utf8')))"
               "  if (d.toJS().kind === 'ConfigMap') process.stdout.write(d.toJS().data['agentbox.conf']);")
    conf = subprocess.run(["node", "-e", extract, str(K8S / "base" / "router.yaml")], capture_output=True,
                          text=True, check=True, env={"NODE_PATH": str(MODULES), "PATH": "/usr/bin:/bin"}).stdout
    assert "listen 8000;" in conf
    (tmp_path / "agentbox.conf").write_text(conf)
    main = tmp_path / "nginx.conf"
    main.write_text(f"pid {tmp_path}/nginx.pid;\nerror_log stderr;\nevents {{}}\n"
                    f"http {{ client_body_temp_path {tmp_path}/body; include {tmp_path}/agentbox.conf; }}\n")
    r = subprocess.run(["nginx", "-t", "-q", "-c", str(main), "-p", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_node_pods_are_probed_on_the_health_routes_and_scraped_on_the_metrics_listener():
    # Offline and textual (no cluster): /health/ready gates traffic, /health/live restarts a
    # stuck daemon, and Prometheus' annotations name the port the ConfigMaps' [metrics] listen.
    sts = (K8S / "base" / "statefulset.yaml").read_text()
    assert re.search(r"readinessProbe:\s+httpGet:\s+path: /health/ready\s+port: http", sts), sts
    assert re.search(r"livenessProbe:\s+httpGet:\s+path: /health/live\s+port: http", sts), sts
    ds = (K8S / "overlays" / "daemonset" / "daemonset.yaml").read_text()
    assert re.search(r"readinessProbe:\s+httpGet:\s+path: /health/ready\s+port: http", ds), ds
    assert "tcpSocket" not in sts and "tcpSocket" not in ds
    port = re.search(r'prometheus\.io/port: "(\d+)"', sts).group(1)
    assert re.search(rf"- name: metrics\s+containerPort: {port}\b", sts)
    for config in (K8S / "base" / "config.yaml", K8S / "overlays" / "host-users-false" / "config.yaml",
                   K8S / "overlays" / "privileged-cgroup" / "config.yaml"):
        assert re.search(rf'\[metrics\]\s+listen = "0\.0\.0\.0:{port}"', config.read_text()), config
