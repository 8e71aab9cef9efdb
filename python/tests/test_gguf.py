"""GGUF tables through the binding: a shard packed from each ggml-written fixture (fixtures/gguf), and an index of
it in place, give, through
Session.gather and gather_rows in both modes, the rows ggml itself gives: the GGUF's bytes (native), ggml's
dequantization (f32), and that rounded to bf16."""
import json
import os

import numpy as np
import pytest

from conftest import fixture, run, tool

import engram

MANIFEST = json.load(open(fixture("gguf/manifest.json")))
LAYERS = MANIFEST["hash"]["layer_ids"]
ROWS = MANIFEST["rows"]


def _bf16(f32):
    """bf16 bits of float32 values, to nearest even (no NaN in the fixtures)."""
    u = f32.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    out = {}
    for f in MANIFEST["files"]:
        geo = f["name"][0]
        for how in ("copy", "in-place"):
            path = d / (f["name"] + "." + how + ".engram")
            run(tool("engram-pack"), "--quiet", "--config", fixture(f"gguf/config-{geo}.json"), "--token-map",
                fixture("gguf/token_map.npy"), "--weights", fixture("gguf/" + f["name"]), "--out", path,
                *(["--in-place"] if how == "in-place" else []))
            out[f["name"], how] = path
    return out


def _expect(f):
    hd = f["head_dim"]
    e = np.fromfile(fixture("gguf/" + f["expect"]), dtype="<f4").reshape(-1, hd)
    return [e[: ROWS[0]], e[ROWS[0]:]]


@pytest.mark.parametrize("how", ["copy", "in-place"])
@pytest.mark.parametrize("mode", ["direct", "pagecache"])
@pytest.mark.parametrize("f", MANIFEST["files"], ids=[f["name"] for f in MANIFEST["files"]])
def test_gather_is_ggml(shards, f, mode, how):
    expect = _expect(f)
    tokens = np.array([5, 9, 9, 17, 3, 40, 72, 0, 1, 2, 33], dtype=np.int64)
    with engram.Store(shards[f["name"], how]) as st:
        assert st.info()["tables"][0]["dtype"] == f["type"]
        info = st.info()
        assert info["config_source"]["source"] == "config json"
        if f["name"].startswith("A-"):  # every engram key: each checked against the config and the derivation
            assert info["config_source"]["gguf_checked"] == ["multipliers", "primes", "offsets", "token_map",
                                                             "pad_id", "params"]
        else:
            assert info["config_source"]["gguf_checked"] == []
        codecs = {t["codec"] for t in info["tables"]}
        if how == "copy":
            assert codecs == {"raw"}
        else:  # rows in the GGUF's last partial page are in the index, raw: a GGUF of one page has only those
            assert codecs <= {"in-place", "raw"}
            if os.path.getsize(fixture("gguf/" + f["name"])) >= 4 * 4096:
                assert "in-place" in codecs
        assert st.row_bytes(LAYERS[0], "native") == f["row_bytes"]
        with st.session(mode=mode) as s:
            s.begin()
            s.push(0, tokens)
            for li, layer in enumerate(LAYERS):
                rows = s.rows(layer)
                want = expect[li][rows.reshape(-1)]
                got = s.gather(layer, "f32").reshape(-1, f["head_dim"])
                assert got.tobytes() == want.tobytes(), f"{f['name']} layer {layer} f32"
                got = s.gather(layer, "bf16", as_tensor=False).reshape(-1, f["head_dim"])
                assert got.view(np.uint16).tobytes() == _bf16(want).tobytes(), f"{f['name']} layer {layer} bf16"
                every = np.arange(ROWS[li], dtype=np.uint64)
                got = s.gather_rows(layer, every, "f32").reshape(-1, f["head_dim"])
                assert got.tobytes() == expect[li].tobytes()
                native = s.gather_rows(layer, every, "native").reshape(ROWS[li], -1)
                assert native.shape[1] == f["row_bytes"]
                if f["type"] == "F32":  # the native rows of F32 are ggml's floats (C's test_gguf checks all types)
                    assert native.tobytes() == expect[li].tobytes()
