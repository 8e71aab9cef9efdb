"""LongCat's n-gram embedding tables (family "longcat-flash-ngram") through the binding: Config from the release's
config.json alone, rows bit-exact with the reference NgramEmbedding's (fixtures/ref/longcat: each table's own row,
here the row inside the layer's table, the earlier tables' rows added) through Config.rows and a Hasher pushed
every way, and a LongCat-geometry set's gathers 12 x 256 = 3072 wide (into a torch.bfloat16 tensor)."""
import json

import numpy as np
import pytest

from conftest import check_every_way_of_pushing, fixture, run, tool

import engram

RELEASE = "ref/longcat/longcat-flash-lite.config.json"
TINY = "ref/longcat/tiny/tiny-n4/config.json"
EOS = 2
# (config, tokens, per-table ids) of every reference sequence
CASES = [(RELEASE, f"ref/longcat/{n}_tokens.npy", f"ref/longcat/{n}_ids.npy")
         for n in ("real_edge_5_eos", "real_eos_start_mid_run_end", "real_rand200_eos_random")] + \
        [(TINY, "ref/longcat/tiny/tiny-n4.tokens.npy", "ref/longcat/tiny/tiny-n4.ids.npy")]

try:
    import torch
except ImportError:  # the bf16 results are then numpy uint16 bit patterns
    torch = None


def case(c):
    """The case's config, tokens and the rows the library gives (each table's row plus the earlier tables')."""
    cfg = engram.Config(fixture(c[0]))
    offsets = np.concatenate([[0], np.cumsum(cfg.primes(0))[:-1]]).astype(np.uint64)
    return cfg, np.load(fixture(c[1])), np.load(fixture(c[2])).astype(np.uint64) + offsets


def test_config_is_the_release():
    cfg = engram.Config(fixture(RELEASE))
    c = json.load(open(fixture("ref/longcat/longcat-flash-lite.constants.json")))
    assert cfg.family == "longcat-flash-ngram" and "longcat-flash-ngram" in repr(cfg)
    assert cfg.layer_ids == (0,) and cfg.columns == 12 and cfg.head_dim == c["row_width"] == 256
    assert cfg.max_ngram == 4 and cfg.columns * cfg.head_dim == 3072
    assert list(cfg.primes(0)) == [t["rows"] for t in c["tables"]]
    assert cfg.table_rows == (c["total_rows"],) == cfg.addressed_rows
    assert cfg.raw_vocab == 131072 and cfg.pad_id == EOS and cfg.compressed_pad == 0


@pytest.mark.parametrize("c", CASES, ids=lambda c: c[1].rsplit("/", 1)[1])
def test_rows_equal_the_reference(c):
    cfg, t, want = case(c)
    got = cfg.rows(t)
    assert got.shape == (1, len(t), cfg.columns)
    np.testing.assert_array_equal(got[0], want)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c[1].rsplit("/", 1)[1])
def test_hasher_every_way_of_pushing(c):
    """Whole, in chunks, a token at a time in a decode batch beside another slot, with wrong drafts (EOS among
    them) rewound, moved between slots by export and import, seeded: the reference's rows every time."""
    cfg, t, ids = case(c)
    check_every_way_of_pushing(engram.Hasher(cfg, max_seqs=3), t, ids, EOS, cfg.raw_vocab, cfg.max_ngram - 1)


def test_ids_outside_the_vocab_and_token_maps_are_refused():
    cfg = engram.Config(fixture(RELEASE))
    for bad in (-1, 131072):
        with pytest.raises(engram.InvalidArgument) as e:
            cfg.rows([5, 6, bad])
        assert f"token id {bad} at position 2 is outside the vocabulary [0, 131072)" in str(e.value)
    with pytest.raises(engram.InvalidArgument) as e:
        engram.Config(fixture(RELEASE), token_map=fixture("ref/tiny/tiny.token_map.npy"))
    assert "give no token map" in str(e.value)


def test_release_geometry_gathers_3072_wide(tmp_path):
    """A synthetic set of the release's geometry (ratio x vocab divided by 4096): a step's bf16 gather is
    [positions, 12 x 256 = 3072] (into a torch.bfloat16 tensor where torch is importable), each row the store's own,
    in both modes."""
    out = tmp_path / "lc.engram"
    run(tool("engram-pack"), "--quiet", "--config", fixture(RELEASE), "--synthetic", "4096", "--out", out)
    t = np.load(fixture(CASES[2][1]))
    with engram.Store(out) as store:
        assert store.info()["config"]["family"] == "longcat-flash-ngram"
        for mode in ("pagecache", "direct"):
            with store.session(max_seqs=1, mode=mode) as s:
                s.begin()
                s.push(0, t)
                emb = torch.empty(len(t), 3072, dtype=torch.bfloat16) if torch else np.empty((len(t), 3072), np.uint16)
                assert s.gather(0, "bf16", out=emb) is emb
                again = store.gather_rows(0, s.rows(0).reshape(-1), "bf16")
                a = emb.view(torch.int16).numpy() if torch else emb
                b = again.view(torch.int16).numpy() if torch else again
                np.testing.assert_array_equal(a, b.reshape(len(t), 3072))
