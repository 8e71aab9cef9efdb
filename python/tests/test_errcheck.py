"""Every return code of the C library is checked: each function declared to return an int raises engram.Error on a
negative result (an errcheck ctypes runs on every call, so no caller can drop one), the binding calls no function
it has not declared, and in a forked child every Session method that reaches the library raises EFORKED, begin
included (it returned None there)."""
import ast
import ctypes
import os

import numpy as np
import pytest

from conftest import ROOT, in_child

import engram
from engram import _lib


def _declared():
    return {**_lib._FUNCS, **_lib._PACK_FUNCS}


def test_every_int_function_raises_on_a_negative_result():
    checked = 0
    for dll, funcs in ((_lib.lib, _lib._FUNCS), (_lib.pack(), _lib._PACK_FUNCS)):
        for name, (restype, _) in funcs.items():
            if restype is ctypes.c_int:
                assert getattr(dll, name).errcheck is _lib._raise_negative, name
                checked += 1
    assert checked > 40
    # and the errcheck raises: a store that does not exist, through the raw function
    with pytest.raises(engram.FileNotFound) as e:
        _lib.lib.engram_open(ctypes.byref(ctypes.c_void_p()), b"/nonexistent/errcheck.engram", 0)
    assert "errcheck.engram" in e.value.strerror


def test_the_binding_calls_only_declared_functions():
    """A function used without a declaration would return ctypes' default int with no errcheck: unchecked."""
    pkg = os.path.join(ROOT, "python", "engram")
    used = set()
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py"):
            with open(os.path.join(pkg, f)) as src:
                tree = ast.parse(src.read(), f)
            used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("engram_")}
    assert used, "no library call found"
    missing = sorted(used - set(_declared()))
    assert not missing, f"called but not declared (unchecked): {missing}"


def test_every_session_call_raises_eforked_in_a_forked_child(synthetic):
    with engram.Store(synthetic) as store, store.session(1) as s:
        s.begin()
        s.push(0, np.arange(8))
        state = s.export_state(0)
        layer = store.config.layer_ids[0]
        calls = [
            ("begin", lambda: s.begin()),
            ("push", lambda: s.push(0, [1, 2])),
            ("push_batch", lambda: s.push_batch([0], [3])),
            ("prefetch_next", lambda: s.prefetch_next([0], [3])),
            ("reset", lambda: s.reset(0)),
            ("rewind", lambda: s.rewind(0, 1)),
            ("seed", lambda: s.seed(0, [1, 2], start=True)),
            ("export_state", lambda: s.export_state(0)),
            ("import_state", lambda: s.import_state(0, state)),
            ("gather", lambda: s.gather(layer, "f32")),
            ("prefetch_rows", lambda: s.prefetch_rows(layer, [0, 1])),
            ("gather_rows", lambda: s.gather_rows(layer, [0, 1], "f32")),
            ("stats", lambda: s.stats()),
        ]

        def child():
            for i, (name, call) in enumerate(calls):
                try:
                    call()
                except engram.Error as e:
                    if e.errno == engram.EFORKED and "fork" in e.strerror:
                        continue
                return 1 + i  # returned, or raised something else
            return 0

        got = in_child(child)
        assert got == b"\x00", f"Session.{calls[got[0] - 1][0]} did not raise EFORKED in the child" if got[0] else got
        s.begin()  # the parent's session is unaffected
