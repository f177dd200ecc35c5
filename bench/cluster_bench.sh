#!/usr/bin/env bash
# The scale-out router's cost (bench/cluster_bench.py does the measuring): latency and throughput
# nginx adds in front of an agentbox node against what the same generated router adds in front
# of a static `return 200`, and a node's SIGKILL -> 503 and restart -> 200 times through it.
#
#   bench/cluster_bench.sh [BUILD_DIR]   (default: build-bench next to bench/; run as root)
# Environment: CLUSTER_BENCH_ARGS (default "--rounds 5 --seconds 5"), NO_BUILD=1, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
# shellcheck source=bench/lib.sh
source "$here/lib.sh"

[[ $(id -u) -eq 0 ]] || { echo "cluster_bench.sh: run as root (agentbox serve gives each user a uid)" >&2; exit 2; }
for tool in wrk nginx python3; do
  command -v "$tool" >/dev/null || { echo "cluster_bench.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done
[[ -f /usr/lib/nginx/modules/ngx_http_set_misc_module.so ]] \
  || { echo "cluster_bench.sh: libnginx-mod-http-set-misc missing (scripts/install-deps.sh)" >&2; exit 2; }

build_bench "$build" agentbox agentbox-serve agentbox-init hop_upstream
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "cluster_bench.sh: no $build/agentbox" >&2; exit 2; }

# shellcheck disable=SC2086  # the arguments are words on purpose
exec /usr/bin/python3 "$here/cluster_bench.py" --agentbox "$build/agentbox" ${CLUSTER_BENCH_ARGS:---rounds 5 --seconds 5}
