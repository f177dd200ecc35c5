"""The daemon's clock of days under test (AGENTBOX_TEST_WORKSPACE_CLOCK): a file holding the unix
time the day-based sweeps (workspaces' keep_days and reset, [accounts] forget_after_days) take
for now, so a test moves days ahead at once. Shared by test_workspaces.py and
test_forget_accounts.py."""
import contextlib
import os
import uuid

from conftest import running_daemon


@contextlib.contextmanager
def daemon_with_clock(tag, config_text):
    """running_daemon with its clock of days in the file d.clock (the real clock until set_clock
    writes one) and its sweeps run every second (they are passes of the trash upkeep); the
    file is removed afterwards."""
    clock = f"/tmp/abx-{tag}-clock-{uuid.uuid4().hex[:8]}"
    env = {"AGENTBOX_TEST_TRASH_UPKEEP_SECONDS": "1", "AGENTBOX_TEST_WORKSPACE_CLOCK": clock}
    with running_daemon(tag, config_text=config_text, env=env) as d:
        d.clock = clock
        try:
            yield d
        finally:
            if os.path.exists(clock):
                os.unlink(clock)


def set_clock(d, unix_seconds):
    """The daemon's clock of days; None: the real one."""
    if unix_seconds is None:
        if os.path.exists(d.clock):
            os.unlink(d.clock)
        return
    # Written aside and renamed, so the daemon never reads half a number.
    with open(d.clock + ".new", "w") as f:
        f.write(str(int(unix_seconds)))
    os.replace(d.clock + ".new", d.clock)
