"""python/README.md's speculative-decoding example runs as written (SHARD: the V4.1-geometry synthetic shard) and
its own check passes: the rewound, preempted and resumed slot hashes as the accepted stream pushed straight
through."""
import os
import re

import pytest

from conftest import ROOT


def _blocks():
    text = open(os.path.join(ROOT, "python", "README.md")).read()
    return [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "SHARD" in b]


def test_the_speculative_decoding_example_runs(synthetic):
    pytest.importorskip("torch")
    blocks = _blocks()
    assert blocks, "README.md has no example on SHARD"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {"SHARD": synthetic})
