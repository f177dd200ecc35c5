#!/usr/bin/env bash
# One-shot sandbox start, all peers in one run: `agentbox run -- /bin/true` against bwrap
# (namespaces and mounts only), srt (Anthropic's sandbox-runtime) and plain /bin/true.
# hyperfine measures; the runs are split into rounds that alternate the commands so that the
# load of a busy machine falls on all of them alike; oneshot_summary.py pools the rounds and
# prints medians and ratios.
#
#   bench/oneshot.sh [BUILD_DIR]      (default: build-bench next to bench/; run as root)
# Tunables (environment): ROUNDS (5), RUNS per round for the fast commands (60),
# SRT_RUNS per round (4), KEEP=1 keeps the hyperfine JSON files.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build-bench}" && pwd)
agentbox=$build/agentbox
srt=$here/node_modules/.bin/srt
rounds=${ROUNDS:-5}
runs=${RUNS:-60}
srt_runs=${SRT_RUNS:-4}

[[ $(id -u) -eq 0 ]] || { echo "oneshot.sh: run as root (agentbox run uses cgroups as root)" >&2; exit 2; }
[[ -x $agentbox ]] || { echo "oneshot.sh: $agentbox not built (bench/run_all.sh builds it)" >&2; exit 2; }
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

echo "oneshot: $rounds rounds x $runs runs (srt: $srt_runs per round); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  hyperfine -N --style none --warmup 3 --runs "$runs" --export-json "$work/fast-$r.json" \
    -n agentbox "$agentbox run --no-profile -- /bin/true" \
    -n bwrap "$bwrap_cmd" \
    -n true "/bin/true"
  hyperfine -N --style none --warmup 1 --runs "$srt_runs" --export-json "$work/srt-$r.json" \
    -n srt "$srt -c true"
  echo "  round $r/$rounds done (load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 "$here/oneshot_summary.py" "$work"/*.json
