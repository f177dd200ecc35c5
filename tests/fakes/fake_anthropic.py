"""A scripted fake of the Anthropic Messages API, for tests and benchmarks that run the real
Claude Code CLI (or any SDK) without a model.

Plain HTTP on 127.0.0.1 (port 0 by default): point ANTHROPIC_BASE_URL at `fake.url`, or an
agentbox daemon's `[inference.anthropic] upstream` at it (http:// is accepted to loopback).
Answers are streamed as Server-Sent Events exactly as the real API frames them
(message_start, content_block_start/delta/stop, message_delta with usage, message_stop), or as
one JSON message when the request does not ask for a stream.

Which answer a request gets, first match wins:
  1. routes: `fake.route(predicate, reply, ...)` — a queue per predicate (e.g. per user or
     prompt), for runs that happen at the same time;
  2. the main queue: `fake.queue(reply, ...)`, consumed only by the agent's own turns
     (requests offering tools, see Request.is_agent_turn) — the CLI's side requests (a title,
     a quota probe with max_tokens 1) would otherwise eat a test's script;
  3. directives in the last user text: `[[bash: CMD]]` (a Bash tool call, then on the request
     that carries its tool_result the text "done: <the tool's output>"), `[[think]]` (a thinking
     block, then text), `[[error 529]]`, `[[slow 0.2]]` (each delta that many seconds apart),
     `[[hold]]` (stops after the first delta until `fake.release()`), `[[hold NAME]]` (the same
     until `fake.release("NAME")`, so one test can hold several runs and let them go one by
     one); without any, a short text answer quoting the prompt. This is what the standalone server gives a benchmark.

Every request is recorded (`fake.requests`, a list of Request) with its path, query, lower-case
headers, raw and parsed JSON body, the name of the reply it got and whether the client hung up
before the answer ended (`client_closed`, for interrupt tests), and when it arrived and when its
answer ended (`arrived`, `answered`: time.monotonic(), for tests of what ran after what). `fake.wait_for(predicate)`
waits for a request without sleeping in the test.

    from fake_anthropic import FakeAnthropic, text, bash, thinking, error
    with FakeAnthropic() as fake:
        fake.queue(*bash("echo hi > out.txt", then="wrote it"))
        ... run claude ...
        assert fake.agent_turns()[-1].tool_results[0]["content"] ...

Standalone: `python3 tests/fakes/fake_anthropic.py --port 8765` (prints `listening on URL`).
Only the standard library is used, so any interpreter can import it.
"""
import argparse
import dataclasses
import itertools
import json
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_USAGE = {"input_tokens": 25, "output_tokens": 10,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
HOLD_LIMIT = 60.0  # a held stream goes on by itself after this, so a forgotten release never hangs a run

_ids = itertools.count(1)


def _new_id(prefix):
    return f"{prefix}_fake{next(_ids):06d}"


# ---- what a reply is -------------------------------------------------------------------------

@dataclasses.dataclass
class Block:
    """One content block of an answer: kind is "text", "thinking" or "tool_use"."""
    kind: str
    text: str = ""                   # text or thinking
    name: str = ""                   # tool_use: the tool
    input: dict = dataclasses.field(default_factory=dict)  # tool_use: its arguments
    id: str = ""                     # tool_use: filled in when sent unless given


@dataclasses.dataclass
class Reply:
    """One answer. status != 200 makes it an Anthropic-shaped error (error_type, message).

    chunk_delay: seconds between deltas (a slow stream); hold: after the first delta, wait for
    fake.release() (at most HOLD_LIMIT s). times: how many requests it answers (None: every
    one from now on, e.g. an upstream that stays overloaded through the CLI's retries)."""
    blocks: list = dataclasses.field(default_factory=list)
    status: int = 200
    error_type: str = ""
    message: str = ""
    stop_reason: str = "end_turn"
    chunk_delay: float = 0.0
    chunk_size: int = 16
    hold: bool = False
    gate: str = ""                   # hold: released by fake.release(gate) ("": by fake.release())
    usage: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_USAGE))
    times: "int | None" = 1
    should_retry: bool = False       # error: the x-should-retry header (false: the CLI gives up at once)
    name: str = ""                   # shown in Request.reply_name (defaults to a description)

    def describe(self):
        if self.name:
            return self.name
        if self.status != 200:
            return f"error {self.status} {self.error_type}"
        return "+".join(b.kind for b in self.blocks) or "empty"


