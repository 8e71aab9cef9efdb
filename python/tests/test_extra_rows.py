"""Tables larger than their primes: NVIDIA NeMo's DeepSeek-V4.1 Engram test uses engram_num_embeddings [113, 253]
for tables whose primes sum to 112 and 252 (one row more than the hash addresses). From the config to gathered
rows: the config is accepted, the packer packs the whole tensor (and refuses one of the prime sum's rows), the
extra row is stored and readable but never addressed, engram-stat info and plan say how many rows are never
addressed; a table with fewer rows than the primes address is an error as before."""
import json
import struct

import numpy as np
import pytest

from conftest import run, tool

import engram

# engram_max_ngram_size 3, 3 heads, vocab size 10: layer 1's primes 11 13 17 19 23 29 (112), layer 2's 31 37 41
# 43 47 53 (252)
SUMS = (112, 252)


def _config(path, num_embeddings):
    cfg = {"text_config": {"engram_layer_ids": [1, 2], "engram_max_ngram_size": 3, "engram_vocab_size": 10,
                           "engram_n_heads": 3, "engram_head_dim": 8, "engram_pad_token_id": 0,
                           "engram_compressed_vocab_size": 10}}
    if num_embeddings is not None:
        cfg["text_config"]["engram_num_embeddings"] = list(num_embeddings)
    path.write_text(json.dumps(cfg))
    return path


def _safetensors(path, tables):
    """tables: {name: float32 array}, written as F32 safetensors."""
    header, blobs, off = {}, [], 0
    for name, a in tables.items():
        b = np.ascontiguousarray(a, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return path


@pytest.fixture(scope="module")
def nemo(tmp_path_factory):
    d = tmp_path_factory.mktemp("nemo")
    tmap = d / "map.npy"
    np.save(tmap, (np.arange(20) % 10).astype(np.int64))
    rng = np.random.default_rng(5)
    big = {f"layers.{lid}.engram.embed.weight": rng.standard_normal((rows + 1, 8)).astype(np.float32)
           for lid, rows in zip((1, 2), SUMS)}
    return d, tmap, big


def _pack(d, cfg, tmap, weights, name):
    out = d / f"{name}.engram"
    run(tool("engram-pack"), "--quiet", "--config", cfg, "--token-map", tmap, "--weights", weights, "--out", out)
    return out


def test_config_with_one_row_more_than_the_primes(nemo):
    d, tmap, _ = nemo
    c = engram.Config(_config(d / "more.json", (113, 253)), token_map=tmap)
    assert c.table_rows == (113, 253) and c.addressed_rows == (112, 252)
    plain = engram.Config(_config(d / "plain.json", None), token_map=tmap)
    assert plain.table_rows == plain.addressed_rows == SUMS
    # the same addressing: the extra rows are never addressed
    toks = np.arange(20).repeat(7) % 20
    np.testing.assert_array_equal(c.rows(toks), plain.rows(toks))
    assert int(c.rows(toks)[0].max()) < 112 and int(c.rows(toks)[1].max()) < 252
    with pytest.raises(engram.Error) as e:
        engram.Config(_config(d / "fewer.json", (111, 252)), token_map=tmap)
    assert e.value.errno == engram.ECONFIG and "111, fewer than the 112 rows its primes address" in e.value.strerror


def test_pack_and_gather_a_table_with_an_unaddressed_row(nemo, tmp_path):
    d, tmap, big = nemo
    cfg = _config(d / "more.json", (113, 253))
    weights = _safetensors(tmp_path / "w.safetensors", big)
    shard = _pack(tmp_path, cfg, tmap, weights, "more")
    with engram.Store(shard) as store, store.session(1) as s:
        assert store.config.table_rows == (113, 253) and store.config.addressed_rows == SUMS
        for li, lid in enumerate((1, 2)):
            w = big[f"layers.{lid}.engram.embed.weight"]
            # every row, the extra one included, is stored as given
            np.testing.assert_array_equal(store.gather_rows(lid, np.arange(w.shape[0]), "f32"), w.reshape(-1))
            extra = np.frombuffer(store.read_row(lid, w.shape[0] - 1), np.float32)
            np.testing.assert_array_equal(extra, w[-1])
            with pytest.raises(engram.InvalidArgument):
                store.read_row(lid, w.shape[0])
        toks = np.arange(40) % 20
        s.begin()
        s.push(0, toks)
        for li, lid in enumerate((1, 2)):
            rows = s.rows(lid)
            np.testing.assert_array_equal(rows, store.config.rows(toks)[li])
            assert int(rows.max()) < SUMS[li]
            w = big[f"layers.{lid}.engram.embed.weight"]
            np.testing.assert_array_equal(s.gather(lid, "f32").reshape(40, 6, 8), w[rows])
    # engram-stat info and plan say how many rows no token addresses
    info = run(tool("engram-stat"), "info", shard).stdout
    assert "layer 1: 1 of its 113 rows are never addressed (its primes address 112)" in info
    assert "layer 2: 1 of its 253 rows are never addressed (its primes address 252)" in info
    plan = run(tool("engram-stat"), "plan", "--config", cfg).stdout
    assert "layer 1: 1 of its 113 rows are never addressed" in plan
    plan = json.loads(run(tool("engram-stat"), "plan", "--config", cfg, "--json").stdout)
    layers = plan["layers"] if "layers" in plan else plan["config"]["layers"]
    assert [(x["rows"], x["addressed_rows"]) for x in layers] == [(113, 112), (253, 252)]
    plain = run(tool("engram-stat"), "plan", "--config", _config(d / "plain.json", None)).stdout
    assert "never addressed" not in plain


def test_packer_checks_the_tensor_has_num_embeddings_rows(nemo, tmp_path):
    d, tmap, big = nemo
    cfg = _config(d / "more.json", (113, 253))
    short = {k: v[:-1] for k, v in big.items()}  # the prime sums' rows: one short of engram_num_embeddings
    weights = _safetensors(tmp_path / "short.safetensors", short)
    import subprocess
    p = subprocess.run([tool("engram-pack"), "--quiet", "--config", str(cfg), "--token-map", str(tmap), "--weights",
                        str(weights), "--out", str(tmp_path / "x.engram")], capture_output=True, text=True)
    assert p.returncode != 0
    assert "has shape [112, 8]; the config needs [113, 8]" in p.stderr and "engram_num_embeddings" in p.stderr
    # without engram_num_embeddings the prime sums are the table rows, and the short tensors are the right ones
    shard = _pack(tmp_path, _config(d / "plain.json", None), tmap, weights, "plain")
    with engram.Store(shard) as store:
        assert store.config.table_rows == SUMS
