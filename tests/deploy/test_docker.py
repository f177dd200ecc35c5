"""deploy/docker: the node image. Built only where a container engine answers (none does on
CI's machines: then skipped, saying so); checked statically everywhere: every file it copies
exists (in the checkout, or made by scripts/build.sh and install-deps.sh), its runtime stage
installs every library agentbox-serve links, and the entrypoint derives disjoint uid ranges
from the StatefulSet ordinal."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from .conftest import REPO, agentbox_bin

DOCKERFILE = REPO / "deploy" / "docker" / "Dockerfile"
ROUTER = REPO / "deploy" / "docker" / "router.Dockerfile"
ENTRYPOINT = REPO / "deploy" / "docker" / "entrypoint.sh"
BUILD = pathlib.Path(agentbox_bin()).parent


def runtime_packages():
    stages = DOCKERFILE.read_text().split("\nFROM ")
    runtime = instructions(stages[-1])
    pkgs = set()
    for ins, args in runtime:
        if ins == "RUN" and "apt-get install" in args:
            part = args.split("apt-get install", 1)[1].split("&&", 1)[0]
            pkgs |= {w for w in part.split() if not w.startswith("-")}
    return pkgs


def instructions(text):
    """(instruction, arguments) of a Dockerfile text, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2)) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", text, re.M)]


def test_every_file_the_image_copies_exists():
    copies = [args.split() for ins, args in instructions(DOCKERFILE.read_text()) if ins == "COPY"]
    assert copies
    for words in copies:
        sources = words[:-1]
        if sources[0].startswith("--from=build"):
            for src in sources[1:]:
                rel = pathlib.Path(src).relative_to("/src")
                # build/X is what scripts/build.sh makes, deps/ what install-deps.sh installs.
                path = BUILD / rel.relative_to("build") if rel.parts[0] == "build" else REPO / rel
                assert path.exists(), f"COPY {src}: no {path}"
        else:
            for src in sources:
                assert (REPO / src).exists(), f"COPY {src}: not in the checkout"
    assert os.access(ENTRYPOINT, os.X_OK)
    entry = [args for ins, args in instructions(DOCKERFILE.read_text()) if ins == "ENTRYPOINT"]
    assert entry == ['["/usr/bin/tini", "--", "/opt/agentbox/entrypoint.sh"]']
    assert "tini" in runtime_packages()


def test_the_runtime_stage_installs_every_library_the_server_links():
    serve = BUILD / "agentbox-serve"
    ldd = subprocess.run(["ldd", str(serve)], capture_output=True, text=True, check=True).stdout
    # The libraries it names itself (DT_NEEDED); theirs come with their packages' dependencies.
    needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", str(serve)], capture_output=True,
                                                         text=True, check=True).stdout)
    paths = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
    libs = [paths[n] for n in needed]
    assert len(libs) >= 5, ldd
    packages = runtime_packages()
    for lib in libs:
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(lib)], capture_output=True, text=True)
        if owner.returncode != 0:  # usrmerge: dpkg knows /lib/..., ldd says /usr/lib/...
            owner = subprocess.run(["dpkg", "-S", lib.replace("/usr/lib/", "/lib/", 1)], capture_output=True, text=True)
        assert owner.returncode == 0, f"{lib}: no Debian package owns it"
        pkg = owner.stdout.split(":", 1)[0]
        assert pkg in packages, f"{lib} is {pkg}, not installed by the Dockerfile's runtime stage"


def test_the_static_binaries_need_no_libraries():
    for name in ("agentbox", "agentbox-init"):
        out = subprocess.run(["ldd", str(BUILD / name)], capture_output=True, text=True).stdout
        assert "=>" not in out, f"{name} links {out}"


@pytest.mark.parametrize("pod,base", [("agentbox-0", 1000000), ("agentbox-1", 1065536), ("agentbox-12", 1786432)])
def test_the_entrypoint_gives_each_ordinal_its_own_uid_range(tmp_path, pod, base):
    fake = tmp_path / "agentbox"
    fake.write_text('#!/bin/sh\necho "$AGENTBOX_UID_BASE $*"\n')
    fake.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "POD_NAME": pod, "AGENTBOX_BIN": str(fake)}
    r = subprocess.run([str(ENTRYPOINT), "--listen", "0.0.0.0:8000"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{base} serve --listen 0.0.0.0:8000\n"
    # 65536 apart: the default uid_count, so two nodes on one machine never share a uid
    r = subprocess.run([str(ENTRYPOINT)], capture_output=True, text=True,
                       env={**env, "AGENTBOX_UID_BASE": "10000"})
    assert r.stdout == "10000 serve\n"
    r = subprocess.run([str(ENTRYPOINT)], capture_output=True, text=True, env={**env, "POD_NAME": "web"})
    assert r.returncode == 2 and "set AGENTBOX_UID_BASE" in r.stderr


def engine():
    for tool in ("docker", "podman"):
        if shutil.which(tool):
            r = subprocess.run([tool, "info"], capture_output=True, text=True, timeout=30)
            if r.returncode == 0:
                return tool, ""
            return None, f"{tool} is installed but no engine answers ({tool} info: {r.stderr.strip()[-200:]})"
    return None, "no docker or podman on this machine"


def test_the_images_build():
    tool, why = engine()
    if tool is None:
        pytest.skip(why)
    for dockerfile, tag, context in ((DOCKERFILE, "agentbox-test", REPO), (ROUTER, "agentbox-router-test", ROUTER.parent)):
        r = subprocess.run([tool, "build", "-f", str(dockerfile), "-t", tag, str(context)],
                           capture_output=True, text=True, timeout=3600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run([tool, "run", "--rm", "--entrypoint", "/opt/agentbox/build/agentbox", "agentbox-test",
                        "config", "check", "/dev/null"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
