#!/usr/bin/python3
"""The warm decode step of bench_step.c through the Python binding: what Python adds per call.

Same shard, token schedule, passes and output as bench_step (sequence l reads the stream from position
n_tokens * l // S, one token a step; store preloaded; page-cache session; every pass resets each slot first;
one untimed warm-up pass). A step is session.begin(), session.push_batch(seqs, tokens) with seqs a numpy.uintc
array and tokens an int64 row of a preallocated [steps, S] array, and session.gather(layer, dtype, out=buf) of
every layer into preallocated page-aligned numpy arrays (mode=python) and, when torch imports, into torch
tensors of the gather's dtype (mode=python-torch; torch aligns them to 64 bytes).

With --c-pass LIB (bench_step built as $(B)/bench/libbench_step.so), bench_step's own C step runs in this
process too, on a session of its own, into page-aligned buffers (mode=c-with-python, c-with-python-torch),
alternating step by step with the binding's: both meet the same machine state, which on a shared machine
separate processes do not. Every mode prints a line in bench_step's format (times: for each step and call the
fastest of the timed passes, then the median over them) with the digest of its warm-up pass's gathered bytes;
with --c-pass, mode=python-added (and python-torch-added) gives what the binding adds to each call against the
C steps it alternated with, and the ratio of the steps. Last, mode=python-call-path: what the binding's code
costs per call next to a bare ctypes call, on an empty step, warm.
Run with the package of this checkout and the library of the build: PYTHONPATH=python ENGRAM_LIBDIR=build,
pinned.
"""
import argparse
import ctypes
import time

import numpy as np

import engram

_TORCH_DTYPES = {"bf16": "bfloat16", "f32": "float32", "native": "uint8"}
_KINDS = {"native": 0, "bf16": 1, "f32": 2}  # enum engram_out


class Times:
    """Nanoseconds of each timed pass's steps and calls, and the warm-up pass's digest."""

    def __init__(self, passes, n, n_layers):
        self.begin, self.push, self.step = (np.zeros(passes * n, np.uint64) for _ in range(3))
        self.gather = np.zeros(passes * n * n_layers, np.uint64)
        self.digest = 0


class Python:
    """The step through the binding, into buffers."""

    def __init__(self, session, layers, seqs, steps, dtype, buffers):
        self.session, self.layers, self.seqs, self.steps, self.dtype, self.buffers = \
            session, layers, seqs, steps, dtype, buffers

    def reset(self):
        for seq in range(len(self.seqs)):
            self.session.reset(seq)

    def step(self, t, times, k):
        """Step t, its times at index k of times (None: untimed, its gathered bytes added to the digest)."""
        clock = time.perf_counter_ns
        s, layers, buffers, dtype = self.session, self.layers, self.buffers, self.dtype
        a = clock()
        s.begin()
        b = clock()
        s.push_batch(self.seqs, self.steps[t])
        p = g = clock()
        for li, layer in enumerate(layers):
            s.gather(layer, dtype, out=buffers[li])
            e = clock()
            if k is not None:
                times.gather[k * len(layers) + li] = e - g
            g = e
        if k is not None:
            times.begin[k], times.push[k], times.step[k] = b - a, p - b, g - a
        else:
            for buf in buffers:
                times.digest += int(_bytes_of(buf).view(np.uint64).sum(dtype=np.uint64))


class C:
    """The same step by bench_step_pass() (C, in this process), on its own session, into page-aligned buffers."""

    def __init__(self, lib, session, layers, seqs, steps, dtype, buffers):
        self.lib, self.session, self.seqs, self.steps, self.dtype = lib, session, seqs, steps, dtype
        self.L, self.nbytes = len(layers), buffers[0].nbytes
        self.bufs = (ctypes.c_void_p * self.L)(*[b.ctypes.data for b in buffers])

    def reset(self):
        self.call(True, 0, 0, None, None)

    def step(self, t, times, k):
        self.call(False, t, 1, times, k)

    def call(self, reset, t, n, times, k):
        """bench_step_pass() over steps t..t+n-1; times at index k (None: untimed, bytes into the digest)."""
        S, L = len(self.seqs), self.L
        timed, digest = times is not None and k is not None, ctypes.c_uint64(0)
        at = lambda a, i: a[i:].ctypes.data if timed else None  # noqa: E731
        rc = self.lib.bench_step_pass(self.session._ptr, reset, S, n, self.seqs.ctypes.data,
                                      self.steps.ctypes.data + t * S * 8, L, self.bufs, self.nbytes,
                                      _KINDS[self.dtype], at(times and times.begin, k), at(times and times.push, k),
                                      at(times and times.gather, (k or 0) * L), at(times and times.step, k),
                                      ctypes.byref(digest) if times is not None and k is None else None)
        if rc < 0:
            raise engram.Error(-rc, f"bench_step_pass: {engram._lib.lib.engram_last_error().decode()}")
        if times is not None and k is None:
            times.digest += digest.value


def measure(runners, passes, n, n_layers):
    """An untimed warm-up pass then timed passes of every runner, alternating step by step (runner 0's step t,
    runner 1's step t, ...), so that they meet the same machine; returns their Times."""
    times = [Times(passes, n, n_layers) for _ in runners]
    for r in range(passes + 1):
        for x in runners:
            x.reset()
        for t in range(n):
            for x, tm in zip(runners, times):
                x.step(t, tm, (r - 1) * n + t if r else None)
    return times


def _bytes_of(buf):
    """The bytes of a numpy array or a CPU torch tensor, as a flat numpy uint8 array (no copy)."""
    if isinstance(buf, np.ndarray):
        return buf.reshape(-1).view(np.uint8)
    import torch
    return buf.reshape(-1).view(torch.uint8).numpy()


