"""Claude Code as an OpenAI-compatible model (issue 15, API.md Part B): Open WebUI adds agentbox
as an OpenAI connection, gets the `claude-code` model, and each chat's turns run the real CLI in
the user's own box, in ~/chats/<chat>, resuming the chat's Claude session.

The CLI (installed by scripts/install-deps.sh) talks through the daemon's inference gateway to a
scripted fake Anthropic upstream (tests/fakes/fake_anthropic.py); what the fake answers is
chosen by directives in the prompt ([[bash: CMD]], [[think]], [[error 529]], [[hold]]).
"""
import json
import pathlib
import re
import subprocess
import threading
import time
import urllib.parse
import uuid

import httpx
import pytest

from conftest import running_daemon, sh
from agent_support import REAL_KEY, REAL_KEY_ENV, agent_config, requires_claude


pytestmark = requires_claude


@pytest.fixture(scope="module")
def adaemon(fake):
    with running_daemon("agent", config_text=agent_config(fake), env=REAL_KEY_ENV) as d:
        yield d


def client(d, user=None, chat=None, **kw):
    headers = {}
    if chat is not None:
        headers["X-OpenWebUI-Chat-Id"] = chat
    c = d.client(timeout=httpx.Timeout(120.0), **kw)
    if user is not None:
        c.headers["X-OpenWebUI-User-Id"] = user  # as Open WebUI sends it to an OpenAI connection
    c.headers.update(headers)
    return c


def new_user():
    return f"chat-{uuid.uuid4().hex[:8]}"


def ask(c, prompt, stream=False, **extra):
    body = {"model": "claude-code", "stream": stream, "messages": [{"role": "user", "content": prompt}], **extra}
    return c.post("/v1/chat/completions", json=body)


def stream_chunks(c, prompt, on_chunk=None, **extra):
    """POST with stream=true; returns (chunks, saw_done)."""
    body = {"model": "claude-code", "stream": True, "messages": [{"role": "user", "content": prompt}], **extra}
    chunks, done = [], False
    with c.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in (l.rstrip("\r\n") for l in r.iter_lines()):
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                done = True
                continue
            chunk = json.loads(data)
            chunks.append(chunk)
            if on_chunk and on_chunk(chunk):
                break
    return chunks, done


def content_of(chunks):
    return "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch.get("choices"))


def reasoning_of(chunks):
    return "".join(ch["choices"][0]["delta"].get("reasoning_content") or "" for ch in chunks if ch.get("choices"))


def turns_with(fake, needle):
    return [r for r in fake.agent_turns() if needle in r.all_text()]


def test_models_lists_claude_code(adaemon):
    with client(adaemon, user=new_user()) as c:
        r = c.get("/v1/models")
        assert r.status_code == 200
        assert [m["id"] for m in r.json()["data"]] == ["claude-code", "claude-code-edits", "claude-code-plan", "claude-code-ask"]


def test_a_plain_answer_whole_and_the_operators_key_upstream(adaemon, fake):
    m = "plain-" + uuid.uuid4().hex[:8]
    with client(adaemon, user=new_user(), chat=str(uuid.uuid4())) as c:
        r = ask(c, f"say hello {m}")
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["object"] == "chat.completion"
        text = answer["choices"][0]["message"]["content"]
        assert f"fake answer to: say hello {m}" in text
        assert answer["usage"]["completion_tokens"] > 0
    turn = turns_with(fake, m)[-1]
    assert turn.headers.get("x-api-key") == REAL_KEY  # the operator's key, never the placeholder
    assert "authorization" not in turn.headers


