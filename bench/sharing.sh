#!/usr/bin/env bash
# Users sharing one daemon, the current build against a baseline build of an earlier commit,
# alternating in one run so the machine's load hits both alike (bench/api_bench.cpp measures):
#   firstexec  1, 10 and 50 users never seen before send their first POST /execute at once:
#              p50/p99 of those first execs (each starts a box)
#   fairness   one user's 4 concurrent greps over 300 sparse 16 MiB files, in a loop, while
#              another user calls GET /files/list every 20 ms: that user's p50/p99
#   flood      one user's exec round trip alone and while another user's 4 commands write
#              output as fast as they can
#   exec       (current build only) the exec round trip of `true` at 1 client against a bwrap
#              one-shot of /bin/true timed in the same run
#
#   bench/sharing.sh [BASELINE_REF]      (as root; default baseline e45668c, before issue 12)
# Environment: ROUNDS (alternations, default 3), SECONDS_PER (fairness/flood seconds, default 5),
# BUILD_DIR (default build-bench), BASELINE_DIR (default build-baseline-REF).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
ref=${1:-e45668c}
build=${BUILD_DIR:-$root/build-bench}
baseline=${BASELINE_DIR:-$root/build-baseline-$ref}
rounds=${ROUNDS:-3}
seconds=${SECONDS_PER:-5}

[[ $(id -u) -eq 0 ]] || { echo "sharing.sh: run as root" >&2; exit 2; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target agentbox agentbox-serve agentbox-init api_bench >/dev/null
if [[ ! -x $baseline/agentbox-serve ]]; then
  src=$(mktemp -d /tmp/agentbox-baseline-XXXXXX)
  git -C "$root" worktree add --detach "$src" "$ref" >/dev/null 2>&1
  cmake -S "$src" -B "$baseline" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$baseline" --target agentbox agentbox-serve agentbox-init >/dev/null
  git -C "$root" worktree remove --force "$src"
fi

measure() {  # DIR LABEL
  echo "-- $2 (${1#"$root"/})"
  NO_BUILD=1 API_BENCH_BIN="$build/api_bench" \
    API_BENCH_ARGS="--only firstexec,fairness,flood --crowds 1,10,50 --rounds 1 --seconds $seconds" \
    "$here/api_bench.sh" "$1" | grep -vE '^(api bench:|reproduce:|$)'
}

echo "== users sharing a daemon: $(git -C "$root" rev-parse --short HEAD) against $ref, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "host:   $(uname -r), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "reproduce: bench/sharing.sh $ref  (ROUNDS=$rounds SECONDS_PER=$seconds)"
for r in $(seq "$rounds"); do
  echo
  echo "== round $r of $rounds"
  measure "$baseline" "baseline $ref"
  measure "$build" "current"
done
echo
echo "== exec round trip at 1 client, current build, against a bwrap one-shot"
NO_BUILD=1 API_BENCH_ARGS="--only exec --clients 1 --seconds 10 --rounds 5 --oneshots 100" \
  "$here/api_bench.sh" "$build" | grep -vE '^(api bench:|reproduce:)'
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) at the end"
