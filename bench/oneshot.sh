#!/usr/bin/env bash
# One-shot sandbox start, all peers in one run: `agentbox run -- /bin/true` against bwrap
# (namespaces and mounts only), srt (Anthropic's sandbox-runtime), plain /bin/true and the floor
# (build-bench/oneshot_floor, bench/oneshot_floor.c: the namespaces, mounts and uid of agentbox's
# box and the exec, in one static C program: what no implementation of this box can go below).
# hyperfine measures; the runs are split into rounds that alternate the commands so that the
# load of a busy machine falls on all of them alike; oneshot_summary.py pools the rounds and
# prints medians and ratios.
#
#   bench/oneshot.sh [BUILD_DIR]      (default: build-bench next to bench/; run as root)
# Builds agentbox, agentbox-init and oneshot_floor there in Release first (NO_BUILD=1: as it is).
# Tunables (environment): ROUNDS (5), RUNS per round for the fast commands (60),
# SRT_RUNS per round (4), CPU_RUNS for the CPU-time pass (30; srt: 5), KEEP=1 keeps the
# hyperfine JSON files.
# CPU time comes from `perf stat -e task-clock` (inherited by every descendant, reaped or not),
# not from hyperfine's user/system: those count only children their parent waited for, which
# misses bwrap's sandboxed child. Skipped with a note when perf is not installed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build=${1:-$here/../build-bench}
build_bench "$build" agentbox agentbox-init oneshot_floor
build=$(cd "$build" && pwd)
agentbox=$build/agentbox
floor=$build/oneshot_floor
srt=$here/node_modules/.bin/srt
rounds=${ROUNDS:-5}
runs=${RUNS:-60}
srt_runs=${SRT_RUNS:-4}

[[ $(id -u) -eq 0 ]] || { echo "oneshot.sh: run as root (agentbox run uses cgroups as root)" >&2; exit 2; }
[[ -x $agentbox ]] || { echo "oneshot.sh: $agentbox not built" >&2; exit 2; }
[[ -x $floor ]] || { echo "oneshot.sh: $floor not built" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "oneshot.sh: hyperfine missing (scripts/install-deps.sh)" >&2; exit 2; }
command -v bwrap >/dev/null || { echo "oneshot.sh: bwrap missing (scripts/install-deps.sh)" >&2; exit 2; }
[[ -x $srt ]] || { echo "oneshot.sh: $srt missing (scripts/install-deps.sh installs it)" >&2; exit 2; }

bwrap_cmd="bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib"
bwrap_cmd+=" --symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev /bin/true"

# Every command starts in an empty directory: srt looks for sensitive files under its cwd,
# and none of the peers should pay for scanning this repository.
work=$(mktemp -d /tmp/agentbox-oneshot-XXXXXX)
if [[ ${KEEP:-0} == 1 ]]; then
  echo "oneshot.sh: hyperfine JSON kept in $work"
else
  trap 'rm -rf "$work"' EXIT
fi
cd "$work"

# agentbox runs the issue's exact command, profile lookup included; a newcomer has no profile.
profile=${HOME:-/root}/.config/agentbox/run.toml
[[ -e $profile ]] && echo "oneshot.sh: note: $profile exists; agentbox's figures include what it adds"
echo "oneshot: $rounds rounds x $runs runs (srt: $srt_runs per round); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  hyperfine -N --style none --warmup 3 --runs "$runs" --export-json "$work/fast-$r.json" \
    -n agentbox "$agentbox run -- /bin/true" \
    -n bwrap "$bwrap_cmd" \
    -n floor "$floor -- /bin/true" \
    -n true "/bin/true"
  hyperfine -N --style none --warmup 1 --runs "$srt_runs" --export-json "$work/srt-$r.json" \
    -n srt "$srt -c true"
  echo "  round $r/$rounds done (load $(cut -d' ' -f1 /proc/loadavg))"
done

# CPU time per command: a separate pass, since perf's counting would distort the wall times.
cpu_runs=${CPU_RUNS:-30}
: >"$work/cpu.csv"
cpu_time() {  # NAME RUNS COMMAND...
  local name=$1 n=$2
  shift 2
  perf stat -r "$n" -x, -e task-clock -o "$work/perf-$name.txt" -- "$@" >/dev/null 2>&1
  # The task-clock line: "msec,unit,event,...": the mean over the runs, ms.
  awk -F, -v name="$name" '$3 == "task-clock" { print name "," $1 }' "$work/perf-$name.txt" >>"$work/cpu.csv"
}
if command -v perf >/dev/null; then
  read -ra bwrap_argv <<<"$bwrap_cmd"
  cpu_time agentbox "$cpu_runs" "$agentbox" run -- /bin/true
  cpu_time bwrap "$cpu_runs" "${bwrap_argv[@]}"
  cpu_time floor "$cpu_runs" "$floor" -- /bin/true
  cpu_time true "$cpu_runs" /bin/true
  cpu_time srt 5 "$srt" -c true
else
  echo "oneshot.sh: perf not installed: no CPU-time figures"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 "$here/oneshot_summary.py" --cpu "$work/cpu.csv" "$work"/*.json
