#!/usr/bin/env bash
# Moving an account between two nodes (`agentbox accounts move`) against `tar | tar` of the same
# home on the same machine (bench/move_bench.py does the measuring).
#
#   bench/move_bench.sh [BUILD_DIR]   (default: build-bench next to bench/; run as root)
# Environment: MOVE_BENCH_ARGS (default "--rounds 3 --files 10000": ~1 GiB), NO_BUILD=1, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

[[ $(id -u) -eq 0 ]] || { echo "move_bench.sh: run as root (agentbox serve gives each user a uid)" >&2; exit 2; }
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "move_bench.sh: no $build/agentbox" >&2; exit 2; }

# shellcheck disable=SC2086  # the arguments are words on purpose
exec /usr/bin/python3 "$here/move_bench.py" --agentbox "$build/agentbox" ${MOVE_BENCH_ARGS:---rounds 3 --files 10000}
