#!/usr/bin/env bash
# Builds agentbox in Release and runs every benchmark of bench/ in one go, printing the
# machine's conditions first (numbers from a loaded machine mean little without them).
# The whole output is also kept in BUILD_DIR/bench-results.txt.
#
#   bench/run_all.sh          (as root; BUILD_DIR defaults to build-bench next to bench/)
# Passes ROUNDS/RUNS/SRT_RUNS/CPU_RUNS to oneshot.sh and BOX_BENCH_ARGS to box_bench.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}

[[ $(id -u) -eq 0 ]] || { echo "run_all.sh: run as root" >&2; exit 2; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  >/dev/null
cmake --build "$build" --target agentbox agentbox-serve agentbox-init box_bench api_bench >/dev/null

{
  echo "== agentbox benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "host:   $(uname -r), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(free -g | awk '/^Mem:/ {print $2 " GiB RAM"}')"
  echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
  echo "tools:  $(hyperfine --version), $(bwrap --version), srt $("$here/node_modules/.bin/srt" --version 2>/dev/null || echo '?'), $(perf --version 2>/dev/null || echo 'no perf')"
  echo "build:  Release, ${build#"$root"/}"
  echo
  echo "== 1. one-shot: run /bin/true in a fresh sandbox (hyperfine, wall time per command)"
  "$here/oneshot.sh" "$build"
  echo
  echo "== 2. box engine (bench/box_bench.cpp, through the Box API)"
  # shellcheck disable=SC2086  # BOX_BENCH_ARGS is a list of options
  "$build/box_bench" ${BOX_BENCH_ARGS:-}
  echo
  echo "== 3. agentbox serve: exec round trip, long-polls, /files/view (bench/api_bench.sh)"
  NO_BUILD=1 "$here/api_bench.sh" "$build"
  echo
  echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end"
} 2>&1 | tee "$build/bench-results.txt"
