#!/usr/bin/env bash
# Idle users cost no kernel objects and little disk (issue 37): disk, memory, mounts and loop
# devices per idle user, against a baseline build in the same run (bench/idle_volumes.py).
#
#   bench/idle_volumes.sh [BUILD_DIR] [BASELINE_BUILD_DIR]   (run as root)
# Environment: USERS (40), NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
baseline=${2:-}

[[ $(id -u) -eq 0 ]] || { echo "idle_volumes.sh: run as root" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "idle_volumes.sh: no $build/agentbox" >&2; exit 2; }
exec /usr/bin/python3 "$here/idle_volumes.py" "$build/agentbox" "${baseline:+$baseline/agentbox}" "${USERS:-40}"
