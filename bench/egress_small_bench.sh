#!/usr/bin/env bash
# Egress small requests: GET of a small file (SIZE bytes, from nginx on the host's 127.0.0.1,
# reached by a [hosts] name) in absolute form through a box's egress proxy, keep-alive, driven by
# wrk at CONNS (32) connections from inside the box's network namespace (nsenter into a process
# of the box: the real listener, as a box's programs reach it), against the same requests from
# the host through tinyproxy (Debian) and to nginx directly; and, as the floor of any proxy hop
# here, through a second nginx (its own process) doing proxy_pass with keep-alive to the origin
# (origin-form requests: a reverse proxy, no policy). Requests/s at 32 connections, and
# the latency at one connection (the cost the proxy adds to a request when nothing queues),
# with the daemon's and tinyproxy's CPU per request. Alternating, RUNS rounds of SECONDS_PER each;
# medians and ratios. Targets (issue 14): requests/s >= 1.0x tinyproxy; p50 added to the direct
# request <= 100 us.
#
#   bench/egress_small_bench.sh [BUILD_DIR]    (default: build-bench next to bench/; run as root)
# Environment: RUNS (5), SECONDS_PER (4), CONNS (32), SIZE (1024), NO_BUILD=1 uses BUILD_DIR as it
# is, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
runs=${RUNS:-5}
secs=${SECONDS_PER:-4}
conns=${CONNS:-32}
size=${SIZE:-1024}

