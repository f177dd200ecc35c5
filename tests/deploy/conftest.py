"""Fixtures of tests/deploy: the repository, the built `agentbox`, and the capability list
`agentbox doctor` prints (the one list in src/box/pod_needs.hpp), which the manifests, the
systemd unit and the setpriv tests are held to.

The daemon helpers are tests/e2e/conftest.py's, loaded under the name `e2e_conftest`.
"""
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent.parent

# The e2e harness's daemons run this checkout's build unless AGENTBOX_BIN says otherwise.
os.environ.setdefault("AGENTBOX_BIN", str(REPO / "build" / "agentbox"))

_E2E = REPO / "tests" / "e2e" / "conftest.py"
if "e2e_conftest" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("e2e_conftest", _E2E)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["e2e_conftest"] = _module
    _spec.loader.exec_module(_module)
e2e = sys.modules["e2e_conftest"]

# doctor's capabilities row: "... the 9 needed (SYS_ADMIN NET_ADMIN ...)"
NEEDED = re.compile(r"the (\d+) needed \(([A-Z_ ]+)\)")


def agentbox_bin():
    return os.environ["AGENTBOX_BIN"]


def run_doctor(prefix=(), timeout=120):
    return subprocess.run([*prefix, agentbox_bin(), "doctor"], capture_output=True, text=True,
                          timeout=timeout, env={k: v for k, v in os.environ.items()
                                                if not k.startswith("AGENTBOX_")})


@pytest.fixture(scope="session")
def doctor_caps():
    """The capabilities `agentbox doctor` says the daemon needs, in its order."""
    assert os.access(agentbox_bin(), os.X_OK), f"no {agentbox_bin()}: run scripts/build.sh"
    out = run_doctor().stdout
    m = NEEDED.search(out)
    assert m, f"agentbox doctor printed no capability list:\n{out}"
    caps = m.group(2).split()
    assert len(caps) == int(m.group(1)), m.group(0)
    return caps


def setpriv_caps(caps):
    """A setpriv prefix that leaves root exactly caps: the bounding set limits what an exec as
    root gets in its permitted and effective sets."""
    return ["setpriv", "--bounding-set", "-all," + ",".join("+" + c.lower() for c in caps), "--"]
