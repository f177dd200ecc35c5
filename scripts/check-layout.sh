#!/usr/bin/env bash
# The rooms' arrows (docs/ARCHITECTURE.md "Rooms and arrows"), held: every #include "ROOM/..."
# in src/ must follow an arrow of the table below, or this fails naming the file and the include.
# src/http is the HTTP library and includes util/ alone; a room includes only rooms below it.
# A new arrow is a design decision: add it here and to ARCHITECTURE.md in the same commit.
set -euo pipefail
cd "$(dirname "$0")/.."

# room: the rooms it may include (besides itself). "main" is src/main.cpp, the CLI's entry.
declare -A allowed=(
  [util]=""
  [metrics]="util"
  [audit]="util"
  [http]="util"
  [box]="util metrics audit"
  [fs]="util"
  [store]="util audit"
  [backup]="util"
  [volumes]="fs util metrics"
  [exec]="box store util"
  [net]="box store util metrics audit"
  [config]="box net util"
  [cluster]="config util"
  [cli]="backup box cluster config net util"
  [accounts]="box cluster fs http store util volumes metrics audit"
  [agent]="accounts box exec fs http store util volumes"
  [moves]="accounts backup cluster config fs http store util metrics audit"
  [api]="accounts agent backup box config exec fs http moves net store util metrics audit"
  [mcp]="accounts api http util"
  [daemon]="accounts agent api backup box cli config exec http mcp moves net store util volumes metrics audit"
  [main]="cli util"
)

bad=0
while IFS= read -r -d '' file; do
  rel=${file#src/}
  if [[ $rel == */* ]]; then room=${rel%%/*}; else room=main; fi
  if [[ ! -v allowed[$room] ]]; then
    echo "check-layout: $file: src/$room is not a room of the table in scripts/check-layout.sh" >&2
    bad=1
    continue
  fi
  while IFS= read -r line; do
    target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"$line")
    [[ $target == */* ]] || continue
    to=${target%%/*}
    [[ $to == "$room" ]] && continue
    [[ -v allowed[$to] ]] || continue  # not a room (a generated header, a library's)
    if [[ " ${allowed[$room]} " != *" $to "* ]]; then
      echo "check-layout: $file includes \"$target\": src/$room may include only: ${allowed[$room]:-nothing}" >&2
      bad=1
    fi
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$file" || true)
done < <(find src \( -name '*.cpp' -o -name '*.hpp' \) -print0 | sort -z)

# spdlog is the daemon's log sink and nobody else's: every room logs through util/log.hpp, and
# the static `agentbox` links no logging library (docs/ARCHITECTURE.md "Logging").
while IFS= read -r file; do
  echo "check-layout: $file includes spdlog: only src/daemon/spdlog_sink.cpp may (log through util/log.hpp)" >&2
  bad=1
done < <(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<spdlog/' src | sort | grep -vx 'src/daemon/spdlog_sink.cpp' || true)

if [[ $bad -ne 0 ]]; then
  echo "check-layout: FAILED (the arrows are in scripts/check-layout.sh and docs/ARCHITECTURE.md)" >&2
  exit 1
fi
echo "check-layout: every include follows the rooms' arrows; spdlog only in the daemon's sink"
