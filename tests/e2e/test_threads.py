"""The daemon's threads against docs/ARCHITECTURE.md "Threads": every thread a running daemon has
is named (pthread_setname_np) and listed there, with as many threads as the table says, and
every thread the table lists is running. The table cannot drift from the code.

The daemon here has every optional part on (a mirror of homes, a model gateway) and has started
a box, so every kind of thread exists.
"""
import collections
import os
import pathlib
import re
import time
import uuid

from conftest import sh

ARCHITECTURE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"


def thread_table():
    """{name: count as the table writes it} from the Threads section."""
    text = ARCHITECTURE.read_text()
    section = text.split("\n## Threads\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `([^`]+)` \| ([^|]+) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def expected_count(written):
    """How many threads a row says, or None for a thread that lives only while it works."""
    if written.startswith("max(2, cores)"):
        return max(2, os.cpu_count())
    if "while" in written:
        return None
    m = re.match(r"(\d+)", written)
    assert m, f"a thread count the test cannot read: {written!r}"
    return int(m.group(1))


def threads_of(pid):
    names = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names[f.read().strip()] += 1
        except OSError:
            pass  # a thread that ended meanwhile
    return names


def test_the_thread_table_is_well_formed():
    table = thread_table()
    assert len(table) >= 10, table
    for name, written in table.items():
        assert len(name) <= 15, f"{name}: the kernel keeps 15 characters of a thread's name"
        expected_count(written)


def test_every_thread_of_the_daemon_is_in_the_table_and_every_row_runs(make_daemon, tmp_path):
    config = f"""
[backup]
dir = "{tmp_path}/mirror"
[inference.anthropic]
upstream = "http://127.0.0.1:9"
[metrics]
listen = "127.0.0.1:0"
"""
    d = make_daemon(tag="threads", api_key=uuid.uuid4().hex, config_text=config,
                    env={"AGENTBOX_ANTHROPIC_API_KEY": "sk-ant-test-" + uuid.uuid4().hex}).start()
    with d.client(user=f"threads-{uuid.uuid4().hex[:8]}") as c:
        assert sh(c, "true")[0] == 0  # a box: its launch, its namespace, its loop work

    table = thread_table()
    short_lived = {name for name, written in table.items() if expected_count(written) is None}
    deadline = time.monotonic() + 10
    while True:  # a short-lived thread may still be ending
        seen = threads_of(d.pid)
        if not (set(seen) & short_lived) or time.monotonic() > deadline:
            break
        time.sleep(0.05)

    unlisted = sorted(set(seen) - set(table))
    assert not unlisted, f"threads the table does not list: {unlisted} (all: {dict(seen)})"
    for name, written in table.items():
        want = expected_count(written)
        if want is None:
            assert seen[name] <= 1, (name, dict(seen))
        else:
            assert seen[name] == want, f"{name}: {seen[name]} running, the table says {written!r}"
