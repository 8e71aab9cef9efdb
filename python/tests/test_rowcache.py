"""engram.RowCache: sessions that look rows up in RAM give the rows of sessions that do not; private and shared
(named) caches, their counters, the rules on names, sizes, table sets and closing."""
import errno
import grp
import hashlib
import os
import stat

import numpy as np
import pytest

from conftest import fixture, fortunes

import engram


@pytest.fixture
def shm_name():
    name = f"/engram-pytest-{os.getpid()}"
    yield name
    try:
        engram.RowCache.remove(name)
    except engram.Error:
        pass


def _step(session, tokens, layers, dtypes=("bf16",)):
    session.begin()
    session.push_batch(np.arange(len(tokens)), tokens)
    return [session.gather(layer, d, as_tensor=False) for layer in layers for d in dtypes]


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_sessions_with_a_row_cache_gather_the_same_rows(packed, codec):
    tok = fortunes()
    with engram.Store(packed("tiny-v41", codec)) as store, engram.RowCache(store, mb=1) as rc:
        layers = store.config.layer_ids
        with store.session(16, mode="direct", row_cache=rc) as s, store.session(16) as ref:
            for step in range(12):
                t = tok[step * 16:(step + 1) * 16] % store.config.raw_vocab
                for a, b in zip(_step(s, t, layers, ("f32", "bf16", "native")),
                                _step(ref, t, layers, ("f32", "bf16", "native"))):
                    np.testing.assert_array_equal(a, b)
            assert s.stats()["rows"] == 12 * 16 * 12 * 2 * 3
            assert s.stats()["ram"] > 0
        info = rc.info()
    assert info["record_bytes"] == 66 and info["ways"] == 8 and info["name"] == ""
    assert info["inserts"] > 0 and info["hits"] > 0 and 0 < info["rows"] <= info["slots"]
    assert list(info) == [k for k, _ in engram._lib.RowCacheInfo._fields_ if k != "size"]


def test_a_step_again_is_served_from_the_row_cache(synthetic):
    tok = fortunes()[:64]
    with engram.Store(synthetic) as store, engram.RowCache(store, mb=16) as rc, \
            store.session(64, mode="direct", row_cache=rc) as s:
        first = _step(s, tok, (1, 14))
        s.gather(1)  # the first step's rows, in the cache now
        before = rc.info()
        for q in range(64):
            s.reset(q)
        again = _step(s, tok, (1, 14))
        st = s.stats(step=True)
        after = rc.info()
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert st["ram"] == st["rows"] == 2 * 64 * 24 and st["disk_bytes"] == 0
    assert after["hits"] > before["hits"] and after["inserts"] == before["inserts"]


def test_a_shared_row_cache_is_one_segment(synthetic, packed, shm_name):
    with engram.Store(synthetic) as store:
        a = engram.RowCache(store, mb=4, name=shm_name)
        b = engram.RowCache(store, mb=64, name=shm_name)  # attaches: its size is ignored
        assert a.name == b.name == shm_name and a.info()["bytes"] == b.info()["bytes"] <= 4 << 20
        assert b.info()["name"] == shm_name
        tok = fortunes()[:32]
        with store.session(32, mode="direct", row_cache=a) as s:
            _step(s, tok, (14,))
        inserts = b.info()["inserts"]
        assert inserts > 0  # b sees what went in through a
        with store.session(32, mode="direct", row_cache=b) as s:
            _step(s, tok, (14,))
        assert b.info()["inserts"] == inserts and b.info()["hits"] >= 32 * 24
        with engram.Store(packed("tiny-f32", "raw")) as other:
            with pytest.raises(engram.Error) as e:
                engram.RowCache(other, mb=4, name=shm_name)
            assert e.value.errno == errno.EEXIST and shm_name in e.value.strerror
            with pytest.raises(ValueError, match="serves another table set"):
                other.session(1, row_cache=a)
        a.close()
        b.close()
    engram.RowCache.remove(shm_name)
    with pytest.raises(engram.Error) as e:
        engram.RowCache.remove(shm_name)
    assert e.value.errno == errno.ENOENT


