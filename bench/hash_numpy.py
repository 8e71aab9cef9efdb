#!/usr/bin/python3
"""Vectorized numpy baseline of Engram addressing, for the hashing-throughput benchmark.

Reads the constants that `bench_hash --dump-params` writes (multipliers, primes, pads), hashes the token stream
as the library does (map lookup, shifted look-backs padded at sequence starts, multiplier x token, XOR, floor
modulo per head, plus the layer's prime offsets), checks its rows against the library's on the first tokens
(`bench_hash --dump-rows`), then times the whole stream and prints `mode=numpy ... tokens_per_s=... rows_per_s=...`.
Run it with Debian's /usr/bin/python3 (numpy) pinned to one core: `taskset -c 0`.
"""
import argparse
import os
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

BOS = 0


def load_params(path):
    """Parse the text written by `bench_hash --dump-params`."""
    p = {"multipliers": [], "primes": [], "layer_ids": []}
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] in ("multipliers", "primes"):
                if w[0] == "multipliers":
                    p["layer_ids"].append(int(w[1]))
                p[w[0]].append([int(x) for x in w[2:]])
            else:
                p[w[0]] = int(w[1])
    p["multipliers"] = np.array(p["multipliers"], dtype=np.int64)
    p["primes"] = np.array(p["primes"], dtype=np.int64)
    p["offsets"] = np.cumsum(p["primes"], axis=1) - p["primes"]
    return p


def hash_rows(tokens, token_map, p, one_seq=False, out=None):
    """Rows [layers, n, columns] (int64, into out if given) of a token stream; each BOS id starts a sequence
    unless one_seq."""
    n = tokens.shape[0]
    N, H, cpad = p["max_ngram"], p["heads"], p["compressed_pad"]
    mult, primes, offsets = p["multipliers"], p["primes"], p["offsets"]
    L = mult.shape[0]

    comp = np.where(tokens >= 0, token_map[np.maximum(tokens, 0)], tokens)
    idx = np.arange(n, dtype=np.int64)
    if one_seq:
        depth = idx
    else:
        starts = np.where(tokens == BOS, idx, 0)
        depth = idx - np.maximum.accumulate(starts)
    shifted = [comp]
    for k in range(1, N):
        s = np.empty_like(comp)
        s[:k] = cpad
        s[k:] = comp[:-k]
        s[depth < k] = cpad
        shifted.append(s)

    if out is None:
        out = np.empty((L, n, (N - 1) * H), dtype=np.int64)
    for li in range(L):
        mix = shifted[0] * mult[li, 0]
        for k in range(1, N):
            mix ^= shifted[k] * mult[li, k]
            cols = slice((k - 1) * H, k * H)
            np.remainder(mix[:, None], primes[li, cols], out=out[li, :, cols])
        out[li] += offsets[li]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", required=True, help="constants from bench_hash --dump-params")
    ap.add_argument("--map", default="fixtures/ref/v41/v41.token_map.npy")
    ap.add_argument("--tokens", default="fixtures/tokens/fortunes-en.npy")
    ap.add_argument("--check", help="rows from bench_hash --dump-rows (.npy uint64 [layers, n, columns])")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one-seq", action="store_true", help="the whole stream is one sequence")
    a = ap.parse_args()

    p = load_params(a.params)
    token_map = np.load(a.map).astype(np.int64)
    tokens = np.load(a.tokens).astype(np.int64)
    n = tokens.shape[0]
    per_tok = p["layers"] * p["columns"]
    if token_map.shape[0] != p["raw_vocab"]:
        sys.exit(f"hash_numpy: map has {token_map.shape[0]} entries, params say {p['raw_vocab']}")
    print(f"# hash_numpy: numpy {np.__version__}, {n} tokens, {per_tok} row ids per token, "
          f"{'whole stream as one sequence' if a.one_seq else 'each BOS id 0 starts a sequence'}")

    if a.check:
        want = np.load(a.check)
        m = want.shape[1]
        got = hash_rows(tokens[:m], token_map, p, a.one_seq)
        if got.shape != want.shape or not np.array_equal(got.astype(np.uint64), want):
            bad = np.argwhere(got.astype(np.uint64) != want) if got.shape == want.shape else None
            sys.exit(f"check=MISMATCH against {a.check}: first difference at {None if bad is None else bad[0]}")
        print(f"check=ok {m} tokens x {per_tok} rows equal to {a.check}")

    out = np.empty((p["layers"], n, p["columns"]), dtype=np.int64)
    out.fill(0)
    best = float("inf")
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        hash_rows(tokens, token_map, p, a.one_seq, out)
        best = min(best, time.perf_counter() - t0)
    print(f"mode=numpy runs={a.repeats} best_s={best:.6f} tokens_per_s={n / best:.0f} "
          f"rows_per_s={n * per_tok / best:.0f}")


if __name__ == "__main__":
    main()
