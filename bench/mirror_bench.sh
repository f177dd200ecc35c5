#!/usr/bin/env bash
# Mirror of homes (issue 16): the engine the daemon runs every [backup] interval, driven through
# `agentbox backup mirror-once SRC DST` (the same mirror_tree() pass, without a daemon), against
# `rsync -a --delete SRC/ DST/` on an identical tree: FILES (100,000) small files (0-4 KiB in
# directories of 100). Two timings, each the median of RUNS (hyperfine):
#   first pass   into an empty mirror (removed before each run, outside the timing);
#   incremental  with PERCENT (1) % of the files rewritten before each run (outside the timing).
# Each tool mirrors its own copy of the tree, so each run sees exactly its PERCENT % of changes;
# both trees are in the page cache (made just before), as a home in use is. agentbox also keeps
# every overwritten file under .deleted/ (a hard link), which rsync is not asked to do.
# Target: agentbox time <= rsync time (ratio rsync/agentbox >= 1.0) for both.
#
#   bench/mirror_bench.sh [BUILD_DIR]    (default: build-bench next to bench/; run as root)
# Environment: FILES (100000), PERCENT (1), RUNS (5), NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
files=${FILES:-100000}
percent=${PERCENT:-1}
runs=${RUNS:-5}

[[ $(id -u) -eq 0 ]] || { echo "mirror_bench.sh: run as root (the mirror keeps owners)" >&2; exit 2; }
for tool in rsync hyperfine python3; do
  command -v "$tool" >/dev/null || { echo "mirror_bench.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 2; }
done
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox
build=$(cd "$build" && pwd)
[[ -x $build/agentbox ]] || { echo "mirror_bench.sh: no $build/agentbox" >&2; exit 2; }

work=$(mktemp -d /tmp/agentbox-mirrorbench-XXXXXX)
trap 'rm -rf "$work"' EXIT
tree="$here/mirror_tree.py"

echo "making $files files twice in $work ..." >&2
python3 "$tree" make "$work/src-a" "$files"
cp -a "$work/src-a" "$work/src-r"

median_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$1"; }

# First pass: into an empty mirror each run.
hyperfine -N --runs "$runs" --style basic --export-json "$work/first-a.json" \
  --prepare "rm -rf $work/dst-a" "$build/agentbox backup mirror-once $work/src-a $work/dst-a" >&2
hyperfine -N --runs "$runs" --style basic --export-json "$work/first-r.json" \
  --prepare "rm -rf $work/dst-r" "rsync -a --delete $work/src-r/ $work/dst-r/" >&2

# Incremental: PERCENT % rewritten before each run (seeds 1, 2, ...: the same files for both).
hyperfine -N --runs "$runs" --style basic --export-json "$work/incr-a.json" \
  --prepare "python3 $tree change-next $work/src-a $percent $work/seed-a" \
  "$build/agentbox backup mirror-once $work/src-a $work/dst-a" >&2
hyperfine -N --runs "$runs" --style basic --export-json "$work/incr-r.json" \
  --prepare "python3 $tree change-next $work/src-r $percent $work/seed-r" \
  "rsync -a --delete $work/src-r/ $work/dst-r/" >&2

# The copies are equal to their sources (content, modes, times), or the timings mean nothing.
diff -r "$work/src-a" "$work/dst-a/home" >/dev/null || { echo "mirror_bench.sh: agentbox's copy differs" >&2; exit 1; }
diff -r "$work/src-r" "$work/dst-r" >/dev/null || { echo "mirror_bench.sh: rsync's copy differs" >&2; exit 1; }

fa=$(median_of "$work/first-a.json") fr=$(median_of "$work/first-r.json")
ia=$(median_of "$work/incr-a.json") ir=$(median_of "$work/incr-r.json")
printf '%-28s %12s %12s %10s\n' "mirror of $files files" "agentbox s" "rsync s" "rsync/ab"
printf '%-28s %12.3f %12.3f %9.2fx\n' "first pass" "$fa" "$fr" "$(python3 -c "print($fr/$fa)")"
printf '%-28s %12.3f %12.3f %9.2fx\n' "incremental, $percent% changed" "$ia" "$ir" "$(python3 -c "print($ir/$ia)")"