def test_a_bash_turn_streams_its_tool_block_and_links_the_file_it_made(adaemon, fake):
    user, chat = new_user(), "chat/" + uuid.uuid4().hex[:6]  # a chat id that is not a plain name
    m = uuid.uuid4().hex[:8]
    with client(adaemon, user=user, chat=chat) as c:
        chunks, done = stream_chunks(c, f"make the report [[bash: printf 'a,b\\n1,{m}\\n' > report.csv && id -un]]")
        assert done, "the stream ends with data: [DONE]"
        content = content_of(chunks)
        assert '<details type="tool_calls" done="true"' in content, content
        assert "Bash" in content and "report.csv" in content
        assert "done: " in content  # the model's answer after the tool ran
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert any(ch.get("usage") for ch in chunks), "a final usage chunk"
        assert not any(ch["choices"][0]["delta"].get("tool_calls") for ch in chunks if ch.get("choices"))

        # The command really ran in the user's box, as the user, in the chat's directory.
        code, out, _ = sh(c, "cat chats/*/report.csv; stat -c %U chats/*/report.csv; ls chats")
        assert code == 0 and f"1,{m}" in out, out
        assert ".." not in out and "/" not in out.split()[-1]

        # The link downloads it without the API key; without its token, for another user or for
        # another path it opens nothing.
        link = re.search(r"\[report\.csv\]\((http[^)]+)\)", content)
        assert link, content
        url = urllib.parse.urlsplit(link.group(1))
        q = urllib.parse.parse_qs(url.query)
        bare = httpx.Client(base_url=adaemon.url)
        ok = bare.get(url.path, params={k: v[0] for k, v in q.items()})
        assert ok.status_code == 200 and ok.text == f"a,b\n1,{m}\n", ok.text
        no_token = {k: v[0] for k, v in q.items() if k != "token"}
        assert bare.get(url.path, params=no_token).status_code == 401
        other_user = {**{k: v[0] for k, v in q.items()}, "user_id": new_user()}
        assert bare.get(url.path, params=other_user).status_code == 401
        other_path = {**{k: v[0] for k, v in q.items()}, "path": q["path"][0].replace("report.csv", "other.csv")}
        assert bare.get(url.path, params=other_path).status_code == 401
        # A user header cannot turn the link into someone else's.
        assert bare.get(url.path, params={k: v[0] for k, v in q.items()},
                        headers={"X-User-Id": new_user()}).text == f"a,b\n1,{m}\n"
        bare.close()


def test_a_link_names_this_daemon_never_the_host_the_request_claims(adaemon, fake):
    """Without [agent] public_url the links took their host from the request's Host header (and
    their scheme from X-Forwarded-Proto): whoever sends or relays the request chose where the
    user's browser takes a signed token. Now they name the address the request arrived at."""
    user, chat = new_user(), str(uuid.uuid4())
    m = uuid.uuid4().hex[:8]
    with client(adaemon, user=user, chat=chat) as c:
        c.headers["Host"] = "evil.example"
        c.headers["X-Forwarded-Proto"] = "https"
        chunks, done = stream_chunks(c, f"make it [[bash: printf {m} > found.txt]]")
    assert done
    content = content_of(chunks)
    link = re.search(r"\[found\.txt\]\((http[^)]+)\)", content)
    assert link, content
    assert "evil.example" not in content
    url = urllib.parse.urlsplit(link.group(1))
    assert (url.scheme, url.netloc) == ("http", f"127.0.0.1:{adaemon.port}"), link.group(1)
    with httpx.Client() as bare:
        assert bare.get(link.group(1)).text == m


def test_two_turns_of_a_chat_resume_and_another_chat_does_not(adaemon, fake):
    user, chat = new_user(), str(uuid.uuid4())
    first, second, third = ("one-" + uuid.uuid4().hex[:6], "two-" + uuid.uuid4().hex[:6],
                            "three-" + uuid.uuid4().hex[:6])
    with client(adaemon, user=user, chat=chat) as c:
        assert ask(c, f"remember {first}").status_code == 200
        assert ask(c, f"and now {second}").status_code == 200
    turn = turns_with(fake, second)[-1]
    assert first in turn.all_text(), "the second turn carries the first (the session was resumed)"
    with client(adaemon, user=user, chat=str(uuid.uuid4())) as c:
        assert ask(c, f"fresh {third}").status_code == 200
    assert first not in turns_with(fake, third)[-1].all_text()


def test_thinking_streams_as_reasoning_content(adaemon):
    with client(adaemon, user=new_user(), chat=str(uuid.uuid4())) as c:
        chunks, done = stream_chunks(c, "ponder [[think]]")
    assert done
    assert "Let me think about" in reasoning_of(chunks)
    assert "thought about it" in content_of(chunks)


def test_an_overloaded_upstream_is_readable_text_not_a_broken_stream(adaemon):
    with client(adaemon, user=new_user(), chat=str(uuid.uuid4())) as c:
        chunks, done = stream_chunks(c, "fail please [[error 529]]")
    assert done, "the stream still ends properly"
    content = content_of(chunks)
    assert re.search(r"(?i)overload|529|error", content), content


def test_closing_the_stream_stops_the_turn(adaemon, fake):
    user, chat = new_user(), str(uuid.uuid4())
    m, later = "hold-" + uuid.uuid4().hex[:6], "later-" + uuid.uuid4().hex[:6]
    with client(adaemon, user=user, chat=chat) as c:
        # The fake stops after its first delta: the client leaves there.
        stream_chunks(c, f"a long one {m} [[hold {m}]]", on_chunk=lambda ch: bool(content_of([ch])))
        # The held answer is never released: the chat's next turn (one run per chat) runs only
        # because the left turn was stopped. Its CLI stays for the chat (a warm session).
        started = time.monotonic()
        r = ask(c, f"and {later}")
        assert r.status_code == 200 and later in r.json()["choices"][0]["message"]["content"], r.text
        assert time.monotonic() - started < 30
        procs = [p for p in c.get("/execute").json() if p["command"].startswith("claude")]
        assert len(procs) == 1 and procs[0]["status"] == "running", procs
    fake.release(m)


