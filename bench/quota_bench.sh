#!/usr/bin/env bash
# Disk quotas on vs off (issue 16): write throughput in a home on a quota'd account volume vs a
# plain directory (dd 1 GiB with fsync, 20,000 small files; target >= 0.9x), and a new account's
# first command with and without its volume. Two daemons side by side, alternating; medians.
#
#   bench/quota_bench.sh [BUILD_DIR]    (default: build-bench next to bench/; run as root)
# Environment: RUNS (5), NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
# QUOTA_BENCH=first: only a new user's first command (issue 31), RUNS (say 15) new users on each
# of three daemons: quotas on with every default (spare volumes made ahead), quotas off, quotas
# on with spare_volumes = 0; target on/off <= 1.2x (BENCH_MAX_LOAD, BENCH_MAX_WAIT: see
# bench/bench_util.py).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
runs=${RUNS:-5}

[[ $(id -u) -eq 0 ]] || { echo "quota_bench.sh: run as root" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "quota_bench.sh: no $build/agentbox" >&2; exit 2; }
# shellcheck disable=SC2086  # QUOTA_BENCH is empty or one word
exec python3 "$here/quota_bench.py" "$build/agentbox" "$runs" ${QUOTA_BENCH:-}
