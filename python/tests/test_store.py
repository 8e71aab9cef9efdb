"""engram.Store: info() says what `engram-stat info` prints; preload, verify, open errors, close rules."""
import errno
import re

import numpy as np
import pytest

from conftest import fixture, run, tool

import engram


def _stat_info(path):
    """`engram-stat info PATH` parsed: key lines, shard lines, table rows and totals."""
    out = run(tool("engram-stat"), "info", path).stdout
    keys, shards, tables, head = {}, [], [], None
    for line in out.splitlines():
        if m := re.match(r"shard (\d+)\s+'(.*)'$", line):
            shards.append(m.group(2))
        elif line.startswith("SHARD "):
            head = line.split()
        elif head and line.strip() and line.split()[0].isdigit() and len(line.split()) == len(head):
            tables.append(dict(zip(head, line.split())))
        elif m := re.match(r"(\S+(?: \S+)?)\s{2,}(.*)$", line):
            keys[m.group(1)] = m.group(2)
    return keys, shards, tables


@pytest.mark.parametrize("split", [None, "layer", "heads:2", "size:300K"])
@pytest.mark.parametrize("name,codec", [("tiny-v41", "zstd"), ("tiny-bf16", "raw"), ("tiny-f32", "zstd")])
def test_info_says_what_engram_stat_info_prints(packed, name, codec, split):
    path = packed(name, codec, split)
    keys, shards, tables = _stat_info(path)
    with engram.Store(path) as st:
        info = st.info()
    c = info["config"]
    assert keys["layers"] == f"{len(c['layer_ids'])} (ids {' '.join(map(str, c['layer_ids']))})"
    assert keys["orders"] == f"2..{c['max_ngram']}"
    assert keys["heads"] == f"{c['heads']} per order"
    assert keys["head dim"] == str(c["head_dim"]) and keys["columns"] == str(c["columns"])
    assert keys["table rows"] == ", ".join(map(str, c["table_rows"]))
    assert keys["vocab"] == f"{c['raw_vocab']} token ids, {c['compressed_vocab']} compressed"
    assert keys["pad"] == f"{c['pad_id']} (compressed {c['compressed_pad']})"
    assert keys["row scale"] == str(info["row_scale"]) == "1"
    assert shards == info["shards"] and info["n_shards"] == len(shards) and info["path"] == path
    assert len(tables) == len(info["tables"]) == info["n_tables"]
    for want, t in zip(tables, info["tables"]):
        assert want["SHARD"] == str(t["shard_index"]) and t["path"] == shards[t["shard_index"]]
        assert want["LAYER"] == str(t["layer_id"]) and info["config"]["layer_ids"][t["layer_index"]] == t["layer_id"]
        assert (want["ROW_BEGIN"], want["ROW_COUNT"]) == (str(t["row_begin"]), str(t["row_count"]))
        assert (want["DTYPE"], want["RECORD"], want["CODEC"]) == (t["dtype"], str(t["record_size"]), t["codec"])
        assert want["ROWS/PAGE"] == (str(t["rows_per_page"]) if t["rows_per_page"] else "-")
        assert want["SHUFFLE"] == ("-" if t["codec"] == "raw" else "yes" if t["shuffled"] else "no")
        assert (want["BLOCK"], want["RAW"], want["STORED"]) == (str(t["block_pages"]), str(t["raw_bytes"]),
                                                               str(t["stored_bytes"]))
        assert t["head_dim"] == c["head_dim"]
    assert keys["raw bytes"].split()[0] == str(info["raw_bytes"])
    assert keys["stored bytes"].split()[0] == str(info["stored_bytes"])
    assert keys["codec ratio"] == f"{info['codec_ratio']:.2f}"
    n = info["n_layers"]  # a table a layer, in its pieces
    assert keys["total"] == (f"{n} table{'s' if n != 1 else ''} in {info['n_tables']} piece"
                             f"{'s' if info['n_tables'] != 1 else ''}, {len(shards)} shard{'s' if len(shards) != 1 else ''}")
    assert info["n_layers"] == len(c["layer_ids"]) and info["file_bytes"] > info["stored_bytes"]
    assert len(info["set_id"]) == 32 and info["writer"].startswith("libengram ")


