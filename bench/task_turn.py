"""Open WebUI's title task against an agent turn (issue 32: a task's answer time <= 0.1x a
turn's): both POST /v1/chat/completions to the same daemon, the same user and chat, against the
same instant fake Anthropic upstream (tests/fakes/fake_anthropic.py). The turn runs Claude Code
in the user's box (not streamed, as Open WebUI's tasks are not); the task, sent as Open WebUI
sends it (one user message starting `### Task:` embedding the chat), is one plain Messages
call through the gateway. Alternating, medians and the ratio.

Run by bench/task_turn_bench.sh inside a network namespace with loopback only.

    python3 bench/task_turn.py AGENTBOX_BIN CLAUDE_BIN RUNS
"""
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fakes"))
from fake_anthropic import FakeAnthropic  # noqa: E402
from agent_daemon import agent_daemon  # noqa: E402

TITLE = """### Task:
Generate a concise, 3-5 word title with an emoji summarizing the chat history.
### Output:
JSON format: { "title": "your concise title here" }
### Chat History:
<chat_history>
USER: Say hello in five words.
ASSISTANT: Hello there, how are you?
</chat_history>"""


def post(url, key, user, chat, prompt):
    """A whole (not streamed) chat completion: seconds to the complete answer."""
    body = json.dumps({"model": "claude-code", "stream": False,
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, method="POST", headers={
        "Authorization": f"Bearer {key}", "X-OpenWebUI-User-Id": user, "X-OpenWebUI-Chat-Id": chat,
        "Content-Type": "application/json"})
    started = time.monotonic()
    with urllib.request.urlopen(req, timeout=120) as r:
        answer = json.loads(r.read())
    took = time.monotonic() - started
    assert answer["choices"][0]["message"]["content"], answer
    return took


def main():
    agentbox, claude, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    work = tempfile.mkdtemp(prefix="agentbox-taskbench-")
    with FakeAnthropic() as fake:
        with agent_daemon(agentbox, claude, fake, work, 'task_model = "bench-task-model"\n') as (url, key):
            user, chat = "bench-user", "bench-chat"
            post(url, key, user, chat, "Say hello in five words.")  # warm: the box starts
            post(url, key, user, chat, TITLE)
            turns, tasks = [], []
            for _ in range(runs):
                turns.append(post(url, key, user, chat, "Say hello in five words."))
                tasks.append(post(url, key, user, chat, TITLE))
            plain = [r for r in fake.messages_requests() if r.model == "bench-task-model"]
            assert len(plain) == runs + 1 and all(not r.tools for r in plain), "a task ran as a turn"
    turn, task = statistics.median(turns), statistics.median(tasks)
    load = os.getloadavg()[0]
    print(f"title task vs agent turn, {runs} runs each, one chat, medians (seconds), 1-min load {load:.1f}:")
    print(f"  agent turn  {turn:8.3f}   (min {min(turns):.3f}, max {max(turns):.3f})")
    print(f"  title task  {task:8.3f}   (min {min(tasks):.3f}, max {max(tasks):.3f})")
    print(f"  ratio task/turn: {task / turn:.3f}x (target <= 0.1x)")


if __name__ == "__main__":
    main()
