#!/usr/bin/env bash
# One user's GET /files/list p50/p99 while 50 new users arrive one after another (each first
# POST /execute makes an account, a volume and a box), against the same with nobody arriving, in
# the same run (issue 31; bench/arrivals_bench.py measures). Target: p99 <= 3x.
#
#   bench/arrivals_bench.sh [BIN_DIR]    (default build/: agentbox, agentbox-serve and
#                                         agentbox-init built; run as root)
# Environment: ARRIVALS_ARGS (default "--rounds 5 --seconds 5 --users 50"; add --floor for the
# same loop while the host makes the volumes with no daemon); BENCH_MAX_LOAD (1.5)
# and BENCH_MAX_WAIT (600 s): how quiet the machine should be before measuring, and how long to
# wait for it. Needs Debian's python3 with httpx (python3-httpx).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build}

[[ $(id -u) -eq 0 ]] || { echo "arrivals_bench.sh: run as root" >&2; exit 2; }
bin=$(cd "$bin" && pwd)
[[ -x $bin/agentbox && -x $bin/agentbox-serve ]] || { echo "arrivals_bench.sh: no $bin/agentbox" >&2; exit 2; }
# shellcheck disable=SC2086  # ARRIVALS_ARGS is a list of options
exec /usr/bin/python3 "$here/arrivals_bench.py" "$bin/agentbox" ${ARRIVALS_ARGS:-}
