"""engram.CacheSim: the RAM tiers' policies on rows alone, through engram_cachesim_*: what a first and a repeated
step are served, warm-up steps, the hot region, and the errors."""
import numpy as np
import pytest

from conftest import fortunes

import engram


def _step(sim, cfg, rows, warmup=False):
    sim.begin(warmup=warmup)
    sim.push(rows)
    for li, lid in enumerate(cfg.layer_ids):
        sim.gather(lid, rows[li])


@pytest.mark.parametrize("policy", ["page-lru", "page", "row"])
def test_a_step_again_is_served_from_ram(synthetic, policy):
    with engram.Store(synthetic) as store:
        cfg = store.config
        rows = cfg.rows(fortunes()[:64])
        with engram.CacheSim(store, policy, 16 << 20) as sim:
            _step(sim, cfg, rows)
            first = sim.result()
            _step(sim, cfg, rows)
            both = sim.result()
    assert first["lookups"] == rows.size and first["ram"] == 0  # every row's unit read in its own step
    assert both["lookups"] == 2 * rows.size and both["ram"] == rows.size
    assert first["policy"] == policy and first["budget_bytes"] == 16 << 20
    assert both["ram_rate"] == 0.5


def test_no_budget_serves_nothing_and_warmup_is_not_counted(synthetic):
    with engram.Store(synthetic) as store:
        cfg = store.config
        rows = cfg.rows(fortunes()[:64])
        with engram.CacheSim(store, "page", 0) as none, engram.CacheSim(store, "page", 16 << 20) as warm:
            for sim in (none, warm):
                _step(sim, cfg, rows, warmup=True)
                _step(sim, cfg, rows)
            r0, r1 = none.result(), warm.result()
    assert r0["lookups"] == r1["lookups"] == rows.size
    assert r0["ram"] == 0 and r1["ram"] == rows.size


def test_the_hot_region_serves_its_rows_from_the_first_step(synthetic):
    with engram.Store(synthetic) as store:
        cfg = store.config
        rows = cfg.rows(fortunes()[:64])
        hot = [(lid, int(r)) for li, lid in enumerate(cfg.layer_ids) for r in np.unique(rows[li])]
        with engram.CacheSim(store, "hot+row", 16 << 20, hot_rows=hot, hot_bytes=8 << 20) as sim:
            _step(sim, cfg, rows)
            r = sim.result()
    assert r["hot_rows"] == len(hot) and r["hot_hits"] == r["ram"] == r["lookups"] == rows.size


def test_errors(synthetic):
    with engram.Store(synthetic) as store:
        cfg = store.config
        rows = cfg.rows(fortunes()[:8])
        with pytest.raises(ValueError, match="policy"):
            engram.CacheSim(store, "lru", 1 << 20)
        with pytest.raises(TypeError):
            engram.CacheSim(store, "page", 1.5)
        with engram.CacheSim(store, "row", 4 << 20) as sim:
            sim.begin()
            with pytest.raises(ValueError, match="dimensions"):
                sim.push(rows[0])
            with pytest.raises(ValueError):
                sim.gather(2, rows[0])  # layer 2 has no Engram table
            bad = rows.copy()
            bad[0, 0, 0] = 1 << 62
            with pytest.raises(engram.InvalidArgument):
                sim.push(bad)
            with pytest.raises(RuntimeError):
                store.close()  # the simulation uses it
        with pytest.raises(ValueError, match="closed"):
            sim.result()
