#!/usr/bin/env bash
# /proxy throughput: a 1 GiB download from a server in a box through `agentbox serve`'s
# /proxy/{port}, against nginx proxy_pass (its defaults, and with proxy_buffering off) in front
# of the same server program on the host's loopback, and that server directly (the ceiling).
# All in one run, alternating, RUNS rounds; medians and the ratio to nginx. The daemon's RSS is
# sampled every 0.1 s during the /proxy downloads (before, peak).
#
#   bench/proxy_bench.sh [BUILD_DIR]      (default: build-bench next to bench/; run as root)
# Environment: RUNS (5), MIB (1024), NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
runs=${RUNS:-5}
mib=${MIB:-1024}
bytes=$((mib * 1024 * 1024))

[[ $(id -u) -eq 0 ]] || { echo "proxy_bench.sh: run as root (agentbox serve gives each user a uid)" >&2; exit 2; }
for tool in curl nginx python3; do
  command -v "$tool" >/dev/null || { echo "proxy_bench.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "proxy_bench.sh: no $build/agentbox" >&2; exit 2; }

work=$(mktemp -d /tmp/agentbox-proxybench-XXXXXX)
daemon= nginx_pid= host_server= sampler=
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  local rc=$?
  if [[ $rc != 0 && -s $work/nginx/error.log ]]; then
    echo "nginx's error log:" >&2
    tail -5 "$work/nginx/error.log" >&2
  fi
  for pid in $sampler $host_server $nginx_pid; do kill "$pid" 2>/dev/null || true; done
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

# ---- agentbox serve, and the server in a box
key=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
env -u AGENTBOX_CONFIG AGENTBOX_API_KEY="$key" "$build/agentbox" serve --listen 127.0.0.1:0 --state "$work/state" \
  >"$work/serve.log" 2>&1 &
daemon=$!
port=$(daemon_port "$daemon" "$work/serve.log" proxy_bench.sh)
api=(-H "Authorization: Bearer $key" -H "X-User-Id: proxy-bench")
curl -sf "${api[@]}" -H 'Content-Type: application/json' "http://127.0.0.1:$port/files/write" \
  --data "$(python3 -c 'import json,sys; print(json.dumps({"path": "server.py", "content": open(sys.argv[1]).read()}))' "$work/server.py")" >/dev/null
curl -sf "${api[@]}" -H 'Content-Type: application/json' "http://127.0.0.1:$port/execute?wait=0" \
  --data '{"command": "/usr/bin/python3 ~/server.py 8124", "pty": false}' >/dev/null
for _ in $(seq 100); do
  curl -sf "${api[@]}" "http://127.0.0.1:$port/ports" | grep -q '"port":8124' && break
  sleep 0.1
done

# ---- the same server on the host, nginx in front of it
host_port=$(free_port)
python3 "$work/server.py" "$host_port" &
host_server=$!
nginx_port=$(free_port)
nginx_nobuf_port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
user root;  # its workers write proxy temp files under the 0700 work directory
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  server {
    listen 127.0.0.1:$nginx_port;
    location / { proxy_pass http://127.0.0.1:$host_port; proxy_http_version 1.1; }
  }
  server {
    listen 127.0.0.1:$nginx_nobuf_port;
    location / { proxy_pass http://127.0.0.1:$host_port; proxy_http_version 1.1; proxy_buffering off; }
  }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!
for _ in $(seq 50); do
  curl -sf -o /dev/null "http://127.0.0.1:$nginx_port/big?n=1" && curl -sf -o /dev/null "http://127.0.0.1:$host_port/big?n=1" && break
  sleep 0.1
done

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status"; }
# One download; prints MiB/s (fails unless every byte arrived).
fetch() {
  local out rc=0
  out=$(curl -sS -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' "$@") || rc=$?
  read -r code size speed <<<"$out"
  [[ $rc == 0 && $code == 200 && $size == "$bytes" ]] ||
    { echo "proxy_bench.sh: bad download (curl exit $rc: $out) from ${*: -1}" >&2; exit 1; }
  awk -v s="$speed" 'BEGIN { printf "%.0f", s / 1048576 }'
}

fetch "${api[@]}" "http://127.0.0.1:$port/proxy/8124/big?n=$bytes" >/dev/null  # warm both paths once
fetch "http://127.0.0.1:$nginx_port/big?n=$bytes" >/dev/null
rss_before=$(rss_kib)
(while :; do rss_kib >>"$work/rss"; sleep 0.1; done) &
sampler=$!

echo "proxy bench: $mib MiB per download, $runs rounds, $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$work/proxy" >"$work/nginx_default" >"$work/nginx_nobuf" >"$work/direct"
for ((i = 1; i <= runs; i++)); do
  p=$(fetch "${api[@]}" "http://127.0.0.1:$port/proxy/8124/big?n=$bytes")
  n=$(fetch "http://127.0.0.1:$nginx_port/big?n=$bytes")
  nb=$(fetch "http://127.0.0.1:$nginx_nobuf_port/big?n=$bytes")
  d=$(fetch "http://127.0.0.1:$host_port/big?n=$bytes")
  echo "$p" >>"$work/proxy"; echo "$n" >>"$work/nginx_default"; echo "$nb" >>"$work/nginx_nobuf"; echo "$d" >>"$work/direct"
  printf 'round %d: agentbox /proxy %5s MiB/s   nginx %5s MiB/s   nginx (no buffering) %5s MiB/s   direct %5s MiB/s\n' \
    "$i" "$p" "$n" "$nb" "$d"
done
kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true; sampler=
rss_peak=$(sort -n "$work/rss" | tail -1)

mp=$(median <"$work/proxy"); mn=$(median <"$work/nginx_default"); mnb=$(median <"$work/nginx_nobuf"); md=$(median <"$work/direct")
echo "median MiB/s: agentbox /proxy $mp, nginx proxy_pass $mn, nginx proxy_pass without buffering $mnb, direct $md"
awk -v p="$mp" -v n="$mn" -v nb="$mnb" 'BEGIN { printf "ratio /proxy : nginx = %.2f (target >= 0.90); /proxy : nginx without buffering = %.2f\n", p / n, p / nb }'
echo "daemon RSS: $((rss_before / 1024)) MiB before, $((rss_peak / 1024)) MiB peak during the /proxy downloads"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
