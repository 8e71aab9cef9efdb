"""The Python twin of tests/stats_gatherer.c for scripts/stats-tests: a process gathering rows through the binding,
driven by the same commands on stdin (steps N, stats, quit), answering with the same lines."""
import json
import os
import sys

import numpy as np

import engram


def main() -> None:
    store = engram.Store(sys.argv[1])
    seqs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    s = store.session(seqs)
    cfg = store.config
    vocab = cfg.raw_vocab
    slots = np.arange(seqs)
    rng = np.random.default_rng(7)
    gathers = 0  # of each layer: one a step
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "steps":
            for _ in range(int(cmd[1])):
                s.begin()
                s.push_batch(slots, rng.integers(0, vocab, seqs))
                for lid in cfg.layer_ids:
                    s.gather(lid, "f32")
                gathers += 1
            print("ok", flush=True)
        elif cmd[0] == "stats":
            s.begin()
            layers = []
            for lid in cfg.layer_ids:
                v = s.stats(lid)
                layers.append({"layer_id": lid, "rows": v.rows, "ready": v.ready, "not_ready": v.not_ready,
                               "misses": v.misses, "requested": v.requested, "units": v.units, "ios": v.ios,
                               "bytes_read": v.bytes, "wait_ns": v.wait_ns, "ram": v.ram, "disk_bytes": v.disk_bytes,
                               "gathers": gathers})
            print(json.dumps({"pid": os.getpid(), "layers": layers}), flush=True)
        elif cmd[0] == "quit":
            break
    s.close()


main()
