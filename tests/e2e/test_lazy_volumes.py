"""An empty account costs no image (issue 37): the account is made on the first request naming a
new user, its volume only when something needs the disk. Until then the routes that only read
answer as an empty home would (a listing with no entries, a 404 for a path, no matches, an empty
trash, nothing used of the quota) and no image, loop device or mount is made for it; the first
write makes exactly one image, even when a read of the same new user races with it.
"""
import asyncio
import concurrent.futures
import json
import os
import uuid

import pytest
import websockets

from conftest import running_daemon
from volume_checks import accounts, du_kib, image_names, loops_of, mounted_volumes, volumes_dir, wait_until

IDLE = 1
SETTLE = IDLE + 6
DISK = 64 << 20
CONFIG = f"""
[accounts]
disk = "64M"
inodes = 4000
spare_volumes = 0
volume_idle = {IDLE}
"""


@pytest.fixture(scope="module")
def lazy():
    with running_daemon("lazy-volumes", config_text=CONFIG) as d:
        yield d


def test_new_users_who_only_list_their_home_cost_no_image_until_one_writes(lazy):
    before_images = image_names(lazy)
    before_kib = du_kib(volumes_dir(lazy))
    users = [f"lister{i}-{uuid.uuid4().hex[:8]}" for i in range(20)]
    for user in users:
        with lazy.client(user=user) as c:
            r = c.get("/files/list", params={"directory": "."})
            assert r.status_code == 200, r.text
            assert r.json()["entries"] == [], r.text
    known = accounts(lazy)
    # The accounts are made (each with its uid), their volumes not.
    assert all(u in known for u in users), sorted(set(users) - set(known))
    names = {known[u]["name"] for u in users}
    assert image_names(lazy) == before_images, image_names(lazy) - before_images
    grown = du_kib(volumes_dir(lazy)) - before_kib
    assert grown <= 256, f"the volumes directory grew by {grown} KiB for 20 users who wrote nothing"
    assert not names & mounted_volumes(lazy)
    assert all(loops_of(lazy, n) == [] for n in names)
    for u in users:
        disk = known[u]["disk"]
        assert disk["used"] == 0 and disk["limit"] == DISK, disk

    # The first write makes the one image, the file is there and the uid is the one given at first sight.
    writer = users[0]
    name, uid = known[writer]["name"], known[writer]["uid"]
    with lazy.client(user=writer) as c:
        r = c.post("/files/write", json={"path": "note.txt", "content": "hello"})
        assert r.status_code == 200, r.text
        assert image_names(lazy) - before_images == {name}
        r = c.get("/files/read", params={"path": "note.txt"})
        assert r.status_code == 200 and r.json()["content"] == "hello", r.text
        assert [e["name"] for e in c.get("/files/list", params={"directory": "."}).json()["entries"]] == ["note.txt"]
    assert os.stat(os.path.join(volumes_dir(lazy), name, "home", "note.txt")).st_uid == uid
    after = accounts(lazy)[writer]
    assert after["uid"] == uid and after["name"] == name
    assert after["disk"]["used"] > 0 and after["disk"]["limit"] <= DISK

    # The idle detacher takes the written volume and passes over the accounts without one.
    assert wait_until(lambda: name not in mounted_volumes(lazy), SETTLE), "the written volume stayed attached"
    with lazy.client(user=users[1]) as c:
        r = c.get("/files/list", params={"directory": "."})
        assert r.status_code == 200 and r.json()["entries"] == [], r.text
    assert image_names(lazy) - before_images == {name}
    assert os.listdir(os.path.join(lazy.state_dir, "empty-home")) == []


async def terminal_socket_closes(d, user, terminal):
    """A terminal WebSocket's close code after its auth frame (None if it stayed open)."""
    url = f"ws://127.0.0.1:{d.port}/api/terminals/{terminal}"
    async with websockets.connect(url, extra_headers={"X-User-Id": user}, open_timeout=15, ping_interval=None) as ws:
        await ws.send(json.dumps({"type": "auth", "token": d.api_key}))
        try:
            await asyncio.wait_for(ws.recv(), 15)
        except websockets.ConnectionClosed:
            return ws.close_code
    return None