[[ $(id -u) -eq 0 ]] || { echo "egress_small_bench.sh: run as root" >&2; exit 2; }
for tool in curl wrk nginx tinyproxy nsenter python3; do
  command -v "$tool" >/dev/null || { echo "egress_small_bench.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "egress_small_bench.sh: no $build/agentbox" >&2; exit 2; }

work=$(mktemp -d /tmp/agentbox-smallbench-XXXXXX)
daemon='' nginx_pid='' hop_pid='' tiny=''
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  for pid in $nginx_pid $hop_pid $tiny; do kill "$pid" 2>/dev/null || true; done
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


# ---- the origin: nginx serving one small file, keep-alive without a request limit
mkdir -p "$work/nginx" "$work/www"
head -c "$size" /dev/zero | tr '\0' x >"$work/www/small"
origin_port=$(free_port)
hop_port=$(free_port)
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
user root;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $work/nginx/body;
  server {
    listen 127.0.0.1:$origin_port backlog=4096;
    root $work/www;
  }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!
# The hop: another nginx, so that it and the origin are two processes, as a proxy and its origin are.
mkdir -p "$work/hop"
cat >"$work/hop/nginx.conf" <<EOF
worker_processes 1;
user root;
daemon off;
pid $work/hop/nginx.pid;
error_log $work/hop/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $work/hop/body;
  proxy_temp_path $work/hop/proxy;
  upstream origin { server 127.0.0.1:$origin_port; keepalive 64; }
  server {
    listen 127.0.0.1:$hop_port backlog=4096;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
EOF
nginx -p "$work/hop" -c "$work/hop/nginx.conf" &
hop_pid=$!

# ---- tinyproxy, as issue 14 names it: its defaults but the port, quiet
tiny_port=$(free_port)
cat >"$work/tinyproxy.conf" <<EOF
Port $tiny_port
Listen 127.0.0.1
Timeout 600
MaxClients 1000
Allow 127.0.0.1
LogLevel Critical
EOF
tinyproxy -d -c "$work/tinyproxy.conf" >/dev/null 2>&1 &
tiny=$!

# ---- agentbox serve: the origin is "origin.test" for the boxes
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
port=$(daemon_port "$daemon" "$work/serve.log" egress_small_bench.sh)

# A process that holds the box open; wrk joins its network namespace.
marker="86399.$RANDOM$RANDOM"
curl -sf -H "Authorization: Bearer $key" -H "X-User-Id: small-bench" -H 'Content-Type: application/json' \
  "http://127.0.0.1:$port/execute?wait=0" --data "{\"pty\": false, \"command\": \"exec sleep $marker\"}" >/dev/null
box_pid=
for _ in $(seq 100); do
  box_pid=$(pgrep -f "^sleep $marker\$" || true)
  [[ -n $box_pid ]] && break
  sleep 0.1
done
[[ -n $box_pid ]] || { echo "egress_small_bench.sh: the box's sleep did not appear" >&2; exit 1; }
in_box() { nsenter --net="/proc/$box_pid/ns/net" "$@"; }

origin="http://origin.test:$origin_port/small"
tiny_origin="http://127.0.0.1:$origin_port/small"
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$origin_port/small" && break; sleep 0.1; done
got=$(in_box curl -sS -x http://127.0.0.1:3128 -o /dev/null -w '%{http_code} %{size_download}' "$origin")
[[ $got == "200 $size" ]] || { echo "egress_small_bench.sh: through the box's proxy: $got" >&2; exit 1; }
got=$(curl -sS -x "http://127.0.0.1:$tiny_port" -o /dev/null -w '%{http_code} %{size_download}' "$tiny_origin")
[[ $got == "200 $size" ]] || { echo "egress_small_bench.sh: through tinyproxy: $got" >&2; exit 1; }

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }  # user + system CPU of a process, clock ticks
hz=$(getconf CLK_TCK)

# One wrk run: NAME CONNS PID_TO_CHARGE(or -) then the command. Appends "rps p50 p99 cpu_us_per_request"
# to $work/NAME.CONNS and prints them; fails on any non-2xx answer.
measure() {
  local name=$1 c=$2 charge=$3 before=0 after=0 out line
  shift 3
  [[ $charge != - ]] && before=$(ticks "$charge")
  out=$("$@" -t 1 -c "$c" -d "${secs}s" --latency -s "$here/wrk_report.lua" 2>&1) ||
    { echo "egress_small_bench.sh: wrk failed for $name: $out" >&2; exit 1; }
  [[ $charge != - ]] && after=$(ticks "$charge")
  line=$(grep '^wrk-result' <<<"$out") || { echo "egress_small_bench.sh: no result from wrk for $name: $out" >&2; exit 1; }
  read -r _ _ n _ dur _ p50 _ _ _ p99 _ non2xx _ econn _ eread _ ewrite _ etime <<<"$line"
  [[ $non2xx == 0 && $n -gt 0 ]] || { echo "egress_small_bench.sh: $name answered $non2xx non-2xx of $n" >&2; exit 1; }
  awk -v n="$n" -v d="$dur" -v p50="$p50" -v p99="$p99" -v t=$((after - before)) -v hz="$hz" -v charge="$charge" \
    -v errs="$econn/$eread/$ewrite/$etime" '
    BEGIN { cpu = (charge == "-") ? "-" : sprintf("%.1f", t / hz * 1e6 / n)
            printf "%.0f %d %d %s %s\n", n / (d / 1e6), p50, p99, cpu, errs }' | tee -a "$work/$name.$c"
}
agentbox() { ORIGIN=$origin in_box wrk http://127.0.0.1:3128 "$@"; }
tinyproxy_() { ORIGIN=$tiny_origin wrk "http://127.0.0.1:$tiny_port" "$@"; }
direct() { ORIGIN='' wrk "$tiny_origin" "$@"; }
nginx_hop() { ORIGIN='' wrk "http://127.0.0.1:$hop_port/small" "$@"; }

# Warm every path once (the box's first connection, nginx's worker, tinyproxy's threads).
secs=1 measure warm "$conns" - agentbox >/dev/null
secs=1 measure warm "$conns" - tinyproxy_ >/dev/null
secs=1 measure warm "$conns" - direct >/dev/null
secs=1 measure warm "$conns" - nginx_hop >/dev/null

echo "egress small-request bench: GET of $size bytes, wrk -t 1, ${secs} s per measurement, $runs rounds, $(nproc) cores"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "columns: requests/s, p50 us, p99 us, CPU us per request (agentbox: the daemon; tinyproxy: its process), socket errors connect/read/write/timeout"
for ((i = 1; i <= runs; i++)); do
  echo "round $i"
  for c in "$conns" 1; do
    r=$(measure agentbox "$c" "$daemon" agentbox); printf '  %-24s %s\n' "agentbox, $c conn(s)" "$r"
    r=$(measure tinyproxy "$c" "$tiny" tinyproxy_); printf '  %-24s %s\n' "tinyproxy, $c conn(s)" "$r"
    r=$(measure direct "$c" - direct); printf '  %-24s %s\n' "direct, $c conn(s)" "$r"
    r=$(measure nginx_hop "$c" - nginx_hop); printf '  %-24s %s\n' "nginx proxy_pass, $c conn(s)" "$r"
  done
done

col() { cut -d' ' -f"$2" "$work/$1" | median; }
echo "medians of $runs rounds:"
for c in "$conns" 1; do
  printf '  %2s conn(s): requests/s agentbox %s, tinyproxy %s, direct %s, nginx proxy_pass %s; p50 us agentbox %s, tinyproxy %s, direct %s, nginx proxy_pass %s; CPU us/request agentbox %s, tinyproxy %s\n' \
    "$c" "$(col "agentbox.$c" 1)" "$(col "tinyproxy.$c" 1)" "$(col "direct.$c" 1)" "$(col "nginx_hop.$c" 1)" \
    "$(col "agentbox.$c" 2)" "$(col "tinyproxy.$c" 2)" "$(col "direct.$c" 2)" "$(col "nginx_hop.$c" 2)" \
    "$(col "agentbox.$c" 4)" "$(col "tinyproxy.$c" 4)"
done
awk -v a="$(col "agentbox.$conns" 1)" -v t="$(col "tinyproxy.$conns" 1)" -v c="$conns" \
  'BEGIN { printf "requests/s at %d connections, agentbox : tinyproxy = %.2f (target >= 1.0)\n", c, a / t }'
awk -v a="$(col agentbox.1 2)" -v d="$(col direct.1 2)" -v a32="$(col "agentbox.$conns" 2)" -v d32="$(col "direct.$conns" 2)" -v c="$conns" \
  'BEGIN { printf "p50 added to the direct request: %d us at 1 connection (target <= 100); %d us at %d connections (queueing included)\n", a - d, a32 - d32, c }'
awk -v h="$(col nginx_hop.1 2)" -v d="$(col direct.1 2)" \
  'BEGIN { printf "p50 added by the nginx proxy_pass hop at 1 connection (the floor of a proxy hop here): %d us\n", h - d }'
echo "reproduce: bench/egress_small_bench.sh"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
