#!/usr/bin/env bash
# The exec round trip and GET /files/list p50 with [audit] level = "METADATA" and metrics on
# against both off, same run, alternating rounds (bench/audit_bench.py measures). Target:
# <= 1.05x each (issue 36).
#
#   bench/audit_bench.sh [BIN_DIR] [BASELINE_DIR]   (BIN_DIR default build/; without BASELINE_DIR
#                                                   the same binary with both off; run as root)
# Environment: AUDIT_ARGS (default "--rounds 5 --n 300"); BENCH_MAX_LOAD (1.5) and
# BENCH_MAX_WAIT (600 s): how quiet the machine should be before measuring.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build}
baseline=${2:-$bin}
[[ $(id -u) -eq 0 ]] || { echo "audit_bench.sh: run as root" >&2; exit 2; }
for d in "$bin" "$baseline"; do
  [[ -x $d/agentbox && -x $d/agentbox-serve ]] || { echo "audit_bench.sh: no $d/agentbox" >&2; exit 2; }
done
bin=$(cd "$bin" && pwd)
baseline=$(cd "$baseline" && pwd)
# shellcheck disable=SC2086  # AUDIT_ARGS is a list of options
exec /usr/bin/python3 "$here/audit_bench.py" "$bin/agentbox" "$baseline/agentbox" ${AUDIT_ARGS:---rounds 5 --n 300}
