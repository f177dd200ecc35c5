"""Fixtures of the pytest red-team modules: a daemon inside a world namespace whose every route
leads to a bait namespace that records what arrives (netns_world.py, bait_recorder.py).

The daemon helpers are tests/e2e/conftest.py's, loaded under the name `e2e_conftest` (both
files are called conftest, so a plain import would find this one).
"""
import contextlib
import importlib.util
import pathlib
import sys

import pytest

_E2E = pathlib.Path(__file__).resolve().parent.parent / "e2e" / "conftest.py"
_spec = importlib.util.spec_from_file_location("e2e_conftest", _E2E)
e2e = importlib.util.module_from_spec(_spec)
sys.modules["e2e_conftest"] = e2e
_spec.loader.exec_module(e2e)

from .bait_recorder import Bait  # noqa: E402
from .netns_world import Forwarder, World, netns_names  # noqa: E402


@pytest.fixture(scope="module")
def world():
    w = World()
    yield w
    w.remove()
    left = [ns for ns in netns_names() if ns in (w.world, w.bait)]
    assert not left, f"namespaces left behind: {left}"


@pytest.fixture(scope="module")
def bait(world):
    b = Bait(world)
    yield b
    b.close()


@pytest.fixture(scope="module")
def world_daemon_factory(world):
    """Starts `agentbox serve` inside world (listening on all of world's addresses) with a
    config; its url is a forwarder on the test's own 127.0.0.1; api_port is the real port.
    Stopped at the end of the module, which fails if the daemon left processes behind."""
    stack = contextlib.ExitStack()
    made = []

    def make(tag, config_text):
        d = stack.enter_context(e2e.running_daemon(tag, config_text=config_text, wrap=world.nsenter(),
                                                   listen="0.0.0.0:0"))
        made.append(d)
        d.api_port = d.port
        forwarder = Forwarder(world.world_path, d.api_port)
        stack.callback(forwarder.close)
        d.url = forwarder.url
        return d

    with stack:
        yield make
    for d in made:
        assert not d.leftovers, f"the daemon left processes running: {d.leftovers}"
