#!/usr/bin/env bash
# The first command of a new chat in an isolation = "context" profile vs the first command of a
# known user whose box has stopped, same run, one daemon (issue 35; bench/context_start.py).
# Target: new chat p50 <= 1.5x.
#
#   bench/context_start.sh [BIN_DIR]    (default build/; root)
# Environment: CONTEXT_BENCH_ARGS (default "--rounds 15"); BENCH_MAX_LOAD (1.5) and
# BENCH_MAX_WAIT (600 s): how quiet the machine should be first. Needs python3-httpx.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build}

[[ $(id -u) -eq 0 ]] || { echo "context_start.sh: run as root" >&2; exit 2; }
bin=$(cd "$bin" && pwd)
[[ -x $bin/agentbox && -x $bin/agentbox-serve ]] || { echo "context_start.sh: no $bin/agentbox" >&2; exit 2; }
# shellcheck disable=SC2086  # CONTEXT_BENCH_ARGS is a list of options
exec /usr/bin/python3 "$here/context_start.py" "$bin/agentbox" ${CONTEXT_BENCH_ARGS:-}
