"""Steps of issue 36's scripted session that both of its tests take: test_metrics.py counts them
in Prometheus, test_audit.py finds them in the audit trail. A daemon that runs them has
ACCOUNTS_CONFIG in its config and HOLD_START_ENV in its environment.
"""
import uuid

from conftest import sh

MB = 1 << 20
STUCK = "stuck-"  # users whose box never answers its start (AGENTBOX_TEST_HOLD_START)
HOLD_START_ENV = {"AGENTBOX_TEST_HOLD_START": STUCK}
# A volume a box fills in a second, and a start given up after 3 s.
ACCOUNTS_CONFIG = """
[accounts]
start_timeout = 3
disk = "64M"
inodes = 4000
"""


def refuse_a_write_for_quota(client):
    """A quota refusal: the client's volume filled from its box, then a write through the API
    is 507. Takes one /execute (the fill) and one POST /files/write (the refusal)."""
    code, out, _ = sh(client, "dd if=/dev/zero of=fill bs=1M count=100 2>&1; echo rc=$?")
    assert "No space left on device" in out, out
    r = client.post("/files/write", json={"path": "note.txt", "content": "x" * (2 * MB)})
    assert r.status_code == 507, r.text


FAILED_START_COMMAND = "echo never"


def fail_a_box_start(daemon):
    """A box start that fails: a new user whose box's init never answers; its /execute is 503
    once [accounts] start_timeout passes. Returns the user's id."""
    user = f"{STUCK}{uuid.uuid4().hex[:8]}"
    with daemon.client(user=user, timeout=30) as stuck:
        r = stuck.post("/execute", params={"wait": 10}, json={"command": FAILED_START_COMMAND})
        assert r.status_code == 503, r.text
    return user
