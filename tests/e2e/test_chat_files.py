"""What Open WebUI 0.12 asks of /files around a chat (API.md Part A, OWUI-NOTES.md):

- GET /files/cwd gives `home` and `root` ({"path", "label"}) as Open Terminal 0.12 does; the file
  navigator starts there.
- Each turn it reads AGENTS.md from the home: GET /files/cwd for `home`, then
  GET /files/read?path=<home>/AGENTS.md.
- When a chat is deleted it calls DELETE /files/delete?path=<home>/chat_attachments/<chat>,
  whether or not the chat had attachments: that works, and again (idempotent).
"""
import uuid


def test_cwd_names_home_and_root(clients):
    session = f"chat-{uuid.uuid4().hex[:8]}"
    c = clients.user("cwd", session=session)
    r = c.get("/files/cwd")
    assert r.status_code == 200, r.text
    body = r.json()
    home = body["home"]
    assert home.startswith("/home/")
    assert body["cwd"] == home
    assert body["root"] == {"path": home, "label": "Home"}
    assert c.post("/files/mkdir", json={"path": "work"}).status_code == 200
    assert c.post("/files/cwd", json={"path": "work"}).status_code == 200
    moved = c.get("/files/cwd").json()
    assert moved["cwd"] == home + "/work"
    assert moved["home"] == home and moved["root"]["path"] == home  # the root stays the home


def test_agents_md_is_read_as_open_webui_reads_it(clients):
    c = clients.user("agents", session=f"chat-{uuid.uuid4().hex[:8]}")
    text = "# House rules\nAnswer in French.\n"
    assert c.post("/files/write", json={"path": "~/AGENTS.md", "content": text}).status_code == 200
    home = c.get("/files/cwd").json()["home"]
    r = c.get("/files/read", params={"path": f"{home}/AGENTS.md"})
    assert r.status_code == 200, r.text
    assert r.json()["content"] == text
    # A user without one: 404, which Open WebUI takes as "no AGENTS.md".
    other = clients.user("agents")
    other_home = other.get("/files/cwd").json()["home"]
    assert other.get("/files/read", params={"path": f"{other_home}/AGENTS.md"}).status_code == 404


def test_deleting_a_chats_attachments_works_and_is_idempotent(clients):
    chat = f"chat-{uuid.uuid4().hex[:8]}"
    c = clients.user("attach", session=chat)
    home = c.get("/files/cwd").json()["home"]
    folder = f"{home}/chat_attachments/{chat}"
    assert c.post("/files/write", json={"path": f"{folder}/notes.txt", "content": "x"}).status_code == 200
    assert c.post("/files/write", json={"path": f"{home}/chat_attachments/other/keep.txt",
                                        "content": "y"}).status_code == 200
    r = c.delete("/files/delete", params={"path": folder})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == folder
    assert c.get("/files/read", params={"path": f"{folder}/notes.txt"}).status_code == 404
    assert c.get("/files/read", params={"path": f"{home}/chat_attachments/other/keep.txt"}).status_code == 200
    # Again, and for a chat that never had attachments (no chat_attachments folder at all).
    for path in (folder, f"{home}/chat_attachments/never-{uuid.uuid4().hex[:6]}"):
        again = c.delete("/files/delete", params={"path": path})
        assert again.status_code == 200, again.text
        assert again.json()["path"] == path
    fresh = clients.user("attach")
    fresh_home = fresh.get("/files/cwd").json()["home"]
    assert fresh.delete("/files/delete", params={"path": f"{fresh_home}/chat_attachments/{chat}"}).status_code == 200
    # The control: any other missing path is still 404, as Open Terminal answers.
    assert c.delete("/files/delete", params={"path": f"{home}/no-such-{chat}"}).status_code == 404
    assert c.delete("/files/delete", params={"path": f"{home}/chat_attachments/{chat}/deeper"}).status_code == 404
