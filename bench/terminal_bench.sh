#!/usr/bin/env bash
# Terminal keystroke → echo round trip through agentbox's terminal WebSocket (/api/terminals),
# against websocketd relaying `cat` on the same machine, in the same run
# (bench/terminal_bench.py does the measuring; it prints p50/p99 of each and the ratio).
#
# Both paths end in `cat` echoing one byte: in agentbox, `cat` runs in the account's login
# shell on the terminal's pty (stty raw -echo, so the byte goes through cat and nothing else);
# with websocketd, `cat` reads the message as a line on a pipe. The floor (bench/pty_relay.cpp)
# relays to `cat` doing nothing else: on a pty in a box, on a pty and on pipes. Rounds alternate
# between all five, so all see the same load.
#
#   bench/terminal_bench.sh [BUILD_DIR]   (default: build-bench next to bench/; run as root)
# Environment: TERMINAL_BENCH_ARGS, extra options for terminal_bench.py
# (default "--rounds 10 --per-round 200"); TERMINAL_BENCH_CLIENT_CPU=N pins the client to CPU N
# (default: not pinned); NO_BUILD=1 uses BUILD_DIR as it is; JOBS, build parallelism.
#
# Pinning the client: it stands in for a browser on another machine, but here it shares the
# CPUs with the relays. Unpinned, the scheduler may move it onto the CPU a relay just woke on,
# and its ~100 us of Python per keystroke then runs on a cold cache; how often that happens
# depends on where each relay's thread last ran (bench/RESULTS.md has runs of both ways).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
python=/usr/bin/python3  # Debian's, with python3-websockets (scripts/install-deps.sh)

[[ $(id -u) -eq 0 ]] || { echo "terminal_bench.sh: run as root (agentbox serve gives each user a uid)" >&2; exit 2; }
command -v websocketd >/dev/null || { echo "terminal_bench.sh: websocketd missing (scripts/install-deps.sh)" >&2; exit 2; }
"$python" -c 'import websockets' 2>/dev/null || { echo "terminal_bench.sh: python3-websockets missing (scripts/install-deps.sh)" >&2; exit 2; }

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init pty_relay
build=$(cd "$build" && pwd)
for b in agentbox pty_relay; do
  [[ -x $build/$b ]] || { echo "terminal_bench.sh: no $build/$b" >&2; exit 2; }
done

state=$(mktemp -d /tmp/agentbox-termbench-XXXXXX)
log=$(mktemp /tmp/agentbox-termbench-log-XXXXXX)
wlog=$(mktemp /tmp/agentbox-termbench-wsd-XXXXXX)
flog=$(mktemp /tmp/agentbox-termbench-floor-XXXXXX)
pid='' wpid='' fpid='' ppid='' bpid=''
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  local p
  for p in $fpid $ppid $bpid; do kill -TERM "$p" 2>/dev/null && { wait "$p" 2>/dev/null || true; }; done
  if [[ -n $wpid ]] && kill -0 "$wpid" 2>/dev/null; then kill -TERM "$wpid"; wait "$wpid" 2>/dev/null || true; fi
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$state" "$log" "$wlog" "$flog" "$flog".*
}
trap cleanup EXIT
trap 'exit 130' INT TERM

AGENTBOX_API_KEY=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
export AGENTBOX_API_KEY
unset AGENTBOX_CONFIG
"$build/agentbox" serve --listen 127.0.0.1:0 --state "$state" >"$log" 2>&1 &
pid=$!
# A free port for websocketd (it takes no port 0): ask the kernel for one.
wport=$(free_port)
websocketd --address=127.0.0.1 --port="$wport" --binary=false cat >"$wlog" 2>&1 &
wpid=$!
# The floor: the same relay with cat on a pty in a box, on a pty and on pipes (bench/pty_relay.cpp).
"$build/pty_relay" 0 --box >"$flog.box" 2>&1 &
bpid=$!
"$build/pty_relay" 0 >"$flog.pty" 2>&1 &
fpid=$!
"$build/pty_relay" 0 --pipe >"$flog.pipe" 2>&1 &
ppid=$!

port=$(daemon_port "$pid" "$log" terminal_bench.sh)
relay='s|^pty_relay: listening on 127\.0\.0\.1:\([0-9]*\)$|\1|p'
bport=$(logged_port "$bpid" "$flog.box" terminal_bench.sh "$relay")
fport=$(logged_port "$fpid" "$flog.pty" terminal_bench.sh "$relay")
pport=$(logged_port "$ppid" "$flog.pipe" terminal_bench.sh "$relay")

echo "terminal bench: agentbox serve pid $pid on 127.0.0.1:$port; websocketd $(websocketd --version 2>&1 | head -1) pid $wpid on 127.0.0.1:$wport"
echo "host:   $(uname -r), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "reproduce: bench/terminal_bench.sh ${build#"$root"/}${TERMINAL_BENCH_ARGS:+  (TERMINAL_BENCH_ARGS=\"$TERMINAL_BENCH_ARGS\")}${TERMINAL_BENCH_CLIENT_CPU:+  (TERMINAL_BENCH_CLIENT_CPU=$TERMINAL_BENCH_CLIENT_CPU)}"
if [[ -n ${TERMINAL_BENCH_CLIENT_CPU:-} ]]; then
  client=(taskset -c "$TERMINAL_BENCH_CLIENT_CPU" "$python")
  echo "client: pinned to CPU $TERMINAL_BENCH_CLIENT_CPU"
else
  client=("$python")
  echo "client: not pinned"
fi
rc=0
# shellcheck disable=SC2086  # TERMINAL_BENCH_ARGS is a list of options
"${client[@]}" "$here/terminal_bench.py" --agentbox "127.0.0.1:$port" --key "$AGENTBOX_API_KEY" \
  --websocketd "127.0.0.1:$wport" --floor-box "127.0.0.1:$bport" --floor-pty "127.0.0.1:$fport" --floor-pipe "127.0.0.1:$pport" \
  ${TERMINAL_BENCH_ARGS:-} || rc=$?
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end"
if [[ $rc != 0 ]]; then
  echo "terminal_bench.sh: failed; the daemon's last lines:" >&2
  tail -20 "$log" >&2
  tail -5 "$wlog" >&2
fi
exit "$rc"
