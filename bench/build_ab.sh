#!/usr/bin/env bash
# The current build against a baseline build of an earlier commit, side by side in one run
# (bench/build_ab.py measures, rounds alternating): the exec round trip of `true`, the terminal
# keystroke echo, and 1 GiB through an egress CONNECT tunnel. For changes that must not cost the
# hot paths anything (issue 30's limits: <= 1.05x the build before them).
#
#   bench/build_ab.sh BASELINE_REF      (as root)
# Environment: BUILD_DIR (default build, the project's default build type), BASELINE_DIR
# (default build-baseline-REF; built from a temporary worktree if it holds no agentbox-serve),
# NO_BUILD=1 uses BUILD_DIR as it is, BUILD_AB_ARGS (extra options for build_ab.py, e.g.
# "--rounds 3 --mib 256" for a short check).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
ref=${1:?usage: bench/build_ab.sh BASELINE_REF}
build=${BUILD_DIR:-$root/build}
baseline=${BASELINE_DIR:-$root/build-baseline-$ref}
python=/usr/bin/python3  # Debian's, with python3-websockets (scripts/install-deps.sh)

[[ $(id -u) -eq 0 ]] || { echo "build_ab.sh: run as root (agentbox serve gives each user a uid)" >&2; exit 2; }

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
targets=(agentbox agentbox-serve agentbox-init)
if [[ ${NO_BUILD:-0} != 1 ]]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
  cmake --build "$build" --target "${targets[@]}" >/dev/null
fi
if [[ ! -x $baseline/agentbox-serve ]]; then
  src=$(mktemp -d /tmp/agentbox-baseline-XXXXXX)
  git -C "$root" worktree add --detach "$src" "$ref" >/dev/null 2>&1
  cmake -S "$src" -B "$baseline" -G Ninja >/dev/null
  cmake --build "$baseline" --target "${targets[@]}" >/dev/null
  git -C "$root" worktree remove --force "$src"
fi
build=$(cd "$build" && pwd)
baseline=$(cd "$baseline" && pwd)

work=$(mktemp -d /tmp/agentbox-ab-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

origin_port=$(free_port)
python3 "$here/serve_bytes.py" "$origin_port" &
pids+=($!)
cat >"$work/config.toml" <<EOF
[policy.default]
allow = ["bait.test"]
allow_addresses = ["127.0.0.1/32"]
[hosts]
"bait.test" = "127.0.0.1"
EOF
key=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
start_daemon() {  # BUILD NAME UID_BASE; its pid joins pids (not in a subshell: cleanup needs it)
  AGENTBOX_UID_BASE=$3 env -u AGENTBOX_CONFIG AGENTBOX_API_KEY="$key" "$1/agentbox" serve --listen 127.0.0.1:0 \
    --state "$work/$2" --config "$work/config.toml" >"$work/$2.log" 2>&1 &
  pids+=($!)
}
start_daemon "$baseline" baseline "$AGENTBOX_UID_BASE"
# the next slot of bench/lib.sh's range for the second daemon
start_daemon "$build" current $((2000000 + 65536 * (12288 + ($$ + 1) % 4096)))
base_port=$(daemon_port "${pids[-2]}" "$work/baseline.log" build_ab.sh)
cur_port=$(daemon_port "${pids[-1]}" "$work/current.log" build_ab.sh)

echo "== $(git -C "$root" rev-parse --short HEAD) (${build#"$root"/}) against $ref (${baseline#"$root"/}), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "host:   $(uname -r), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "reproduce: bench/build_ab.sh $ref${BUILD_AB_ARGS:+  (BUILD_AB_ARGS=\"$BUILD_AB_ARGS\")}"
# shellcheck disable=SC2086  # BUILD_AB_ARGS is a list of options
PYTHONPATH=$here "$python" "$here/build_ab.py" --baseline "127.0.0.1:$base_port" --current "127.0.0.1:$cur_port" \
  --key "$key" --origin-port "$origin_port" ${BUILD_AB_ARGS:-}
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) at the end"
