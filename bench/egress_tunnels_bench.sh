#!/usr/bin/env bash
# Egress tunnels at scale: TUNNELS (1,000) CONNECT tunnels held open at once across ACCOUNTS
# (100) accounts, each through its own box's egress proxy (the real listener in the box's
# network namespace), to an echo server on the host's 127.0.0.1 reached by a [hosts] name. The
# daemon's RSS, descriptors, threads and CPU with the boxes up and no tunnel, with every tunnel
# open and idle, then with a trickle of traffic (64 bytes and their echo per tunnel every
# PERIOD s); the per-tunnel cost is the growth divided by the number of tunnels. There is no peer
# here: the figures are what a tunnel costs the daemon (bench/egress_tunnels.py measures).
#
#   bench/egress_tunnels_bench.sh [BUILD_DIR]  (default: build-bench next to bench/; run as root)
# Environment: TUNNELS (1000), ACCOUNTS (100), IDLE (10 s), TRICKLE (10 s), PERIOD (1.0 s),
# NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
tunnels=${TUNNELS:-1000}
accounts=${ACCOUNTS:-100}

[[ $(id -u) -eq 0 ]] || { echo "egress_tunnels_bench.sh: run as root" >&2; exit 2; }
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "egress_tunnels_bench.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "egress_tunnels_bench.sh: no $build/agentbox" >&2; exit 2; }

work=$(mktemp -d /tmp/agentbox-tunnelsbench-XXXXXX)
daemon=''
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  if [[ -n $daemon ]] && kill -0 "$daemon" 2>/dev/null; then
    kill -TERM "$daemon"
    for _ in $(seq 150); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$daemon" 2>/dev/null && kill -KILL "$daemon"
  fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM


origin_port=$(free_port)
cat >"$work/config.toml" <<EOF
[policy.default]
allow = ["origin.test"]
allow_addresses = ["127.0.0.1/32"]
[hosts]
"origin.test" = "127.0.0.1"
EOF
key=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
env -u AGENTBOX_CONFIG AGENTBOX_API_KEY="$key" "$build/agentbox" serve --listen 127.0.0.1:0 --state "$work/state" \
  --config "$work/config.toml" >"$work/serve.log" 2>&1 &
daemon=$!
port=$(daemon_port "$daemon" "$work/serve.log" egress_tunnels_bench.sh)

echo "egress tunnels bench: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
# Each account's box holds a `sleep MARKER.N`: the client enters the box's namespace through it.
marker="86398.$RANDOM"
t0=$(date +%s.%N)
for ((a = 0; a < accounts; a++)); do
  curl -sf -H "Authorization: Bearer $key" -H "X-User-Id: tunnels-$a" -H 'Content-Type: application/json' \
    "http://127.0.0.1:$port/execute?wait=0" --data "{\"pty\": false, \"command\": \"exec sleep $marker$a\"}" >/dev/null
done
for _ in $(seq 100); do
  [[ $(pgrep -fc "^sleep $marker" || true) -ge $accounts ]] && break
  sleep 0.1
done
echo "$accounts boxes started in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

python3 "$here/egress_tunnels.py" --daemon "$daemon" --marker "$marker" --origin-port "$origin_port" \
  --tunnels "$tunnels" --idle "${IDLE:-10}" --trickle "${TRICKLE:-10}" --period "${PERIOD:-1.0}"
grep -ci 'error\|warn' "$work/serve.log" >/dev/null && { echo "the daemon's warnings:"; grep -i 'error\|warn' "$work/serve.log" | tail -5; }
echo "reproduce: bench/egress_tunnels_bench.sh"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
