#!/usr/bin/env bash
# What the /proc masks cost a box start (issue 17, target <= 1.05x): the masks timed alone
# (proc_mask_bench, with the function a box's init calls) against a whole cold start measured
# by box_bench in the same run. with / without = start / (start - masks).
#   bench/proc_mask_bench.sh [N_MASKS] [N_STARTS]
set -euo pipefail
cd "$(dirname "$0")/.."
n_masks=${1:-500}
n_starts=${2:-100}
build=${BUILD:-build}
cmake --build "$build" --target proc_mask_bench box_bench agentbox-init >/dev/null
masks=$("$build/proc_mask_bench" "$n_masks")
echo "$masks"
start=$("$build/box_bench" --only cold --cold "$n_starts" | tee /dev/stderr |
        sed -nE 's/.*Box::start -> ready, daemon \(zygote, account netns\), median +([0-9.]+) ms.*/\1/p')
mask_us=$(echo "$masks" | sed -nE 's/proc masks median ([0-9.]+) us/\1/p')
python3 -c "
start_ms, mask_ms = float('$start'), float('$mask_us') / 1000
print(f'box start median {start_ms:.2f} ms, of which /proc masks {mask_ms:.3f} ms')
print(f'with masks / without: {start_ms / (start_ms - mask_ms):.3f}x   (target <= 1.05x)')
"
