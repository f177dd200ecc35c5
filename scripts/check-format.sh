#!/usr/bin/env bash
# Every C++ file of the tree follows .clang-format, or this fails naming the files.
# Fix with: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
count=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' | wc -l)
# --dry-run prints "FILE:LINE:COL: warning: code should be clang-formatted" per change.
bad=$(git ls-files -z '*.cpp' '*.hpp' '*.h' '*.c' | xargs -0 clang-format --dry-run 2>&1 |
  sed -nE 's/^([^:]+):[0-9]+:[0-9]+: (warning|error): .*/\1/p' | sort -u)
if [[ -n $bad ]]; then
  printf 'check-format: not formatted as .clang-format says: %s\n' $bad >&2
  echo "check-format: FAILED (fix: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i)" >&2
  exit 1
fi
echo "check-format: $count files follow .clang-format"
