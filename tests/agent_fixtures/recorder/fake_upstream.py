# Scratch fake Anthropic Messages API (SSE) that scripts the answers of the recorded fixtures; listens on 127.0.0.1 only.
# usage: fake_upstream.py PORT SCENARIO REQUEST_LOG
import json, sys, os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCENARIO = sys.argv[2]
LOG = sys.argv[3]

def sse(ev, data):
    return f"event: {ev}\ndata: {json.dumps(data)}\n\n".encode()

def message(blocks, stop_reason, model):
    out = [sse("message_start", {"type": "message_start", "message": {"id": "msg_fake_%d" % os.getpid(), "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 42, "cache_creation_input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": 1}}})]
    for i, b in enumerate(blocks):
        kind = b[0]
        if kind == "text":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}))
            for piece in b[1]:
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}}))
        elif kind == "thinking":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
            for piece in b[1]:
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": piece}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJl"}}))
        elif kind == "tool_use":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": b[1], "name": b[2], "input": {}}}))
            js = json.dumps(b[3])
            for k in range(0, len(js), 12):
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": js[k:k+12]}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": {"output_tokens": 17}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)

def has_tool_result(body):
    msgs = body.get("messages", [])
    if not msgs: return False
    c = msgs[-1].get("content")
    return isinstance(c, list) and any(isinstance(x, dict) and x.get("type") == "tool_result" for x in c)

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        with open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "stream": body.get("stream"), "model": body.get("model"), "nmsg": len(body.get("messages", [])), "tool_result": has_tool_result(body)}) + "\n")
        model = body.get("model", "claude-fake")
        if SCENARIO == "error529":
            data = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).encode()
            self.send_response(529); self.send_header("content-type", "application/json"); self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data); return
        if SCENARIO == "text":
            payload = message([("text", ["Hello", " from the fake", " upstream.\nSecond line & <tags>."])], "end_turn", model)
        elif SCENARIO == "thinking":
            payload = message([("thinking", ["Let me think", " about this carefully."]), ("text", ["The answer", " is 4."])], "end_turn", model)
        elif SCENARIO.startswith(("bash", "maxturns", "denied")):
            if has_tool_result(body):
                payload = message([("text", ["I wrote report.csv", " with two rows."])], "end_turn", model)
            else:
                payload = message([("text", ["I'll create the file."]), ("tool_use", "toolu_fake_bash_1", "Bash", {"command": "printf 'a,b\\n1,2\\n' > report.csv && cat report.csv", "description": "Write \"report.csv\" <demo>"})], "tool_use", model)
        else:
            payload = message([("text", ["?"])], "end_turn", model)
        if not body.get("stream"):
            # Non-streaming side requests: a plain JSON message.
            data = json.dumps({"id": "msg_fake_ns", "type": "message", "role": "assistant", "model": model, "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()
            self.send_response(200); self.send_header("content-type", "application/json"); self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data); return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

srv = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
srv.serve_forever()
