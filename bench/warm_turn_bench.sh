#!/usr/bin/env bash
# Warm sessions (issue 32): a chat's follow-up turn on its warm Claude Code CLI against the first
# turn of the same new chat (which starts the CLI), both through agentbox against the instant
# fake Anthropic upstream; time to first token and total, medians and the ratio (<= 0.3x).
# Everything runs in a network namespace with loopback only (`unshare -n`, lo up).
#
#   bench/warm_turn_bench.sh [BUILD_DIR]    (default: build-bench next to bench/; run as root)
# Environment: RUNS (15), NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
runs=${RUNS:-15}
claude=$root/deps/claude-code/node_modules/.bin/claude

[[ $(id -u) -eq 0 ]] || { echo "warm_turn_bench.sh: run as root" >&2; exit 2; }
[[ -x $claude ]] || { echo "warm_turn_bench.sh: no $claude (scripts/install-deps.sh installs it)" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "warm_turn_bench.sh: no $build/agentbox" >&2; exit 2; }

exec unshare -n sh -c 'ip link set lo up && exec python3 "$0" "$1" "$2" "$3"' \
  "$here/warm_turn.py" "$build/agentbox" "$claude" "$runs"
