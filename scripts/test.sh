#!/usr/bin/env bash
# Installs, builds and runs every test: the normal build, then the same tests under
# AddressSanitizer/UndefinedBehaviorSanitizer. Needs root (boxes use host uids and cgroups).
# One phase at a time: the suites time fairness and isolation under load they make themselves,
# so a compile beside them (even at nice 19) can fail them.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "scripts/test.sh: run as root (the tests start real boxes)" >&2; exit 1; }

run_suite() {
  local dir=$1
  echo "== tests in $dir"
  ctest --test-dir "$dir" --output-on-failure -j2 --timeout 600
}

bash scripts/build.sh
run_suite build
echo "== e2e (black-box HTTP suite against build/agentbox serve)"
AGENTBOX_BIN="$PWD/build/agentbox" /usr/bin/python3 -m pytest tests/e2e -q -p no:cacheprovider
echo "== red team with other addresses (a daemon in a world netns whose routes end in a recording bait netns)"
AGENTBOX_BIN="$PWD/build/agentbox" /usr/bin/python3 -m pytest tests/redteam -q -p no:cacheprovider
if [[ ${AGENTBOX_SKIP_ASAN:-0} != 1 ]]; then
  bash scripts/build.sh --asan
  run_suite build-asan
fi