def text(answer, **kw):
    """A plain text answer."""
    return Reply(blocks=[Block("text", text=answer)], **kw)


def thinking(thought, answer, **kw):
    """A thinking block (with a signature, as extended thinking sends), then a text block."""
    return Reply(blocks=[Block("thinking", text=thought), Block("text", text=answer)], **kw)


def tool_use(name, tool_input, *, preamble="", **kw):
    """A call of tool `name` with tool_input (stop_reason tool_use); preamble: text before it."""
    blocks = [Block("text", text=preamble)] if preamble else []
    blocks.append(Block("tool_use", name=name, input=dict(tool_input)))
    return Reply(blocks=blocks, stop_reason="tool_use", **kw)


def bash(command, *, then="done", description="run a command", **kw):
    """Claude Code's Bash tool running command, then (on the request carrying the tool's result)
    the text answer `then`. Returns the two replies, for queue(*bash(...)) or route(p, *bash(...))."""
    return [tool_use("Bash", {"command": command, "description": description}, **kw), text(then)]


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                500: "api_error", 529: "overloaded_error"}


def error(status=529, error_type=None, message=None, **kw):
    """An error answer with the API's JSON shape: {"type":"error","error":{"type","message"}}."""
    error_type = error_type or _ERROR_TYPES.get(status, "api_error")
    return Reply(status=status, error_type=error_type,
                 message=message or error_type.replace("_", " ").capitalize(), **kw)


def slow(reply, chunk_delay=0.2, chunk_size=4):
    """The same reply, streamed in small deltas chunk_delay seconds apart."""
    return dataclasses.replace(reply, chunk_delay=chunk_delay, chunk_size=chunk_size)


def held(reply, gate=""):
    """The same reply, stopped after its first delta until fake.release() (fake.release(gate))."""
    return dataclasses.replace(reply, hold=True, gate=gate)


# ---- what a request was ----------------------------------------------------------------------

