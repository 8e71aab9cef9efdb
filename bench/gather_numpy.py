#!/usr/bin/python3
"""numpy baseline of the warm gather benchmark: fancy indexing on np.memmap, as engines gather rows today.

Reads what `bench_gather -D DIR warm` writes: offsets.npy (absolute file offsets of the records to gather,
[steps, layers, rows]), layout.txt (shard path, record size, rows per page) and expected.npy (the library's
native rows of the first and last step). The shard's pages are viewed as a [pages, rows_per_page, record]
uint8 array (np.lib.stride_tricks.as_strided over one np.memmap of the file: the same bytes, no copy), and
each step's rows of each layer are gathered with one fancy index, view[page, slot], which returns a new
[rows, record] array as `table[idx]` does. After an untimed pass (faults the mapping in, checks the first and
last step against the library's bytes) it times --repeats passes and prints, as bench_gather does, the sum over
steps of each step's fastest pass (best_s) and the fastest whole pass (pass_s):
`mode=numpy ... rows_per_s=... gb_per_s=...`. Run with Debian's /usr/bin/python3, pinned: `taskset -c 0`.
"""
import argparse
import os
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="directory written by bench_gather -D")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()

    lay = {}
    with open(os.path.join(a.dir, "layout.txt")) as f:
        for line in f:
            k, v = line.split(None, 1)
            lay[k] = v.strip()
    rec, rpp = int(lay["record_size"]), int(lay["rows_per_page"])
    off = np.load(os.path.join(a.dir, "offsets.npy"))
    expected = np.load(os.path.join(a.dir, "expected.npy"))
    steps, layers, n = off.shape

    size = os.path.getsize(lay["shard"])
    pages = size // 4096
    mm = np.memmap(lay["shard"], dtype=np.uint8, mode="r", shape=(pages * 4096,))
    view = np.lib.stride_tricks.as_strided(mm, shape=(pages, rpp, rec), strides=(4096, rec, 1), writeable=False)
    # the row ids an engine would hold, as (page, slot) pairs of this layout
    page = off // 4096
    slot = (off % 4096) // rec

    smin = [float("inf")] * steps
    best_pass = float("inf")
    for r in range(a.repeats + 1):
        t0 = time.perf_counter()
        for s in range(steps):
            s0 = time.perf_counter()
            for li in range(layers):
                out = view[page[s, li], slot[s, li]]
                if r == 0 and s in (0, steps - 1):
                    k = 0 if s == 0 else 1
                    if not np.array_equal(out, expected[k, li]):
                        print(f"numpy: step {s} layer {li}: rows differ from the library's", file=sys.stderr)
                        return 1
            s0 = time.perf_counter() - s0
            if r > 0:
                smin[s] = min(smin[s], s0)
        dt = time.perf_counter() - t0
        if r > 0:
            best_pass = min(best_pass, dt)
    best = sum(smin)
    rows = steps * layers * n
    print(f"mode=numpy out=native seqs={n // 24 if n % 24 == 0 else n} steps={steps} rows={rows} rows_per_call={n} "
          f"best_s={best:.6f} pass_s={best_pass:.6f} rows_per_s={rows / best:.0f} gb_per_s={rows * rec / best * 1e-9:.3f} check=ok "
          f"numpy={np.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