def test_synthetic_row_scale(synthetic):
    with engram.Store(synthetic) as st:
        info = st.info()
        assert info["row_scale"] == 8192
        assert info["config"]["table_rows"] == list(st.config.table_rows)
        assert [t["dtype"] for t in info["tables"]] == ["F8_E4M3", "F8_E4M3"]


def test_preload_and_verify(packed):
    with engram.Store(packed("tiny-v41", "raw", "layer")) as st:
        assert st.preload() is None
        st.preload(3)
        st.preload(np.int64(1))
        with pytest.raises(ValueError, match="layer 2 has no Engram table"):
            st.preload(2)
        assert st.verify() is None


def test_verify_reports_every_bad_block(packed, tmp_path):
    src = packed("tiny-f32", "raw")
    bad = tmp_path / "flipped.engram"
    data = bytearray(open(src, "rb").read())
    for off in (3 * 4096 + 5, 9 * 4096 + 77):  # table data: two different 2-page blocks
        data[off] ^= 1
    bad.write_bytes(bytes(data))
    with engram.Store(bad) as st:
        with pytest.raises(engram.Error) as e:
            st.verify()
    assert e.value.errno == engram.ECORRUPT and e.value.name == "ECORRUPT"
    assert "flipped.engram" in e.value.strerror
    assert len(e.value.failures) == 2 and all("flipped.engram" in f for f in e.value.failures)


def test_open_errors_name_the_file(packed, tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        engram.Store(tmp_path / "none.engram")
    assert e.value.errno == errno.ENOENT and "none.engram" in e.value.strerror
    assert isinstance(e.value, engram.FileNotFound) and isinstance(e.value, engram.Error)
    assert e.value.filename == str(tmp_path / "none.engram")

    with pytest.raises(engram.Error) as e:
        engram.Store(fixture("ref/tiny/tiny.token_map.npy"))
    assert e.value.errno == engram.EMAGIC and "tiny.token_map.npy" in e.value.strerror

    data = open(packed("tiny-bf16", "raw"), "rb").read()
    cut = tmp_path / "cut.engram"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(engram.Error) as e:
        engram.Store(cut)
    assert e.value.errno == engram.ETRUNC and "cut.engram" in e.value.strerror

    with pytest.raises(IsADirectoryError) as e:
        engram.Store(tmp_path)
    assert e.value.errno == errno.EISDIR and isinstance(e.value, engram.Error) and e.value.filename == str(tmp_path)


def test_close_waits_for_sessions_and_closed_objects_refuse(packed):
    st = engram.Store(packed("tiny-f32", "raw"))
    cfg = st.config
    s = st.session(2)
    with pytest.raises(RuntimeError, match="close its sessions"):
        st.close()
    s.close()
    s.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        s.begin()
    with pytest.raises(ValueError, match="closed"):
        s.gather(1, "f32")
    st.close()
    assert st.closed and "closed" in repr(st)
    with pytest.raises(ValueError, match="closed"):
        st.info()
    with pytest.raises(ValueError, match="closed"):
        st.session(1)
    with pytest.raises(ValueError, match="closed"):
        cfg.rows([1, 2, 3])
    assert cfg.layer_ids == (1, 3)  # what was read at open stays readable


def test_objects_keep_what_they_use_alive(packed):
    """A session keeps its store open, a store's config keeps the store: dropping the Store object is safe."""
    path = packed("tiny-v41", "raw")
    s = engram.Store(path).session(1)
    cfg = engram.Store(path).config
    s.begin()
    s.push(0, [1, 2, 3])
    np.testing.assert_array_equal(s.rows(3), cfg.rows([1, 2, 3])[1])
    assert s.gather(3, "f32").shape == (3, 12 * 64)
