#!/usr/bin/env bash
# Egress throughput: 1 GiB through a CONNECT tunnel of a box's egress proxy (curl in the box,
# HTTPS_PROXY-style tunnel via --proxytunnel, to a server on the host's 127.0.0.1 reached by a
# [hosts] name), against the same download through a minimal splice(2) CONNECT relay
# (build-bench/splice_relay: the ceiling of any relay here) and through tinyproxy, both with
# curl on the host, and directly. Alternating, RUNS rounds; medians and ratios.
#
#   bench/egress_bench.sh [BUILD_DIR]     (default: build-bench next to bench/; run as root)
# Environment: RUNS (5), MIB (1024), NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
runs=${RUNS:-5}
mib=${MIB:-1024}
bytes=$((mib * 1024 * 1024))

[[ $(id -u) -eq 0 ]] || { echo "egress_bench.sh: run as root" >&2; exit 2; }
for tool in curl tinyproxy python3; do
  command -v "$tool" >/dev/null || { echo "egress_bench.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init splice_relay
build=$(cd "$build" && pwd)

work=$(mktemp -d /tmp/agentbox-egressbench-XXXXXX)
daemon= server= relay= tiny=
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  for pid in $server $relay $tiny; do kill "$pid" 2>/dev/null || true; done
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

cp "$here/serve_bytes.py" "$work/server.py"
host_port=$(free_port)
python3 "$work/server.py" "$host_port" &
server=$!

relay_port=$(free_port)
"$build/splice_relay" "$relay_port" &
relay=$!

tiny_port=$(free_port)
cat >"$work/tinyproxy.conf" <<EOF
Port $tiny_port
Listen 127.0.0.1
Timeout 600
MaxClients 100
Allow 127.0.0.1
ConnectPort $host_port
LogLevel Critical
EOF
tinyproxy -d -c "$work/tinyproxy.conf" >/dev/null 2>&1 &
tiny=$!

cat >"$work/config.toml" <<EOF
[policy.default]
allow = ["bait.test"]
allow_addresses = ["127.0.0.1/32"]
[hosts]
"bait.test" = "127.0.0.1"
EOF
key=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
env -u AGENTBOX_CONFIG AGENTBOX_API_KEY="$key" "$build/agentbox" serve --listen 127.0.0.1:0 --state "$work/state" \
  --config "$work/config.toml" >"$work/serve.log" 2>&1 &
daemon=$!
port=$(daemon_port "$daemon" "$work/serve.log" egress_bench.sh)
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$host_port/big?n=1" && break; sleep 0.1; done

check() {  # "code size speed" -> MiB/s, or fail
  local out=$1 what=$2
  read -r code size speed <<<"$out"
  [[ $code == 200 && $size == "$bytes" ]] || { echo "egress_bench.sh: bad download through $what: $out" >&2; exit 1; }
  awk -v s="$speed" 'BEGIN { printf "%.0f", s / 1048576 }'
}
fmt='%{http_code} %{size_download} %{speed_download}'
in_box() {
  curl -sf -H "Authorization: Bearer $key" -H "X-User-Id: egress-bench" -H 'Content-Type: application/json' \
    "http://127.0.0.1:$port/execute?wait=120" \
    --data "{\"pty\": false, \"command\": \"curl -sS -o /dev/null --proxytunnel -w '$fmt' 'http://bait.test:$host_port/big?n=$bytes'\"}" |
    python3 -c 'import json,sys; p=json.load(sys.stdin); print("".join(c["data"] for c in p["output"] if c["type"]=="stdout"))'
}
on_host() { curl -sS -o /dev/null -w "$fmt" "$@" "http://127.0.0.1:$host_port/big?n=$bytes"; }

check "$(in_box)" "agentbox" >/dev/null  # the box starts; both paths warm
echo "egress bench: $mib MiB through a CONNECT tunnel, $runs rounds, $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$work/a" >"$work/r" >"$work/t" >"$work/d"
for ((i = 1; i <= runs; i++)); do
  a=$(check "$(in_box)" agentbox)
  r=$(check "$(on_host -x "http://127.0.0.1:$relay_port" --proxytunnel)" "splice relay")
  t=$(check "$(on_host -x "http://127.0.0.1:$tiny_port" --proxytunnel)" tinyproxy)
  d=$(check "$(on_host)" direct)
  echo "$a" >>"$work/a"; echo "$r" >>"$work/r"; echo "$t" >>"$work/t"; echo "$d" >>"$work/d"
  printf 'round %d: agentbox %5s MiB/s   splice relay %5s MiB/s   tinyproxy %5s MiB/s   direct %5s MiB/s\n' "$i" "$a" "$r" "$t" "$d"
done
ma=$(median <"$work/a") mr=$(median <"$work/r") mt=$(median <"$work/t") md=$(median <"$work/d")
echo "median MiB/s: agentbox $ma, splice relay $mr, tinyproxy $mt, direct $md"
awk -v a="$ma" -v r="$mr" -v t="$mt" 'BEGIN { printf "ratio agentbox : splice relay = %.2f (target >= 0.90); agentbox : tinyproxy = %.2f (target >= 3)\n", a / r, a / t }'
echo "reproduce: bench/egress_bench.sh"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
