#!/usr/bin/env python3
"""Trees for bench/mirror_bench.sh.

  mirror_tree.py make DIR FILES     FILES small files (0-4 KiB, random bytes) in directories of 100
  mirror_tree.py change DIR PERCENT SEED   rewrites PERCENT % of the files with a new size
  mirror_tree.py change-next DIR PERCENT SEEDFILE   the same with the seed in SEEDFILE, then + 1
"""
import os
import random
import sys


def files_of(root):
    out = []
    for dp, _, fns in os.walk(root):
        out.extend(os.path.join(dp, n) for n in fns)
    out.sort()
    return out


def make(root, count):
    rnd = random.Random(1)
    for i in range(count):
        d = os.path.join(root, f"d{i // 10000:02}", f"s{(i // 100) % 100:02}")
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:06}.txt"), "wb") as f:
            f.write(rnd.randbytes(rnd.randrange(0, 4096)))


def change(root, percent, seed):
    files = files_of(root)
    rnd = random.Random(seed)
    for path in rnd.sample(files, max(1, len(files) * percent // 100)):
        with open(path, "ab") as f:  # a new size and mtime: what both quick checks look at
            f.write(rnd.randbytes(rnd.randrange(1, 512)))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "change":
        change(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "change-next":
        seed_file = sys.argv[4]
        seed = int(open(seed_file).read()) if os.path.exists(seed_file) else 1
        change(sys.argv[2], int(sys.argv[3]), seed)
        with open(seed_file, "w") as f:
            f.write(str(seed + 1))
    else:
        sys.exit(__doc__)