def aligned_empty(shape, dtype, align=4096):
    """np.empty at a page boundary, as bench_step allocates (numpy's own large arrays start 16 bytes into a page)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + align, np.uint8)
    off = -raw.ctypes.data % align
    return raw[off:off + nbytes].view(dtype).reshape(shape)


def best_us(v, passes):
    """For each step (or call) the fastest of the timed passes, then the median over them, in microseconds."""
    return np.median(v.reshape(passes, -1).min(axis=0)) / 1e3


def report(mode, a, times, n_layers):
    """Print MODE's line; returns the figures (us) by call."""
    us = lambda v: best_us(v, a.passes)  # noqa: E731
    print(f"mode={mode} seqs={a.seqs} steps={a.steps} passes={a.passes} dtype={a.dtype} layers={n_layers} "
          f"step_us={us(times.step):.2f} begin_us={us(times.begin):.2f} push_batch_us={us(times.push):.2f} "
          f"gather_us={us(times.gather):.2f} step_mean_us={times.step.mean() / 1e3:.2f} "
          f"digest={times.digest % (1 << 64):016x}", flush=True)
    return {k: us(getattr(times, k)) for k in ("begin", "push", "gather", "step")}


def call_path(session, layer, dtype):
    """What the binding's own code costs: each call on an empty step (the library has nothing to do) through the
    binding and as a bare ctypes call, best of 5 timeit repeats, in microseconds."""
    import timeit
    from engram._lib import lib
    kind = _KINDS[dtype]
    li = session.config.layer_index(layer)
    session.begin()
    seqs, tokens, buf = np.empty(0, np.uintc), np.empty(0, np.int64), session.gather(layer, dtype, as_tensor=False)
    ptr = session._ptr
    calls = {
        "begin": (lambda: session.begin(), lambda: lib.engram_session_begin(ptr)),
        "push_batch": (lambda: session.push_batch(seqs, tokens),
                       lambda: lib.engram_session_push_batch(ptr, None, None, None, 0)),
        "gather": (lambda: session.gather(layer, dtype, out=buf),
                   lambda: (lib.engram_session_gather_bytes(ptr, li, kind), lib.engram_session_gather(ptr, li, kind,
                                                                                                       None, 0))),
    }
    out = []
    for name, (binding, bare) in calls.items():
        for suffix, f in (("", binding), ("_bare", bare)):
            out.append(f"{name}{suffix}_us={min(timeit.repeat(f, number=20000, repeat=5)) / 20000 * 1e6:.2f}")
    return " ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-s", "--shard", required=True)
    ap.add_argument("-t", "--tokens", default="fixtures/tokens/fortunes-en.npy")
    ap.add_argument("-S", "--seqs", type=int, default=64)
    ap.add_argument("-n", "--steps", type=int, default=500)
    ap.add_argument("-r", "--passes", type=int, default=5)
    ap.add_argument("-d", "--dtype", default="bf16", choices=["bf16", "f32", "native"])
    ap.add_argument("--c-pass", metavar="LIB", help="libbench_step.so: interleave C passes in this process")
    a = ap.parse_args()

    tok = np.load(a.tokens).astype(np.int64)
    S, N = a.seqs, a.steps
    if len(tok) // S < N:
        ap.error(f"{N} steps of {S} sequences need more than the {len(tok)} tokens of '{a.tokens}'")
    steps = np.stack([tok[len(tok) * l // S:][:N] for l in range(S)], axis=1).copy()  # [steps, S]
    seqs = np.arange(S, dtype=np.uintc)
    store = engram.Store(a.shard)
    store.preload()
    layers = store.config.layer_ids
    session = store.session(S, mode="pagecache")
    shape = session.gather(layers[0], a.dtype, as_tensor=False).shape[1:]  # an empty step: [0, ...]
    np_dtype = {"bf16": np.uint16, "f32": np.float32, "native": np.uint8}[a.dtype]
    c_buffers = [aligned_empty((S,) + shape, np_dtype) for _ in layers]
    lib = c_session = None
    if a.c_pass:
        lib = ctypes.CDLL(a.c_pass)
        lib.bench_step_pass.restype = ctypes.c_int
        lib.bench_step_pass.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_int] + [ctypes.c_void_p] * 5
        c_session = store.session(S, mode="pagecache")

    def run(mode, buffers):
        runners = [Python(session, layers, seqs, steps, a.dtype, buffers)]
        if lib:
            runners.append(C(lib, c_session, layers, seqs, steps, a.dtype, c_buffers))
        times = measure(runners, a.passes, N, len(layers))
        if lib:
            c = report(f"c-with-{mode}", a, times[1], len(layers))
        py = report(mode, a, times[0], len(layers))
        if lib:  # what the binding adds to each call, and the step's ratio, against the C steps between its own
            print(f"mode={mode}-added begin_us={py['begin'] - c['begin']:.2f} "
                  f"push_batch_us={py['push'] - c['push']:.2f} gather_us={py['gather'] - c['gather']:.2f} "
                  f"step_us={py['step'] - c['step']:.2f} ratio={py['step'] / c['step']:.3f}", flush=True)

    run("python", [aligned_empty((S,) + shape, np_dtype) for _ in layers])
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        run("python-torch", [torch.empty((S,) + shape, dtype=getattr(torch, _TORCH_DTYPES[a.dtype])) for _ in layers])
    print(f"mode=python-call-path dtype={a.dtype} {call_path(session, layers[-1], a.dtype)}", flush=True)


if __name__ == "__main__":
    main()
