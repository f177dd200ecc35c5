#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz into ./build-fuzz (clang, ASan + UBSan) and runs
# each for SECONDS_PER_TARGET (default 20), two at a time, on a scratch copy of its seed corpus
# (tests/fuzz/corpus/NAME: what the fuzzer finds stays out of the tree), after running the kept
# crash inputs of tests/fuzz/regressions/NAME once each. Any crash, leak, timeout, memory blow-up
# or sanitizer report fails the script and names the input that caused it.
#
#   scripts/fuzz.sh            # 20 s per target
#   scripts/fuzz.sh 600        # a longer hunt
#   FUZZ_TARGETS="multipart byte_range" scripts/fuzz.sh 60   # some targets only
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]" >&2; exit 2; }

AGENTBOX_SKIP_NPM=1 bash scripts/install-deps.sh  # clang and its libFuzzer runtime among them

started=$(date +%s)
nice -n 10 cmake -S . -B build-fuzz -G Ninja -DAGENTBOX_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" >/dev/null
# Assertions stay on (no -DNDEBUG): a failed BOOST_ASSERT in Beast is a finding too.
nice -n 10 cmake --build build-fuzz --target fuzzers -- -j2 | grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true
echo "== fuzz build: $(($(date +%s) - started)) s"

targets=()
for src in tests/fuzz/*_fuzz.cpp; do
  name=$(basename "$src" _fuzz.cpp)
  [[ -z ${FUZZ_TARGETS:-} || " $FUZZ_TARGETS " == *" $name "* ]] || continue
  test -x "build-fuzz/tests/fuzz/${name}_fuzz" || { echo "fuzz build failed: no build-fuzz/tests/fuzz/${name}_fuzz" >&2; exit 1; }
  targets+=("$name")
done

# Scratch space: corpora, artifacts, the fuzzers' own files (TMPDIR); on tmpfs when there is one.
base=/tmp
[[ -d /dev/shm && -w /dev/shm ]] && base=/dev/shm
scratch=$(mktemp -d "$base/agentbox-fuzz.XXXXXX")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-timeout=10 -rss_limit_mb=2048)

# run_target NAME: the regressions, then the fuzzing; writes $scratch/NAME.result.
run_target() {
  local name=$1 bin=build-fuzz/tests/fuzz/${1}_fuzz
  local dir=$scratch/$name log=$scratch/$name.log
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
  cp -r "tests/fuzz/corpus/$name/." "$dir/corpus/" 2>/dev/null || true
  local regressions=()
  if [[ -d tests/fuzz/regressions/$name ]]; then
    mapfile -t regressions < <(find "tests/fuzz/regressions/$name" -type f | sort)
  fi
  if ((${#regressions[@]})); then
    if ! TMPDIR=$dir/tmp "$bin" "${limits[@]}" -artifact_prefix="$dir/artifacts/" "${regressions[@]}" >"$log" 2>&1; then
      local which
      which=$(grep -oE '^Running: \S+' "$log" | tail -1 | cut -d' ' -f2)
      echo "FAIL regression ${which:-(see log)}" >"$scratch/$name.result"
      return
    fi
  fi
  if TMPDIR=$dir/tmp "$bin" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$log" 2>&1; then
    # "#1875189<TAB>DONE   cov: 256 ft: 512 corp: 95/2558b lim: 4096 exec/s: 117199 rss: 482Mb"
    local stats
    stats=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 |
            sed -E 's/^#([0-9]+)[[:space:]]+DONE[[:space:]]+cov: ([0-9]+) ft: ([0-9]+) corp: ([^ ]+).*exec\/s: ([0-9]+).*/\1 runs, \5 exec\/s, cov \2, ft \3, corpus \4/' || true)
    echo "ok ${stats:-(no stats)}" >"$scratch/$name.result"
  else
    local input
    input=$(grep -oE 'Test unit written to \S+' "$log" | tail -1 | awk '{print $5}')
    echo "FAIL input ${input:-(none written; see log)}" >"$scratch/$name.result"
  fi
}

echo "== fuzzing ${#targets[@]} targets, ${seconds} s each, two at a time (scratch: $scratch)"
running=0
for name in "${targets[@]}"; do
  if ((running == 2)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$name" &
  running=$((running + 1))
done
wait || true

failed=0
for name in "${targets[@]}"; do
  result=$(cat "$scratch/$name.result" 2>/dev/null || echo "FAIL no result (see log)")
  printf '%-16s %s\n' "$name" "$result"
  if [[ $result == FAIL* ]]; then
    failed=1
    echo "---- $name: the end of $scratch/$name.log" >&2
    tail -n 40 "$scratch/$name.log" >&2
    input=$(awk '{print $3}' <<<"$result")
    if [[ $result == "FAIL input /"* ]]; then
      echo "---- $name crashed on $input: reproduce with build-fuzz/tests/fuzz/${name}_fuzz $input;" \
           "once fixed, keep it as a regression input: cp $input tests/fuzz/regressions/$name/" >&2
    elif [[ $result == "FAIL regression tests/"* ]]; then
      echo "---- $name: the kept input $input fails again (build-fuzz/tests/fuzz/${name}_fuzz $input)" >&2
    fi
  fi
done
if ((failed)); then
  echo "fuzz: FAILED (logs and inputs kept in $scratch)" >&2
  exit 1
fi
rm -rf "$scratch"
echo "fuzz: ok"
