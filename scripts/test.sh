#!/usr/bin/env bash
# Installs, builds and runs every test: the normal build, then the same tests under
# AddressSanitizer/UndefinedBehaviorSanitizer. Needs root (boxes use host uids and cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "scripts/test.sh: run as root (the tests start real boxes)" >&2; exit 1; }

run_suite() {
  local dir=$1
  echo "== tests in $dir"
  ctest --test-dir "$dir" --output-on-failure -j2 --timeout 600
}

bash scripts/build.sh

# The sanitizer build compiles at the lowest CPU priority while the normal build's suites run
# (they mostly wait on boxes and sockets), so the two overlap instead of queueing. Its own
# session, so that a failing suite stops it too.
asan_pid=
asan_log=$(mktemp)
stop_asan_build() { [[ -z $asan_pid ]] || kill -- -"$asan_pid" 2>/dev/null || true; rm -f "$asan_log"; }
trap stop_asan_build EXIT
if [[ ${AGENTBOX_SKIP_ASAN:-0} != 1 ]]; then
  setsid -w nice -n 19 bash scripts/build.sh --asan >"$asan_log" 2>&1 &
  asan_pid=$!
fi

run_suite build
echo "== e2e (black-box HTTP suite against build/agentbox serve)"
AGENTBOX_BIN="$PWD/build/agentbox" /usr/bin/python3 -m pytest tests/e2e -q -p no:cacheprovider
echo "== red team with other addresses (a daemon in a world netns whose routes end in a recording bait netns)"
AGENTBOX_BIN="$PWD/build/agentbox" /usr/bin/python3 -m pytest tests/redteam -q -p no:cacheprovider

if [[ -n $asan_pid ]]; then
  echo "== ASan/UBSan build (started beside the suites above)"
  status=0
  wait "$asan_pid" || status=$?
  asan_pid=
  cat "$asan_log"
  ((status == 0)) || { echo "scripts/test.sh: the ASan build failed ($status)" >&2; exit 1; }
  run_suite build-asan
fi
