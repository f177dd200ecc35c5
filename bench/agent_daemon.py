"""An `agentbox serve` for the agent benches (bench/agent_turn.py, bench/task_turn.py): a state
directory of its own under WORK, the fake Anthropic upstream as its model API with a placeholder
key, Claude Code at CLAUDE, a uid range apart from other benches' (bench/lib.sh), and its
address and API key once it serves. Stopped when the `with` block ends.
"""
import contextlib
import os
import re
import subprocess
import time


@contextlib.contextmanager
def agent_daemon(agentbox, claude, fake, work, agent_config=""):
    """Yields (url, api_key). agent_config: further lines of its [agent] table."""
    config = os.path.join(work, "config.toml")
    with open(config, "w") as f:
        f.write(f'[inference.anthropic]\nupstream = "http://127.0.0.1:{fake.port}"\n'
                f'[agent]\nclaude = "{claude}"\n{agent_config}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    env["AGENTBOX_ANTHROPIC_API_KEY"] = "sk-ant-api03-bench"
    env["AGENTBOX_UID_BASE"] = str(2_000_000 + 65536 * (12288 + os.getpid() % 4096))  # bench/lib.sh
    log = open(os.path.join(work, "daemon.log"), "wb")
    daemon = subprocess.Popen([agentbox, "serve", "--listen", "127.0.0.1:0", "--state", os.path.join(work, "state"),
                               "--config", config], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = None
        for _ in range(300):
            m = re.search(r"serving on (http://127\.0\.0\.1:\d+)", open(log.name).read())
            if m:
                url = m.group(1)
                break
            time.sleep(0.05)
        assert url, open(log.name).read()
        yield url, open(os.path.join(work, "state", "api_key")).read().strip()
    finally:
        daemon.terminate()
        daemon.wait(30)
