#!/usr/bin/env bash
# The exec round trip and GET /files/list p50 with metrics on (this build, [metrics] listen
# scraped every second) against a build without them (BASELINE_DIR: main's), same run,
# alternating rounds (bench/metrics_bench.py measures). Target: <= 1.05x each (issue 36).
#
#   bench/metrics_bench.sh [BIN_DIR] BASELINE_DIR   (each with agentbox, agentbox-serve and
#                                                    agentbox-init built; run as root)
# Environment: METRICS_ARGS (default "--rounds 5 --n 300"); BENCH_MAX_LOAD (1.5) and
# BENCH_MAX_WAIT (600 s): how quiet the machine should be before measuring.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if (($# >= 2)); then bin=$1 baseline=$2; else bin=$here/../build baseline=${1:?usage: metrics_bench.sh [BIN_DIR] BASELINE_DIR}; fi

[[ $(id -u) -eq 0 ]] || { echo "metrics_bench.sh: run as root" >&2; exit 2; }
for d in "$bin" "$baseline"; do
  [[ -x $d/agentbox && -x $d/agentbox-serve ]] || { echo "metrics_bench.sh: no $d/agentbox" >&2; exit 2; }
done
bin=$(cd "$bin" && pwd)
baseline=$(cd "$baseline" && pwd)
# shellcheck disable=SC2086  # METRICS_ARGS is a list of options
exec /usr/bin/python3 "$here/metrics_bench.py" "$bin/agentbox" "$baseline/agentbox" ${METRICS_ARGS:---rounds 5 --n 300}