def test_a_group_segment_is_made_0660_and_attached_only_with_group(synthetic, shm_name):
    """group=: the segment is made 0660 in that group and reattached with group= (a gid or the group's name);
    without group= it is refused, since its group may write it; in another group it is refused too."""
    gid = os.getegid()
    path = "/dev/shm" + shm_name
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm: POSIX shared memory is not where this test looks for the segment")
    try:
        group_name = grp.getgrgid(gid).gr_name
    except KeyError:
        group_name = None
    with engram.Store(synthetic) as store:
        with engram.RowCache(store, mb=1, name=shm_name, group=gid) as a:
            st = os.stat(path)
            assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == gid
            with engram.RowCache(store, mb=1, name=shm_name, group=gid) as b:
                assert b.info()["bytes"] == a.info()["bytes"]
            if group_name is not None:
                with engram.RowCache(store, mb=1, name=shm_name, group=group_name) as b:
                    assert b.info()["name"] == shm_name
            with pytest.raises(engram.PermissionDenied) as e:
                engram.RowCache(store, mb=1, name=shm_name)
            assert e.value.errno == errno.EACCES and "ENGRAM_ROWCACHE_GROUP" in e.value.strerror
            other = (gid + 1) & 0xFFFFFFFF
            with pytest.raises(engram.PermissionDenied) as e:
                engram.RowCache(store, mb=1, name=shm_name, group=other)
            assert e.value.errno == errno.EACCES and "owned by" in e.value.strerror
        tok = fortunes()[:16]
        with engram.RowCache(store, mb=1, name=shm_name, group=gid) as rc, \
                store.session(16, mode="direct", row_cache=rc) as s, store.session(16) as ref:
            for x, y in zip(_step(s, tok, (14,)), _step(ref, tok, (14,))):
                np.testing.assert_array_equal(x, y)
            assert rc.info()["inserts"] > 0


def test_group_arguments(synthetic, shm_name):
    with engram.Store(synthetic) as store:
        for kw, exc, msg in ((dict(group=os.getegid()), engram.InvalidArgument, ""),  # private: no group
                             (dict(name=shm_name, group=True), TypeError, "group must be"),
                             (dict(name=shm_name, group=1.5), TypeError, "group must be"),
                             (dict(name=shm_name, group=-1), ValueError, "not a gid"),
                             (dict(name=shm_name, group=1 << 32), ValueError, "not a gid"),
                             (dict(name=shm_name, group="no-such-group-engram"), ValueError, "not a group")):
            with pytest.raises(exc, match=msg):
                engram.RowCache(store, mb=1, **kw)
        assert not os.path.exists("/dev/shm" + shm_name)


def test_row_cache_arguments_and_closing(synthetic):
    with engram.Store(synthetic) as store:
        for kw, exc, msg in ((dict(mb=0), ValueError, "size 0 bytes"), (dict(mb=True), TypeError, "mb must be"),
                             (dict(nbytes=0), ValueError, "size 0 bytes"), (dict(), TypeError, "needs its size"),
                             (dict(nbytes=1 << 20, mb=1), TypeError, "not both"),
                             (dict(mb=1.5), TypeError, "mb must be"),
                             (dict(mb=1, name="no-slash"), engram.InvalidArgument, "no-slash"),
                             (dict(mb=1, name="/a/b"), engram.InvalidArgument, "/a/b")):
            with pytest.raises(exc, match=msg):
                engram.RowCache(store, **kw)
        with pytest.raises(TypeError, match="engram.RowCache"):
            store.session(1, row_cache=object())
        rc = engram.RowCache(store, mb=2)
        s = store.session(1, mode="direct", row_cache=rc)
        with pytest.raises(RuntimeError, match="private row cache is in use"):
            rc.close()
        with pytest.raises(RuntimeError, match="in use"):
            store.close()
        s.close()
        rc.close()
        assert rc.closed and "closed" in repr(rc)
        with pytest.raises(ValueError, match="private row cache is closed"):
            rc.info()
        with pytest.raises(ValueError, match="closed"):
            store.session(1, row_cache=rc)


def test_info_says_where_the_token_map_came_from(packed):
    with engram.Store(packed("tiny-f32", "raw")) as store:
        tm = store.info()["token_map"]
    want = hashlib.sha256(open(fixture("ref/tiny/tiny.token_map.npy"), "rb").read()).hexdigest()
    assert tm == {"source": ".npy", "name": "tiny.token_map.npy", "sha256": want}
