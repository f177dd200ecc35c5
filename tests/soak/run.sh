#!/usr/bin/env bash
# The soak (tests/soak/README.md): tests/soak/run.sh --minutes N [--users U] [--seed S] [--phase SECONDS]
# with AGENTBOX_BIN naming the daemon (default: ./build/agentbox). Root; loopback and the boxes'
# own namespaces only; bounded by `timeout` whatever happens inside.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export AGENTBOX_BIN="${AGENTBOX_BIN:-$here/../../build/agentbox}"
minutes=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ ${args[i]} == --minutes ]] && minutes=${args[i + 1]:-0}
done
[[ $minutes != 0 ]] || { echo "usage: tests/soak/run.sh --minutes N [--users U] [--seed S]" >&2; exit 2; }
# The workload's time plus the final checks and the clean stop; never more.
limit=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 + 600 }')
exec timeout -k 30 "$limit" /usr/bin/python3 -u "$here/soak.py" "$@"
