"""What every test of Claude Code in boxes starts from: the pinned CLI, the operator's model key
(which only the daemon holds: boxes get a placeholder), and the daemon's config pointing the
gateway at the scripted upstream (tests/fakes/fake_anthropic.py). The upstream itself is the
module-scoped `fake` fixture of conftest.py."""
import pathlib
import secrets

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLAUDE = REPO / "deps" / "claude-code" / "node_modules" / ".bin" / "claude"
REAL_KEY = "sk-ant-api03-REAL-" + secrets.token_hex(16)
# The daemon's environment that gives its gateway the real key.
REAL_KEY_ENV = {"AGENTBOX_ANTHROPIC_API_KEY": REAL_KEY}

requires_claude = pytest.mark.skipif(
    not CLAUDE.exists(), reason=f"Claude Code CLI not installed at {CLAUDE} (scripts/install-deps.sh installs it)")


def agent_config(fake, **agent):
    """A daemon config whose gateway forwards to `fake`, running the pinned CLI without retries;
    `agent` adds [agent] keys (values written as TOML literals: pass strings quoted)."""
    extra = "".join(f"{k} = {v}\n" for k, v in agent.items())
    return f"""
[inference.anthropic]
upstream = "http://127.0.0.1:{fake.port}"
[agent]
claude = "{CLAUDE}"
max_retries = 0
{extra}"""
