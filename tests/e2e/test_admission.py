"""New accounts are admitted, not just created (issue 37): `[accounts] new_per_minute` holds
account creations to a rate (429 with Retry-After), `[accounts] max_accounts` caps the accounts a
node holds (503 naming the key), and a used-up uid range is a 503 naming the range and the key
that widens it, no longer a bare 500. Known users are never refused by any of them: the control
in each test. Quotas are off (`disk = "0"`): the limits are about accounts, not volumes.
"""
import re
import uuid

import httpx
import pytest

from conftest import running_daemon


def new_user(tag):
    return f"{tag}-{uuid.uuid4().hex[:10]}"


def files_list(daemon, user):
    with daemon.client(user=user) as c:
        return c.get("/files/list", params={"directory": "."})


def refusals(daemon):
    """agentbox_account_admission_refusals_total by reason, from /metrics (the admin key)."""
    with open(f"{daemon.state_dir}/admin_key") as f:
        admin = f.read().strip()
    r = httpx.get(f"{daemon.url}/metrics", headers={"Authorization": f"Bearer {admin}"}, timeout=10)
    assert r.status_code == 200, r.text
    found = re.findall(r'^agentbox_account_admission_refusals_total\{reason="(\w+)"\} (\S+)$', r.text, re.M)
    return {reason: float(value) for reason, value in found}


def test_new_accounts_past_the_rate_get_429_with_retry_after_and_known_users_are_served():
    with running_daemon("admit-rate", config_text='[accounts]\ndisk = "0"\nnew_per_minute = 3\n') as d:
        users = [new_user("rate") for _ in range(3)]
        for u in users:
            r = files_list(d, u)
            assert r.status_code == 200, r.text
        r = files_list(d, new_user("rate"))
        assert r.status_code == 429, r.text
        assert "new_per_minute" in r.json()["detail"], r.text
        retry = int(r.headers["Retry-After"])
        assert 1 <= retry <= 20, r.headers  # 3 a minute: a token every 20 s
        # Known users, any route, as often as they like.
        for u in users:
            for _ in range(3):
                assert files_list(d, u).status_code == 200
        with d.client(user=users[0]) as c:
            assert c.post("/files/write", json={"path": "a.txt", "content": "hi"}).status_code == 200
        assert refusals(d)["rate"] == 1


def test_at_max_accounts_a_new_user_gets_503_naming_it_and_known_users_are_served():
    with running_daemon("admit-cap", config_text='[accounts]\ndisk = "0"\nmax_accounts = 2\n') as d:
        users = [new_user("cap") for _ in range(2)]
        for u in users:
            assert files_list(d, u).status_code == 200
        for _ in range(2):
            r = files_list(d, new_user("cap"))
            assert r.status_code == 503, r.text
            assert "max_accounts" in r.json()["detail"], r.text
        for u in users:
            assert files_list(d, u).status_code == 200
        assert refusals(d)["max_accounts"] == 2


def test_a_used_up_uid_range_is_503_naming_the_range_and_the_key():
    # uid_count = 4: slot 0 is `agentbox run`'s, so three accounts.
    with running_daemon("admit-uids", config_text='[accounts]\ndisk = "0"\nuid_count = 4\n') as d:
        users = [new_user("uids") for _ in range(3)]
        for u in users:
            assert files_list(d, u).status_code == 200
        base = int(d.extra_env["AGENTBOX_UID_BASE"])
        r = files_list(d, new_user("uids"))
        assert r.status_code == 503, r.text
        detail = r.json()["detail"]
        assert f"uid range {base + 1}-{base + 3}" in detail and "uid_count" in detail, detail
        for u in users:
            assert files_list(d, u).status_code == 200
        assert refusals(d)["uid_range"] == 1
