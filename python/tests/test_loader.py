"""Which libengram the package loads (the fresh build here, never a stale installed one), how an installed
package finds its library, and the ctypes mirrors of the C structs against the header."""
import ctypes
import os
import re
import shutil
import subprocess
import sys

from conftest import BUILD, ROOT

import engram
from engram import _lib


def test_the_library_of_this_build_is_loaded():
    assert os.path.samefile(engram.library_path(), os.path.join(BUILD, "libengram.so.0"))
    header = open(os.path.join(ROOT, "include", "engram.h")).read()
    version = re.search(r'#define ENGRAM_VERSION_STRING "(.*)"', header).group(1)
    assert engram.library_version() == version == engram.__version__
    toml = open(os.path.join(ROOT, "python", "pyproject.toml")).read()
    assert re.search(r'^version = "(.*)"', toml, re.M).group(1) == version


def _import(env_libdir, pkg_dir, code="print(engram.library_path())"):
    env = dict(os.environ)
    env.pop("ENGRAM_LIBDIR", None)
    if env_libdir is not None:
        env["ENGRAM_LIBDIR"] = env_libdir
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import engram\n" + code,
                           pkg_dir], capture_output=True, text=True, env=env, cwd="/")


def test_libdir_without_the_library_is_an_import_error(tmp_path):
    p = _import(str(tmp_path), os.path.join(ROOT, "python"))
    assert p.returncode != 0
    assert f"ENGRAM_LIBDIR is '{tmp_path}', which has no libengram.so.0" in p.stderr


def test_installed_package_loads_the_libdir_make_install_recorded(tmp_path):
    """make install writes engram/_install.py with the LIBDIR of that install; the package then loads the library
    from there, whatever the loader's search path holds."""
    pkg = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "python", "engram"), pkg / "engram",
                    ignore=shutil.ignore_patterns("__pycache__", "_install.py"))
    (pkg / "engram" / "_install.py").write_text(f"LIBDIR = {BUILD!r}\n")
    p = _import(None, str(pkg))
    assert p.returncode == 0, p.stderr
    assert os.path.samefile(p.stdout.strip(), os.path.join(BUILD, "libengram.so.0"))
    # the packer comes from the same directory
    p = _import(None, str(pkg), "from engram import _lib; _lib.pack(); print(_lib.pack()._name)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == os.path.join(BUILD, "libengram-pack.so.0")


def test_struct_mirrors_match_the_header(tmp_path):
    """sizeof and every field's offset of each ctypes Structure against the C compiler's view of engram.h."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "engram.h"', "int main(void)", "{"]
    for cname, st in _lib.STRUCTS.items():
        lines.append(f'\tprintf("{cname} size %zu\\n", sizeof(struct {cname}));')
        for field, _ in st._fields_:
            lines.append(f'\tprintf("{cname} {field} %zu\\n", offsetof(struct {cname}, {field}));')
    consts = {"ENGRAM_REWIND_MAX": _lib.REWIND_MAX, "ENGRAM_SEQ_STATE_MAX": _lib.SEQ_STATE_MAX,
              "ENGRAM_SEED_START": _lib.SEED_START, "ENGRAM_ROWCACHE_GROUP": _lib.ROWCACHE_GROUP}
    lines += [f'\tprintf("{c} %llu\\n", (unsigned long long)({c}));' for c in consts]
    lines += ["\treturn 0;", "}"]
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines) + "\n")
    cc = os.environ.get("ENGRAM_CC") or os.environ.get("CC") or "cc"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(tmp_path / "abi")],
                   check=True)
    got = subprocess.run([str(tmp_path / "abi")], capture_output=True, text=True, check=True).stdout.split("\n")
    want = []
    for cname, st in _lib.STRUCTS.items():
        want.append(f"{cname} size {ctypes.sizeof(st)}")
        want += [f"{cname} {field} {getattr(st, field).offset}" for field, _ in st._fields_]
    want += [f"{c} {v}" for c, v in consts.items()]
    assert got[:-1] == want
    # the enums and constants the binding mirrors
    header = open(os.path.join(ROOT, "include", "engram.h")).read()
    assert int(re.search(r"#define ENGRAM_LEAD_BUCKETS (\d+)", header).group(1)) == _lib.LEAD_BUCKETS
    for name, value in (("ENGRAM_SESSION_NO_URING", _lib.SESSION_NO_URING),
                        ("ENGRAM_SESSION_NO_PREFETCH", _lib.SESSION_NO_PREFETCH),
                        ("ENGRAM_SESSION_SQPOLL", _lib.SESSION_SQPOLL)):
        assert int(re.search(rf"#define {name} (\d+)u", header).group(1)) == value
    for name, value in (("ENGRAM_OUT_NATIVE", _lib.OUT_NATIVE), ("ENGRAM_OUT_BF16", _lib.OUT_BF16),
                        ("ENGRAM_OUT_F32", _lib.OUT_F32), ("ENGRAM_MODE_PAGECACHE", _lib.MODE_PAGECACHE),
                        ("ENGRAM_MODE_DIRECT", _lib.MODE_DIRECT)):
        assert int(re.search(rf"\b{name} = (\d+)", header).group(1)) == value
    for name, value in (("ENGRAM_CACHESIM_PAGE_LRU", "page-lru"), ("ENGRAM_CACHESIM_PAGE", "page"),
                        ("ENGRAM_CACHESIM_ROW", "row"), ("ENGRAM_CACHESIM_HOT_ROW", "hot+row")):
        assert int(re.search(rf"\b{name} = (\d+)", header).group(1)) == engram._cachesim.POLICIES[value]
    for code, name in engram._errors.errorcode.items():
        n = int(re.search(rf"ENGRAM_{name} = -\(ENGRAM_ERRNO_BASE \+ (\d+)\)", header).group(1))
        assert code == engram._errors.ERRNO_BASE + n


def test_error_names_and_strings():
    e = engram._errors.error(-engram.ECORRUPT)
    assert isinstance(e, engram.Error) and not isinstance(e, ValueError)
    assert e.errno == engram.ECORRUPT and e.name == "ECORRUPT" and str(e).startswith("[ECORRUPT] ")
    assert isinstance(engram._errors.error(-22), engram.InvalidArgument)

