"""One-turn chat: Claude Code through agentbox (POST /v1/chat/completions, streamed: the CLI in
the user's box, through the inference gateway) against the same `claude -p` run directly on the
host, both talking to the same instant fake Anthropic upstream (tests/fakes/fake_anthropic.py).
Time to first token (first text delta) and total time, alternating, medians and ratios.

Run by bench/agent_turn_bench.sh inside a network namespace with loopback only, so neither
the direct CLI nor anything else here can reach another machine.

    python3 bench/agent_turn.py AGENTBOX_BIN CLAUDE_BIN RUNS
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fakes"))
from fake_anthropic import FakeAnthropic  # noqa: E402
from agent_daemon import agent_daemon  # noqa: E402

PROMPT = "Say hello in five words."


def direct_turn(claude, fake, home):
    """`claude -p` on the host: seconds to its first text delta and to its exit."""
    env = {"PATH": os.environ["PATH"], "HOME": home, "ANTHROPIC_BASE_URL": fake.url,
           "ANTHROPIC_API_KEY": "sk-ant-bench", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "IS_SANDBOX": "1"}
    started = time.monotonic()
    first = None
    p = subprocess.Popen([claude, "-p", PROMPT, "--output-format", "stream-json", "--verbose",
                          "--include-partial-messages", "--permission-mode", "bypassPermissions"],
                         cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    for line in p.stdout:
        if first is None and b'"text_delta"' in line:
            first = time.monotonic() - started
    p.wait()
    total = time.monotonic() - started
    assert p.returncode == 0 and first is not None, f"direct claude failed ({p.returncode})"
    return first, total


def agentbox_turn(url, key, user):
    """POST /v1/chat/completions with stream: seconds to the first content delta and to [DONE]."""
    body = json.dumps({"model": "claude-code", "stream": True,
                       "messages": [{"role": "user", "content": PROMPT}]}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, method="POST", headers={
        "Authorization": f"Bearer {key}", "X-OpenWebUI-User-Id": user, "Content-Type": "application/json"})
    started = time.monotonic()
    first = None
    done = False
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
    assert done and first is not None, "agentbox turn did not stream an answer"
    return first, total


def main():
    agentbox, claude, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    work = tempfile.mkdtemp(prefix="agentbox-agentbench-")
    home = os.path.join(work, "home")
    os.mkdir(home)
    with FakeAnthropic() as fake:
        with agent_daemon(agentbox, claude, fake, work) as (url, key):
            user = "bench-user"
            # Warm both: the box starts, the CLI's first run in a home writes its config.
            agentbox_turn(url, key, user)
            direct_turn(claude, fake, home)
            results = {"direct": [], "agentbox": []}
            for _ in range(runs):
                results["direct"].append(direct_turn(claude, fake, home))
                results["agentbox"].append(agentbox_turn(url, key, user))
    med = {k: (statistics.median(f for f, _ in v), statistics.median(t for _, t in v)) for k, v in results.items()}
    print(f"one-turn chat, {runs} runs each, medians (seconds):")
    print(f"  {'':10} {'first token':>12} {'total':>8}")
    for k in ("direct", "agentbox"):
        print(f"  {k:10} {med[k][0]:12.3f} {med[k][1]:8.3f}")
    print(f"  ratio agentbox/direct: first token {med['agentbox'][0] / med['direct'][0]:.2f}x, "
          f"total {med['agentbox'][1] / med['direct'][1]:.2f}x (target <= 1.1x)")


if __name__ == "__main__":
    main()
