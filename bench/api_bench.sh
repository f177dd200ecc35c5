#!/usr/bin/env bash
# `agentbox serve` measured over its HTTP API (bench/api_bench.cpp does the measuring):
#   1. exec round trip of `true` at 1, 8 and 32 clients, against a bwrap one-shot of /bin/true
#   2. 5,000 long-polls parked on 100 running processes: daemon RSS, delay after input
#   3. GET /files/view of a 1 GiB file against cat of the same file
#   (4. only with API_BENCH_ARGS="--only fairness": one user's 4 concurrent greps over 300 sparse
#    16 MiB files while another user's GET /files/list is timed)
# Builds what it needs (Release), starts one daemon on 127.0.0.1 with a temporary state
# directory, runs the three, and removes everything again (the daemon is stopped on any exit).
#
#   bench/api_bench.sh [BUILD_DIR]      (default: build-bench next to bench/; run as root)
# Environment: API_BENCH_ARGS, extra options for api_bench (for a short check:
# "--seconds 2 --rounds 2 --oneshots 20 --polls 500 --view-mib 128 --view-runs 3");
# JOBS, build parallelism (default: ninja's); NO_BUILD=1 uses BUILD_DIR as it is;
# API_BENCH_BIN, the api_bench to drive it with (default BUILD_DIR/api_bench: a baseline build of
# an older commit is measured with the current client, bench/sharing.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}

[[ $(id -u) -eq 0 ]] || { echo "api_bench.sh: run as root (agentbox serve gives each user a uid)" >&2; exit 2; }
for tool in bwrap curl; do
  command -v "$tool" >/dev/null || { echo "api_bench.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init api_bench
build=$(cd "$build" && pwd)
client=${API_BENCH_BIN:-$build/api_bench}
[[ -x $build/agentbox && -x $client ]] || { echo "api_bench.sh: no $build/agentbox or $client" >&2; exit 2; }

state=$(mktemp -d /tmp/agentbox-apibench-XXXXXX)
log=$(mktemp /tmp/agentbox-apibench-log-XXXXXX)
pid=
# shellcheck disable=SC2317  # both run from the EXIT trap
stop_daemon() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    # It stops every box on the way out; give it time, then force.
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  pid=
}
# shellcheck disable=SC2317
cleanup() {
  stop_daemon
  rm -rf "$state" "$log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

AGENTBOX_API_KEY=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
export AGENTBOX_API_KEY
unset AGENTBOX_CONFIG
"$build/agentbox" serve --listen 127.0.0.1:0 --state "$state" >"$log" 2>&1 &
pid=$!
port=$(daemon_port "$pid" "$log" api_bench.sh)

echo "api bench: agentbox serve pid $pid on 127.0.0.1:$port, a temporary state directory"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "reproduce: bench/api_bench.sh ${build#"$root"/}${API_BENCH_ARGS:+  (API_BENCH_ARGS=\"$API_BENCH_ARGS\")}"
echo
rc=0
# shellcheck disable=SC2086  # API_BENCH_ARGS is a list of options
"$client" --port "$port" --pid "$pid" --state "$state" ${API_BENCH_ARGS:-} || rc=$?
echo
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end"
if ! kill -0 "$pid" 2>/dev/null; then
  echo "api_bench.sh: the daemon died during the run; its output:" >&2
  tail -50 "$log" >&2
  rc=1
elif [[ $rc != 0 ]]; then
  echo "api_bench.sh: api_bench failed; the daemon's last lines:" >&2
  tail -20 "$log" >&2
fi
exit "$rc"
