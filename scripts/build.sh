#!/usr/bin/env bash
# Installs the dependencies and builds agentbox.
#   scripts/build.sh          the daemon and CLI into ./build (agentbox, agentbox-serve,
#                             agentbox-init) and the red-team probe the e2e suite uploads
#   scripts/build.sh --all    everything into ./build: also the unit, integration and red-team
#                             test drivers and the benchmark drivers
#   scripts/build.sh --asan   everything into ./build-asan with AddressSanitizer and
#                             UndefinedBehaviorSanitizer (clang: half gcc's compile time here)
# AGENTBOX_BUILD_TYPE=Release|Debug|... sets ./build's CMake build type (default: the project's,
# RelWithDebInfo); scripts/test.sh builds Release.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
dir=build
args=(${AGENTBOX_BUILD_TYPE:+-DCMAKE_BUILD_TYPE=$AGENTBOX_BUILD_TYPE})
targets=(agentbox agentbox-serve agentbox-init abx-probe)
case ${1:-} in
  "") ;;
  --all) targets=(all) ;;
  --asan)
    dir=build-asan
    targets=(all)
    # Line tables only (-g1): what a sanitizer report needs, a third less compile time than -g.
    args=(-DAGENTBOX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1
          -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
    ;;
  *) echo "usage: scripts/build.sh [--all | --asan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja "${args[@]}" >/dev/null
cmake --build "$dir" --target "${targets[@]}" -- -j"$(nproc)" | grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true
for bin in agentbox agentbox-serve agentbox-init tests/abx-probe; do
  test -x "$dir/$bin" || { echo "build failed: no $dir/$bin" >&2; exit 1; }
done
