#!/usr/bin/env bash
# The seccomp allowlist's cost against the deny-list it replaced (issue 17): a syscall-heavy
# loop (getpid, stat, a read of /dev/zero) under each filter, and under none, alternated RUNS
# times; medians and the ratio. The deny-list is built from git (REV, default acea285, the last
# commit with it) by the same libseccomp; today's allowlist from the tree.
#   bench/seccomp_bench.sh [RUNS] [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-21}
iterations=${2:-200000}
rev=${REV:-acea285}
build=${BUILD:-build}
cmake --build "$build" --target agentbox_util >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old/box/contain"
git show "$rev:src/box/contain/seccomp.cpp" >"$work/old/box/contain/seccomp.cpp"
git show "$rev:src/box/contain/seccomp.hpp" >"$work/old/box/contain/seccomp.hpp"
flags=(-std=c++20 -O2 -DFMT_HEADER_ONLY=1)
# The old seccomp.hpp declares what the old seccomp.cpp defines; export_filter uses only build_program().
g++ "${flags[@]}" -I"$work/old" -Isrc bench/seccomp/export_filter.cpp "$work/old/box/contain/seccomp.cpp" \
  "$build/libagentbox_util.a" -lseccomp -o "$work/export_old"
g++ "${flags[@]}" -Isrc bench/seccomp/export_filter.cpp src/box/contain/seccomp.cpp \
  "$build/libagentbox_util.a" -lseccomp -o "$work/export_new"
gcc -O2 bench/seccomp/syscall_loop.c -o "$work/loop"
echo "deny-list ($rev): $("$work/export_old" "$work/deny.bpf")"
echo "allowlist (tree): $("$work/export_new" "$work/allow.bpf")"

for _ in $(seq "$runs"); do
  for kind in none deny allow; do
    filter=none
    [[ $kind != none ]] && filter=$work/$kind.bpf
    echo "$kind $("$work/loop" "$filter" "$iterations")"
  done
done >"$work/times"
python3 - "$work/times" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    kind, ns = line.split()
    times.setdefault(kind, []).append(float(ns))
med = {k: statistics.median(v) for k, v in times.items()}
for k in ("none", "deny", "allow"):
    print(f"{k:6} median {med[k]:7.1f} ns per round (getpid + stat + read), {len(times[k])} runs")
print(f"allowlist / deny-list: {med['allow'] / med['deny']:.3f}x   (target <= 1.05x)")
print(f"allowlist / no filter: {med['allow'] / med['none']:.3f}x")
PY