@dataclasses.dataclass
class Request:
    method: str
    path: str                        # without the query
    query: dict                      # name -> first value
    headers: dict                    # lower-case names
    raw: bytes
    body: "dict | None"              # the JSON body, None if it was not JSON
    reply_name: str = ""
    client_closed: bool = False      # the client went away before the answer ended
    arrived: float = dataclasses.field(default_factory=time.monotonic)
    answered: "float | None" = None  # when the answer ended (or the client left)
    done: threading.Event = dataclasses.field(default_factory=threading.Event, repr=False)

    @property
    def is_messages(self):
        return self.method == "POST" and self.path.rstrip("/").endswith("/v1/messages")

    @property
    def stream(self):
        return bool(self.body and self.body.get("stream"))

    @property
    def model(self):
        return (self.body or {}).get("model", "")

    @property
    def tools(self):
        """Names of the tools the request offers."""
        return [t.get("name", "") for t in (self.body or {}).get("tools", []) or []]

    @property
    def is_agent_turn(self):
        """A turn of the agent's loop (it offers tools), not a side request such as a title."""
        return self.is_messages and bool(self.tools)

    @property
    def messages(self):
        return (self.body or {}).get("messages", []) or []

    @property
    def system_text(self):
        system = (self.body or {}).get("system", "")
        if isinstance(system, str):
            return system
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))

    def texts(self, role="user"):
        """Every text of role's messages, in order (string contents and text blocks)."""
        out = []
        for m in self.messages:
            if m.get("role") != role:
                continue
            content = m.get("content")
            if isinstance(content, str):
                out.append(content)
            else:
                out += [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        return out

    @property
    def last_user_text(self):
        """The text of the last user message that has any (a tool result alone has none), without
        the <system-reminder> blocks the CLI puts before the prompt: what the user typed."""
        for m in reversed(self.messages):
            if m.get("role") != "user":
                continue
            content = m.get("content")
            if isinstance(content, str):
                return content
            parts = [b.get("text", "") for b in content or [] if b.get("type") == "text"
                     and not b.get("text", "").lstrip().startswith("<system-reminder>")]
            if parts:
                return "\n".join(parts)
        return ""

    @property
    def tool_results(self):
        """The tool_result blocks of the last message (what the client sends after a tool call)."""
        if not self.messages:
            return []
        content = self.messages[-1].get("content")
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []

    def all_text(self):
        """Everything the request says in words (system, messages, tool descriptions), for
        `"name" in r.all_text()` checks."""
        return json.dumps(self.body or {}, ensure_ascii=False)


def tool_result_text(block):
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(c.get("text", "") for c in content if isinstance(c, dict))


# ---- the server ------------------------------------------------------------------------------

class FakeAnthropic:
    """The fake, started at construction. Use as a context manager or call close()."""

    def __init__(self, host="127.0.0.1", port=0, *, quiet=True):
        self.requests = []
        self._lock = threading.Condition()
        self._routes = []            # [predicate, [Reply, ...]]
        self._queue = []
        self._release = threading.Event()
        self._gates = {}             # name -> Event, for [[hold NAME]]
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                if not quiet:
                    sys.stderr.write("fake_anthropic: " + fmt % args + "\n")

            def do_GET(self):
                fake._handle(self, "GET")

            def do_POST(self):
                fake._handle(self, "POST")

            # Recorded like the rest (and answered 404), so a test can show such a request
            # never arrived.
            def do_DELETE(self):
                fake._handle(self, "DELETE")

            def do_PUT(self):
                fake._handle(self, "PUT")

            def do_PATCH(self):
                fake._handle(self, "PATCH")

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # -- scripting

    def queue(self, *replies):
        """Answers for the agent's next turns, in order."""
        with self._lock:
            self._queue += list(replies)

    def route(self, predicate, *replies):
        """Answers for requests for which predicate(Request) is true, in order (checked before
        the main queue; a route with nothing left is skipped)."""
        with self._lock:
            self._routes.append([predicate, list(replies)])

    def release(self, gate=None):
        """Lets held streams go on: all of them, or those held by [[hold GATE]]."""
        if gate is not None:
            self._gate(gate).set()
            return
        self._release.set()
        with self._lock:
            for event in self._gates.values():
                event.set()

    def _gate(self, name):
        if not name:
            return self._release
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def reset(self):
        """Forgets the script and the recorded requests (between tests sharing one fake)."""
        with self._lock:
            self._routes, self._queue, self.requests = [], [], []
            self._release = threading.Event()
            self._gates = {}

    # -- reading what arrived

    def messages_requests(self):
        with self._lock:
            return [r for r in self.requests if r.is_messages]

    def agent_turns(self):
        with self._lock:
            return [r for r in self.requests if r.is_agent_turn]

    def wait_for(self, predicate=lambda r: True, timeout=30.0, *, finished=False):
        """The first recorded request for which predicate holds (once answered if finished);
        AssertionError after timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for r in self.requests:
                    if predicate(r):
                        if finished:
                            self._lock.release()
                            try:
                                ok = r.done.wait(max(0.0, deadline - time.monotonic()))
                            finally:
                                self._lock.acquire()
                            assert ok, f"request to {r.path} not finished in {timeout} s"
                        return r
                left = deadline - time.monotonic()
                assert left > 0, f"no such request in {timeout} s; got {[r.path for r in self.requests]}"
                self._lock.wait(left)

    def close(self):
        self.release()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- answering

    def _pick(self, request):
        with self._lock:
            for route in self._routes:
                predicate, replies = route
                if replies and predicate(request):
                    return self._take(replies, request)
            if request.is_agent_turn and self._queue:
                return self._take(self._queue, request)
        return self._from_directives(request)

    def _take(self, replies, request):
        reply = replies[0]
        if reply.times is not None:
            if reply.times <= 1:
                replies.pop(0)
            else:
                replies[0] = dataclasses.replace(reply, times=reply.times - 1)
        return reply

    def _from_directives(self, request):
        prompt = request.last_user_text
        if not request.is_messages:
            return text("")
        if not request.is_agent_turn:  # a side request (title, quota probe): a short plain answer
            return text("Fake title", name="side request")
        m = re.search(r"\[\[error (\d{3})\]\]", prompt)
        if m:
            return error(int(m.group(1)))
        reply = text("fake answer to: " + prompt[:200])
        if request.tool_results:
            results = "\n".join(tool_result_text(b) for b in request.tool_results)
            reply = text("done: " + results[:2000])
        elif (m := re.search(r"\[\[bash: (.+?)\]\]", prompt, re.S)):
            reply = bash(m.group(1))[0]
        elif "[[think]]" in prompt:
            reply = thinking("Let me think about: " + prompt[:100], "thought about it")
        if (m := re.search(r"\[\[slow ([0-9.]+)\]\]", prompt)):
            reply = slow(reply, float(m.group(1)))
        if "[[hold]]" in prompt:
            reply = held(reply)
        elif (m := re.search(r"\[\[hold ([\w.-]+)\]\]", prompt)):
            reply = held(reply, m.group(1))
        return reply

    def _handle(self, handler, method):
        raw = _read_body(handler)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        url = urllib.parse.urlsplit(handler.path)
        request = Request(method=method, path=url.path,
                          query={k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()},
                          headers={k.lower(): v for k, v in handler.headers.items()}, raw=raw, body=body)
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()
        try:
            self._answer(handler, request)
        except (BrokenPipeError, ConnectionResetError):
            request.client_closed = True
            handler.close_connection = True
        finally:
            request.answered = time.monotonic()
            request.done.set()
            with self._lock:
                self._lock.notify_all()

    def _answer(self, handler, request):
        if request.method == "POST" and request.path.rstrip("/").endswith("/v1/messages/count_tokens"):
            request.reply_name = "count_tokens"
            return _send_json(handler, 200, {"input_tokens": max(1, len(request.raw) // 4)})
        if not request.is_messages:
            request.reply_name = "not found"
            return _send_json(handler, 404, {"type": "error", "error": {
                "type": "not_found_error", "message": f"fake_anthropic has no {request.method} {request.path}"}})
        if not isinstance(request.body, dict):
            request.reply_name = "bad json"
            return _send_json(handler, 400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": "body is not JSON"}})
        reply = self._pick(request)
        request.reply_name = reply.describe()
        if reply.status != 200:
            return _send_json(handler, reply.status, {"type": "error", "error": {
                "type": reply.error_type, "message": reply.message}},
                {"x-should-retry": "true" if reply.should_retry else "false"})
        blocks = [dataclasses.replace(b, id=b.id or _new_id("toolu")) for b in reply.blocks]
        message = {"id": _new_id("msg"), "type": "message", "role": "assistant",
                   "model": request.model or "claude-fake", "stop_sequence": None}
        if request.stream:
            self._stream(handler, reply, blocks, message)
        else:
            message.update(content=[_full_block(b) for b in blocks], stop_reason=reply.stop_reason,
                           usage=reply.usage)
            _send_json(handler, 200, message)

    def _stream(self, handler, reply, blocks, message):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("request-id", _new_id("req"))
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def event(name, data):
            chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.flush()

        start_usage = dict(reply.usage, output_tokens=1)
        event("message_start", {"type": "message_start", "message": dict(
            message, content=[], stop_reason=None, usage=start_usage)})
        first_delta = True
        for index, b in enumerate(blocks):
            event("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": _empty_block(b)})
            for delta in _deltas(b, reply.chunk_size):
                if not first_delta and reply.chunk_delay:
                    time.sleep(reply.chunk_delay)
                event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                if first_delta and reply.hold:
                    self._gate(reply.gate).wait(HOLD_LIMIT)
                first_delta = False
            event("content_block_stop", {"type": "content_block_stop", "index": index})
        event("message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                                "usage": {"output_tokens": reply.usage.get("output_tokens", 0)}})
        event("message_stop", {"type": "message_stop"})
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()


def _read_body(handler):
    """The request's body, by its Content-Length or chunked."""
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        raw = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return raw
            raw += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _empty_block(b):
    if b.kind == "text":
        return {"type": "text", "text": ""}
    if b.kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {"type": "tool_use", "id": b.id, "name": b.name, "input": {}}


def _full_block(b):
    if b.kind == "text":
        return {"type": "text", "text": b.text}
    if b.kind == "thinking":
        return {"type": "thinking", "thinking": b.text, "signature": "fake-signature"}
    return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}


def _pieces(s, size):
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]


def _deltas(b, size):
    if b.kind == "text":
        return [{"type": "text_delta", "text": p} for p in _pieces(b.text, size)]
    if b.kind == "thinking":
        return [{"type": "thinking_delta", "thinking": p} for p in _pieces(b.text, size)] + \
            [{"type": "signature_delta", "signature": "fake-signature"}]
    return [{"type": "input_json_delta", "partial_json": p} for p in _pieces(json.dumps(b.input), size)]


def _send_json(handler, status, obj, headers=None):
    data = json.dumps(obj).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("request-id", _new_id("req"))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
    handler.wfile.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description="A fake Anthropic Messages API (answers by directives in the prompt)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = p.parse_args(argv)
    fake = FakeAnthropic(args.host, args.port, quiet=not args.verbose)
    print(f"listening on {fake.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.close()


if __name__ == "__main__":
    main()
