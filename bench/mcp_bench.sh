#!/usr/bin/env bash
# A tools/call of `echo one` over /mcp vs the same command through POST /execute?wait=, same run,
# one daemon (issue 34; bench/mcp_bench.py measures). Target: MCP p50 <= 1.2x REST p50.
#
#   bench/mcp_bench.sh [BIN_DIR]    (default build/: agentbox, agentbox-serve, agentbox-init; root)
# Environment: MCP_BENCH_ARGS (default "--calls 300 --rounds 3"); BENCH_MAX_LOAD (1.5) and
# BENCH_MAX_WAIT (600 s): how quiet the machine should be first. Needs python3-httpx.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build}

[[ $(id -u) -eq 0 ]] || { echo "mcp_bench.sh: run as root" >&2; exit 2; }
bin=$(cd "$bin" && pwd)
[[ -x $bin/agentbox && -x $bin/agentbox-serve ]] || { echo "mcp_bench.sh: no $bin/agentbox" >&2; exit 2; }
# shellcheck disable=SC2086  # MCP_BENCH_ARGS is a list of options
exec /usr/bin/python3 "$here/mcp_bench.py" "$bin/agentbox" ${MCP_BENCH_ARGS:-}