def test_two_users_run_at_once_each_in_their_own_box_and_home(adaemon):
    results = {}

    def turn(user):
        with client(adaemon, user=user, chat=str(uuid.uuid4())) as c:
            r = ask(c, "where am I [[bash: id -un; pwd]]")
            results[user] = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text

    users = [new_user(), new_user()]
    threads = [threading.Thread(target=turn, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    names = []
    for u in users:
        with client(adaemon, user=u) as c:
            names.append(sh(c, "id -un")[1].strip())
    for u, name, other in zip(users, names, reversed(names)):
        assert f"/home/{name}/chats/" in results[u] and name in results[u], results[u]
        assert other not in results[u]


def test_native_runs_stream_the_clis_own_events_and_an_exit(adaemon):
    with client(adaemon, user=new_user(), chat=str(uuid.uuid4())) as c:
        events = []
        with c.stream("POST", "/agent/runs", json={"prompt": "native hello"}) as r:
            assert r.status_code == 200
            name = None
            for line in (l.rstrip("\r\n") for l in r.iter_lines()):
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: "):
                    events.append((name, line[len("data: "):]))
    kinds = [json.loads(d).get("type") for n, d in events if n == "claude"]
    assert "system" in kinds and "result" in kinds, events
    assert events[-1][0] == "exit", events[-1]


def openai_error(r, status):
    """The error as OpenAI's clients read it: the status picks the error class, the body's
    {"error": {...}} gives message, type and code (and nothing else is there)."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert list(body) == ["error"], body
    e = body["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    assert isinstance(e["message"], str) and e["message"], e
    assert isinstance(e["type"], str) and isinstance(e["code"], str), e
    return e


def test_errors_under_v1_are_shaped_as_openais_and_the_rest_keep_a_detail(adaemon):
    one = [{"role": "user", "content": "x"}]
    with client(adaemon, user=new_user()) as c:
        e = openai_error(c.post("/v1/chat/completions", json={"model": "claude-code", "messages": []}), 400)
        assert e["type"] == "invalid_request_error"
        e = openai_error(c.post("/v1/chat/completions", json={"model": "gpt-9", "messages": one}), 404)
        assert e["code"] == "model_not_found" and "claude-code" in e["message"]
        e = openai_error(c.post("/v1/chat/completions", content=b"{not json",
                                headers={"Content-Type": "application/json"}), 400)
        assert e["type"] == "invalid_request_error"
        e = openai_error(c.post("/v1/chat/completions", json=["a list"]), 400)  # a 422 elsewhere
        assert "object" in e["message"]
        e = openai_error(c.post("/v1/chat/completions", json={"model": "claude-code", "messages": one,
                                                               "max_turns": 0}), 400)
        assert "max_turns" in e["message"]
        openai_error(c.get("/v1/no-such-thing"), 404)
        e = openai_error(c.delete("/v1/models"), 405)
        assert e["code"] == "method_not_allowed"
        # The rest of the API is unchanged.
        r = c.get("/files/read", params={"path": "no-such-file"})
        assert r.status_code == 404 and list(r.json()) == ["detail"]
    with adaemon.client() as c:  # no user
        openai_error(c.post("/v1/chat/completions", json={"messages": one}), 400)
    with adaemon.client(key="not-the-key") as c:
        for r in (c.get("/v1/models"), c.post("/v1/chat/completions", json={"messages": one})):
            e = openai_error(r, 401)
            assert e["code"] == "invalid_api_key" and r.headers["www-authenticate"] == "Bearer"
        r = c.get("/files/list")
        assert r.status_code == 401 and list(r.json()) == ["detail"]


def test_a_chat_resumes_after_a_daemon_restart(make_daemon, fake):
    d = make_daemon(tag="agent-restart", config_text=agent_config(fake), env=REAL_KEY_ENV,
                    lifetime=300).start()
    user, chat = new_user(), str(uuid.uuid4())
    first, second = "before-" + uuid.uuid4().hex[:6], "after-" + uuid.uuid4().hex[:6]
    with client(d, user=user, chat=chat) as c:
        assert ask(c, f"remember {first}").status_code == 200
    assert d.stop() == 0
    d.start()
    with client(d, user=user, chat=chat) as c:
        assert ask(c, f"then {second}").status_code == 200
    assert first in turns_with(fake, second)[-1].all_text()


def test_the_callers_sessions_and_transcripts_and_no_one_elses(adaemon):
    user, chat = new_user(), uuid.uuid4().hex
    m = "transcript-" + uuid.uuid4().hex[:6]
    with client(adaemon, user=user, chat=chat) as c:
        assert ask(c, f"keep {m}").status_code == 200
        sessions = c.get("/agent/sessions").json()["sessions"]
        mine = [s for s in sessions if s["chat"] == chat]
        assert len(mine) == 1 and m in mine[0]["title"], sessions
        t = c.get(f"/agent/sessions/{mine[0]['id']}").json()
        assert t["chat"] == chat
        assert t["messages"][0]["role"] == "user" and m in json.dumps(t["messages"][0]["content"])
        assert any(x["role"] == "assistant" and f"fake answer to: keep {m}" in json.dumps(x["content"])
                   for x in t["messages"])
    with client(adaemon, user=new_user()) as other:
        assert other.get("/agent/sessions").json()["sessions"] == []
        assert other.get(f"/agent/sessions/{mine[0]['id']}").status_code == 404
        assert other.get("/agent/sessions/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_open_webuis_title_task_is_no_agent_turn_and_does_not_enter_the_chats_session(adaemon, fake):
    user, chat = new_user(), str(uuid.uuid4())
    first, task, later = ("topic-" + uuid.uuid4().hex[:6], "title-" + uuid.uuid4().hex[:6],
                          "later-" + uuid.uuid4().hex[:6])
    with client(adaemon, user=user, chat=chat) as c:
        assert ask(c, f"talk about {first}").status_code == 200
        assert ask(c, f"### Task:\nGenerate a concise title {task}").status_code == 200
        assert ask(c, f"go on {later}").status_code == 200
    assert turns_with(fake, task) == []  # no agent turn: one plain call (test_agent_tasks.py)
    resumed = turns_with(fake, later)[-1].all_text()
    assert first in resumed and task not in resumed


def test_a_session_the_cli_no_longer_knows_starts_the_chat_afresh(adaemon, fake):
    user, chat = new_user(), str(uuid.uuid4())
    first, second = "gone-" + uuid.uuid4().hex[:6], "anew-" + uuid.uuid4().hex[:6]
    with client(adaemon, user=user, chat=chat) as c:
        assert ask(c, f"remember {first}").status_code == 200
        assert sh(c, "rm -f ~/.claude/projects/*/*.jsonl")[0] == 0  # the transcript is gone
        # and so is the chat's warm CLI (which still knows the session): the next one resumes.
        for p in c.get("/execute").json():
            if p["command"].startswith("claude") and p["status"] == "running":
                assert c.delete(f"/execute/{p['id']}").status_code == 200
        r = ask(c, f"and {second}")
        assert r.status_code == 200, r.text
        assert f"fake answer to: and {second}" in r.json()["choices"][0]["message"]["content"]
    assert first not in turns_with(fake, second)[-1].all_text()


def test_an_attached_image_is_a_file_of_the_chat_named_in_the_prompt(adaemon, fake):
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    m = "img-" + uuid.uuid4().hex[:6]
    with client(adaemon, user=new_user(), chat=str(uuid.uuid4())) as c:
        body = {"model": "claude-code", "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"describe {m}"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png}}]}]}
        r = c.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        code, out, _ = sh(c, "cat chats/*/attachment-1.png | base64 -w0")
        assert code == 0 and out.strip() == png
    assert "attachment-1.png" in turns_with(fake, m)[-1].all_text()


def test_a_request_can_narrow_the_tools_and_a_tool_outside_them_does_not_run(adaemon):
    m = uuid.uuid4().hex[:8]
    with client(adaemon, user=new_user(), chat=str(uuid.uuid4())) as c:
        r = ask(c, f"[[bash: touch made-{m}]]", allowed_tools=["Read"])
        assert r.status_code == 200, r.text
        assert sh(c, f"ls chats/*/made-{m}")[0] != 0, "Bash was not among the allowed tools"
        # Control: without the list the same turn runs the command.
        assert ask(c, f"[[bash: touch made-{m}]]").status_code == 200
        assert sh(c, f"ls chats/*/made-{m}")[0] == 0
        assert ask(c, "x", max_turns=0).status_code == 400
        assert ask(c, "x", allowed_tools="Bash").status_code == 400


def test_an_attached_file_is_written_into_the_chat_under_a_plain_name(adaemon, fake):
    m = "file-" + uuid.uuid4().hex[:6]
    with client(adaemon, user=new_user(), chat=str(uuid.uuid4())) as c:
        body = {"model": "claude-code", "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"summarize {m}"},
            {"type": "file", "file": {"filename": "../../q3 sales.csv", "file_data": "data:text/csv;base64,cmVnaW9uLHRvdGFsCg=="}}]}]}
        r = c.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        code, out, _ = sh(c, "cat chats/*/1-q3_sales.csv; ls ~ | grep -c sales || true")
        assert code == 0 and out.startswith("region,total\n"), out
        assert out.strip().endswith("0")  # nothing landed outside the chat's directory
    assert "1-q3_sales.csv" in turns_with(fake, m)[-1].all_text()


OPENAI_CLIENT = pathlib.Path(__file__).parent / "openai_client"


def test_the_official_openai_client_reads_answers_and_errors(adaemon):
    """What an OpenAI-compatible tool sees, through the official `openai` npm client: the model
    list, a whole and a streamed answer, and each error as the APIError subclass its status
    names, with the message, type and code agentbox sent."""
    assert (OPENAI_CLIENT / "node_modules" / "openai").is_dir(), "scripts/install-deps.sh installs it"
    run = subprocess.run(["node", str(OPENAI_CLIENT / "calls.mjs"), adaemon.url, adaemon.api_key, new_user()],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    got = {c["name"]: c for c in map(json.loads, run.stdout.splitlines())}
    assert got["models"]["data"] == ["claude-code", "claude-code-edits", "claude-code-plan", "claude-code-ask"], got["models"]
    for name in ("answer", "streamed"):
        assert got[name]["ok"] and "fake answer to: say hello from the official client" in got[name]["content"], got[name]
    expected = {
        "empty_messages": ("BadRequestError", 400, "invalid_request_error"),
        "unknown_model": ("NotFoundError", 404, "invalid_request_error"),
        "bad_key": ("AuthenticationError", 401, "invalid_request_error"),
    }
    for name, (cls, status, kind) in expected.items():
        e = got[name]
        assert not e["ok"] and e["api_error"], e
        assert (e["class"], e["status"], e["type"]) == (cls, status, kind), e
        assert e["message"].startswith(f"{status} "), e  # the client's "<status> <our message>"
    assert got["unknown_model"]["code"] == "model_not_found"
    assert got["bad_key"]["code"] == "invalid_api_key"


def test_a_session_reads_as_markdown_with_its_bash_call_folded(adaemon):
    """GET /agent/sessions/{id}?format=markdown: the chat as people read it, its Bash call folded
    with the command and its output, the ``` in that output kept inside a longer fence."""
    user, chat = new_user(), uuid.uuid4().hex
    m = uuid.uuid4().hex[:8]
    command = f"printf 'out-{m}\\n```\\nend\\n'"
    with client(adaemon, user=user, chat=chat) as c:
        assert ask(c, f"show it [[bash: {command}]]").status_code == 200
        sid = [s for s in c.get("/agent/sessions").json()["sessions"] if s["chat"] == chat][0]["id"]
        r = c.get(f"/agent/sessions/{sid}", params={"format": "markdown"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "text/markdown; charset=utf-8"
        md = r.text
        assert md.startswith(f"# Claude Code session `{sid}`\n"), md
        assert f"- Chat: `{chat}`\n" in md and "- Model: `" in md, md
        assert re.search(r"\n## User · \d\d:\d\d:\d\d\n\nshow it \[\[bash: ", md), md
        summary = command.replace("'", "&#39;")
        assert f"<details>\n<summary>Bash: {summary}</summary>\n\n````sh\n{command}\n````\n" in md, md
        assert f"Output:\n\n````text\nout-{m}\n```\nend\n````\n\n</details>\n" in md, md
        assert f"done: out-{m}" in md, md
        # The JSON form is what it was, also when asked for by name; another format is refused.
        plain = c.get(f"/agent/sessions/{sid}")
        assert plain.headers["content-type"].startswith("application/json")
        assert plain.json() == c.get(f"/agent/sessions/{sid}", params={"format": "json"}).json()
        assert any(f"out-{m}" in json.dumps(x["content"]) for x in plain.json()["messages"])
        bad = c.get(f"/agent/sessions/{sid}", params={"format": "html"})
        assert bad.status_code == 422 and "markdown" in bad.json()["detail"], bad.text
    with client(adaemon, user=new_user()) as other:
        assert other.get(f"/agent/sessions/{sid}", params={"format": "markdown"}).status_code == 404
