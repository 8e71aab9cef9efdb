#!/usr/bin/python3
"""The warm decode step of bench_step.c through the Python binding: what Python adds per call.

Same shard, token schedule, passes and output as bench_step (sequence l reads the stream from position
n_tokens * l // S, one token a step; store preloaded; page-cache session; every pass resets each slot first;
one untimed warm-up pass). A step is session.begin(), session.push_batch(seqs, tokens) with seqs a numpy.uintc
array and tokens an int64 row of a preallocated [steps, S] array, and session.gather(layer, dtype, out=buf) of
every layer into preallocated page-aligned numpy arrays (mode=python) and, when torch imports, into torch
tensors of the gather's dtype (mode=python-torch; torch aligns them to 64 bytes). Prints one line per mode in
bench_step's format (times: for each step and call the fastest of the timed passes, then the median over them)
with the digest of the warm-up pass's gathered bytes; then (mode=python-interleaved) the step through the binding
and as bare ctypes calls alternating step by step in this process, and (mode=python-call-path) what the binding's
code costs per call next to a bare ctypes call on an empty step, warm. Run with the package of this checkout and
the library of the build: PYTHONPATH=python ENGRAM_LIBDIR=build, pinned.
"""
import argparse
import time

import numpy as np

import engram

_TORCH_DTYPES = {"bf16": "bfloat16", "f32": "float32", "native": "uint8"}


def run(session, layers, seqs, steps, dtype, buffers, passes):
    """Timed passes of the step; returns per-call arrays of nanoseconds and the warm-up pass's digest."""
    n = steps.shape[0]
    t_begin, t_push, t_step = (np.zeros(passes * n, np.int64) for _ in range(3))
    t_gather = np.zeros(passes * n * len(layers), np.int64)
    digest = 0
    clock = time.perf_counter_ns
    begin, push_batch, gather = session.begin, session.push_batch, session.gather
    for r in range(passes + 1):
        for seq in range(len(seqs)):
            session.reset(seq)
        for t in range(n):
            k = (r - 1) * n + t
            a = clock()
            begin()
            b = clock()
            push_batch(seqs, steps[t])
            p = g = clock()
            for li, layer in enumerate(layers):
                gather(layer, dtype, out=buffers[li])
                e = clock()
                if r:
                    t_gather[k * len(layers) + li] = e - g
                g = e
            if r:
                t_begin[k], t_push[k], t_step[k] = b - a, p - b, g - a
            else:
                for buf in buffers:
                    digest += int(_bytes_of(buf).view(np.uint64).sum(dtype=np.uint64))
    return t_begin, t_push, t_gather, t_step, digest % (1 << 64)


def _bytes_of(buf):
    """The bytes of a numpy array or a CPU torch tensor, as a flat numpy uint8 array (no copy)."""
    if isinstance(buf, np.ndarray):
        return buf.reshape(-1).view(np.uint8)
    import torch
    return buf.reshape(-1).view(torch.uint8).numpy()


def aligned_empty(shape, dtype, align=4096):
    """np.empty at a page boundary, as bench_step allocates (numpy's own large arrays start 16 bytes into a page,
    where wide stores straddle cache lines: gathers into them run slower)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + align, np.uint8)
    off = -raw.ctypes.data % align
    return raw[off:off + nbytes].view(dtype).reshape(shape)


def best_us(v, passes):
    """For each step (or call) the fastest of the timed passes, then the median over them, in microseconds."""
    return np.median(v.reshape(passes, -1).min(axis=0)) / 1e3


def report(mode, a, t_begin, t_push, t_gather, t_step, digest, n_layers):
    us = lambda v: best_us(v, a.passes)  # noqa: E731
    print(f"mode={mode} seqs={a.seqs} steps={a.steps} passes={a.passes} dtype={a.dtype} layers={n_layers} "
          f"step_us={us(t_step):.2f} begin_us={us(t_begin):.2f} push_batch_us={us(t_push):.2f} "
          f"gather_us={us(t_gather):.2f} step_mean_us={t_step.mean() / 1e3:.2f} digest={digest:016x}", flush=True)


def interleaved(session, layers, seqs, steps, dtype, buffers, passes):
    """The step through the binding and as bare ctypes calls on addresses taken once (what C does, from Python),
    alternating step by step in one process, so that whatever else runs on the core costs both alike; returns
    the median step of each (us). The difference is the binding's code as the engine runs it: between calls
    that sweep the caches, not in a warm timeit loop."""
    from engram._lib import lib
    kind = {"native": 0, "bf16": 1, "f32": 2}[dtype]
    ptr, n, S = session._ptr, steps.shape[0], len(seqs)
    addr = [buf.ctypes.data for buf in buffers]
    nbytes = buffers[0].nbytes
    seqs_addr, steps_addr = seqs.ctypes.data, [steps[t].ctypes.data for t in range(n)]
    index = [session.config.layer_index(layer) for layer in layers]
    clock = time.perf_counter_ns
    times = {"binding": [], "bare": []}
    for r in range(passes + 1):
        for seq in range(S):
            session.reset(seq)
        for t in range(n):
            a = clock()
            if (t + r) % 2:
                session.begin()
                session.push_batch(seqs, steps[t])
                for li, layer in enumerate(layers):
                    session.gather(layer, dtype, out=buffers[li])
                mode = "binding"
            else:
                lib.engram_session_begin(ptr)
                lib.engram_session_push_batch(ptr, seqs_addr, steps_addr[t], None, S)
                for li in range(len(layers)):
                    lib.engram_session_gather_bytes(ptr, index[li], kind)
                    lib.engram_session_gather(ptr, index[li], kind, addr[li], nbytes)
                mode = "bare"
            if r:
                times[mode].append(clock() - a)
    return {k: np.median(v) / 1e3 for k, v in times.items()}


def call_path(session, layer, dtype):
    """What the binding's own code costs: each call on an empty step (the library has nothing to do) through the
    binding and as a bare ctypes call, best of 5 timeit repeats, in microseconds."""
    import timeit
    from engram._lib import lib
    kind = {"native": 0, "bf16": 1, "f32": 2}[dtype]
    li = session.config.layer_index(layer)
    session.begin()
    seqs, tokens, buf = np.empty(0, np.uintc), np.empty(0, np.int64), session.gather(layer, dtype)
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
    shape = session.gather(layers[0], a.dtype).shape[1:]  # an empty step: [0, ...]
    np_dtype = {"bf16": np.uint16, "f32": np.float32, "native": np.uint8}[a.dtype]
    buffers = [aligned_empty((S,) + shape, np_dtype) for _ in layers]
    report("python", a, *run(session, layers, seqs, steps, a.dtype, buffers, a.passes), len(layers))
    m = interleaved(session, layers, seqs, steps, a.dtype, buffers, a.passes)
    print(f"mode=python-interleaved dtype={a.dtype} binding_step_us={m['binding']:.2f} bare_step_us={m['bare']:.2f}",
          flush=True)
    print(f"mode=python-call-path dtype={a.dtype} {call_path(session, layers[-1], a.dtype)}", flush=True)
    try:
        import torch
    except ImportError:
        return
    buffers = [torch.empty((S,) + shape, dtype=getattr(torch, _TORCH_DTYPES[a.dtype])) for _ in layers]
    report("python-torch", a, *run(session, layers, seqs, steps, a.dtype, buffers, a.passes), len(layers))


if __name__ == "__main__":
    main()
