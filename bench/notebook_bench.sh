#!/usr/bin/env bash
# A notebook cell `1+1` round trip through agentbox vs jupyter_client against a kernel on the
# host (issue 33; target <= 1.5x): bench/notebook_bench.py. Run as root.
#
#   bench/notebook_bench.sh [BUILD_DIR]    (default: build-bench next to bench/)
# Environment: CELLS (400), NO_BUILD=1 uses BUILD_DIR as it is, JOBS, BENCH_MAX_LOAD,
# BENCH_MAX_WAIT (bench/bench_util.py).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}

[[ $(id -u) -eq 0 ]] || { echo "notebook_bench.sh: run as root" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
exec /usr/bin/python3 "$here/notebook_bench.py" "$build/agentbox" "${CELLS:-400}"