def test_reads_of_a_user_without_a_volume_answer_as_an_empty_home(lazy):
    user = f"reader-{uuid.uuid4().hex[:8]}"
    before = image_names(lazy)
    with lazy.client(user=user) as c:
        r = c.get("/files/read", params={"path": "missing.txt"})
        assert r.status_code == 404, r.text
        assert "detail" in r.json()
        assert c.get("/files/view", params={"path": "missing.txt"}).status_code == 404
        assert c.get("/files/view", params={"path": "missing.docx", "preview": "true"}).status_code == 404
        r = c.get("/files/list", params={"directory": "sub"})
        assert r.status_code == 404, r.text
        r = c.get("/files/display", params={"path": "missing.txt"})
        assert r.status_code == 200 and r.json()["exists"] is False, r.text
        r = c.get("/files/grep", params={"query": "anything"})
        assert r.status_code == 200 and r.json()["matches"] == [], r.text
        r = c.get("/files/glob", params={"pattern": "**/*"})
        assert r.status_code == 200 and r.json()["matches"] == [], r.text
        r = c.get("/files/trash")
        assert r.status_code == 200 and r.json()["items"] == [] and r.json()["size"] == 0, r.text
        r = c.get("/files/cwd")
        assert r.status_code == 200 and r.json()["cwd"] == r.json()["home"], r.text
        assert c.get("/usage").status_code == 200
        assert c.get("/execute").json() == []
        assert c.get("/api/terminals").json() == []
        # Deleting nothing finds nothing, and makes nothing to find it in.
        r = c.delete("/files/delete", params={"path": "missing.txt"})
        assert r.status_code == 404, r.text
        r = c.post("/files/move", json={"source": "missing.txt", "destination": "b.txt"})
        assert r.status_code == 404, r.text
        assert c.delete("/files/trash").json() == {"deleted": 0}
        assert c.delete("/files/trash", params={"id": "1-x"}).status_code == 404
        assert c.post("/files/trash/restore", json={"id": "1-x"}).status_code == 404
        # What only a box makes (processes, terminals, kernels, ports) is not there to find.
        assert c.get("/ports").json() == {"ports": []}
        assert c.get("/agent/sessions").json() == {"sessions": []}
        assert c.get("/agent/sessions/0b7c8f6e-5a4d-4c3b-9a2f-1e0d9c8b7a6f").status_code == 404
        assert c.get("/skills").status_code == 200 and c.get("/skills/none").status_code == 404
        for method, path in (("GET", "/execute/p1/status"), ("GET", "/execute/p1/stream"),
                             ("DELETE", "/execute/p1"), ("GET", "/notebooks/n1"), ("DELETE", "/notebooks/n1"),
                             ("GET", "/api/terminals/t1"), ("DELETE", "/api/terminals/t1")):
            r = c.request(method, path)
            assert r.status_code == 404, (method, path, r.text)
        assert c.post("/execute/p1/input", json={"input": "x"}).status_code == 404
        r = c.get("/user-terminal/read", headers={"X-Session-Id": "chat-1"})
        assert r.status_code == 404, r.text
        r = c.get("/proxy/8080/")
        assert r.status_code == 502 and "no box is running" in r.json()["detail"], r.text
        assert asyncio.run(terminal_socket_closes(lazy, user, "t1")) == 4004  # no such terminal
        # A write goes nowhere near the empty home the reads were given: it makes the volume.
        assert image_names(lazy) == before
        disk = accounts(lazy)[user]["disk"]
        assert disk["used"] == 0 and disk["limit"] == DISK, disk
        r = c.post("/files/mkdir", json={"path": "made"})
        assert r.status_code == 200, r.text
        name = accounts(lazy)[user]["name"]
        assert image_names(lazy) - before == {name}
        # The same reads now see the volume: the control for every assertion above.
        r = c.get("/files/list", params={"directory": "."})
        assert [e["name"] for e in r.json()["entries"]] == ["made"], r.text
        r = c.delete("/files/delete", params={"path": "made"})
        assert r.status_code == 200, r.text
        assert len(c.get("/files/trash").json()["items"]) == 1
    assert os.listdir(os.path.join(lazy.state_dir, "empty-home")) == []


def test_a_read_and_a_write_racing_for_a_new_user_make_one_image(lazy):
    before = image_names(lazy)
    users = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for i in range(10):
            user = f"race{i}-{uuid.uuid4().hex[:8]}"
            users.append(user)
            with lazy.client(user=user) as reader, lazy.client(user=user) as writer:
                listed = pool.submit(reader.get, "/files/list", params={"directory": "."})
                wrote = pool.submit(writer.post, "/files/write", json={"path": "race.txt", "content": str(i)})
                r, w = listed.result(timeout=60), wrote.result(timeout=60)
                assert w.status_code == 200, w.text
                assert r.status_code == 200, r.text
                # Either before the write or after it, never half of it.
                assert [e["name"] for e in r.json()["entries"]] in ([], ["race.txt"]), r.text
                r = reader.get("/files/read", params={"path": "race.txt"})
                assert r.status_code == 200 and r.json()["content"] == str(i), r.text
    known = accounts(lazy)
    assert image_names(lazy) - before == {known[u]["name"] for u in users}
    assert len({known[u]["uid"] for u in users}) == len(users)
