"""Warm sessions (issue 32): a chat's follow-up turn, which its chat's warm Claude Code CLI
answers, against the first turn of the same new chat, which starts the CLI. Both through agentbox
(POST /v1/chat/completions, streamed) against the instant fake Anthropic upstream
(tests/fakes/fake_anthropic.py). Time to first token (first content delta) and total time, a new
chat per run, medians and the ratio follow-up/first (target <= 0.3x).

Run by bench/warm_turn_bench.sh inside a network namespace with loopback only.

    python3 bench/warm_turn.py AGENTBOX_BIN CLAUDE_BIN RUNS
"""
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fakes"))
from fake_anthropic import FakeAnthropic  # noqa: E402
from agent_daemon import agent_daemon  # noqa: E402


def turn(url, key, user, chat, prompt):
    """One streamed turn of chat: seconds to the first content delta and to [DONE]."""
    body = json.dumps({"model": "claude-code", "stream": True,
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, method="POST", headers={
        "Authorization": f"Bearer {key}", "X-OpenWebUI-User-Id": user, "X-OpenWebUI-Chat-Id": chat,
        "Content-Type": "application/json"})
    started = time.monotonic()
    first, done = None, False
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                done = True
                break
            delta = json.loads(data)["choices"][0]["delta"] if b'"choices"' in data else {}
            if first is None and delta.get("content"):
                first = time.monotonic() - started
    total = time.monotonic() - started
    assert done and first is not None, "the turn did not stream an answer"
    return first, total


def main():
    agentbox, claude, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    work = tempfile.mkdtemp(prefix="agentbox-warmbench-")
    with FakeAnthropic() as fake:
        with agent_daemon(agentbox, claude, fake, work) as (url, key):
            user = "bench-user"
            # The box starts and the CLI's first run in the home writes its config: not measured.
            turn(url, key, user, "warm-up", "Say hello in five words.")
            results = {"first turn": [], "follow-up": []}
            for _ in range(runs):
                chat = str(uuid.uuid4())
                results["first turn"].append(turn(url, key, user, chat, "Say hello in five words."))
                results["follow-up"].append(turn(url, key, user, chat, "And now in three."))
    med = {k: (statistics.median(f for f, _ in v), statistics.median(t for _, t in v)) for k, v in results.items()}
    print(f"a new chat's first turn and its follow-up (warm CLI), {runs} chats, medians (seconds):")
    print(f"  {'':12} {'first token':>12} {'total':>8}")
    for k in ("first turn", "follow-up"):
        print(f"  {k:12} {med[k][0]:12.3f} {med[k][1]:8.3f}")
    print(f"  ratio follow-up/first: first token {med['follow-up'][0] / med['first turn'][0]:.2f}x "
          f"(target <= 0.3x), total {med['follow-up'][1] / med['first turn'][1]:.2f}x")


if __name__ == "__main__":
    main()
