"""A project's top-level modules named like the standard-library modules that scaleprobe's runtime
imports: beside the entry file they come first on `sys.path`, so the instrumented program's runtime
would import the project's module instead (`copy.py`, `signal.py`: a circular import; `math.py`:
orjson crashes). `instrument` warns and builds anyway.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

# The standard-library modules an instrumented program imports for the runtime (`runtime.probe`, the
# run file written at exit, orjson) that are not loaded before the program's folder is on
# `sys.path`: built-in modules, what Python loads at start-up with `-S` and what `site` imports
# (os, stat, posixpath, genericpath, _collections_abc) cannot be shadowed, and `nt`/`_winapi`
# exist on Windows only, where they are built in. Found with `python -S -X importtime main.py` on a
# built tree (Python 3.10 to 3.13; orjson on 3.11); tests/instrumentor/test_bad_input.py checks
# the running Python against it. On 3.10 orjson's `uuid` imports `platform`, which imports
# `subprocess` and with it `select`, `selectors`, `fcntl`, `_posixsubprocess` and (tried) `msvcrt`;
# 3.13's `platform` tries `_wmi`; on 3.10 the `exceptiongroup` backport, where it is installed
# (runtime/linemap.py), imports `_socket` through typing_extensions (review 50 F2: a project's
# `select.py` hung the program at start, its `selectors.py` crashed it, without a warning).
RUNTIME_STDLIB = frozenset("""
    __future__ _bisect _blake2 _colorize _datetime _hashlib _json _opcode _opcode_metadata _posixsubprocess
    _socket _typing _uuid _weakrefset _wmi array ast bisect collections contextlib copy copyreg dataclasses
    datetime dis enum fcntl fnmatch functools glob grp hashlib importlib inspect ipaddress json keyword
    linecache math msvcrt ntpath opcode operator pathlib platform re reprlib select selectors signal
    sre_compile sre_constants sre_parse subprocess textwrap threading token tokenize traceback types
    typing urllib uuid warnings weakref
""".split())

# The same for the nvtx backend, whose header imports the `nvtx` package and, through it, numpy
# (review 41: a project's `numbers.py` or `pickle.py` stopped the program with a circular import,
# without a warning). Found as RUNTIME_STDLIB is, with nvtx 0.2 and numpy 1.26-2.x;
# tests/instrumentor/test_bad_input.py checks the installed ones against it. On 3.10 `platform`,
# which numpy imports, imports `subprocess` and the modules it needs, as under RUNTIME_STDLIB.
NVTX_STDLIB = frozenset("""
    __future__ _compat_pickle _contextvars _ctypes _datetime _json _opcode _pickle _posixsubprocess
    _struct _typing _weakrefset _wmi array ast collections contextlib contextvars copy copyreg ctypes
    dataclasses datetime dis enum fcntl functools importlib inspect json keyword linecache math msvcrt
    numbers opcode operator pickle platform re reprlib select selectors struct subprocess textwrap
    threading token tokenize traceback types typing warnings weakref
""".split())


def stdlib_names(backend: str = "runtime") -> frozenset[str]:
    """The names `shadow_warnings` warns of under `backend`: RUNTIME_STDLIB, and NVTX_STDLIB too under
    the nvtx backend (nvtx-instrumented modules also import runtime.linemap where scaleprobe is
    installed)."""
    return NVTX_STDLIB | RUNTIME_STDLIB if backend == "nvtx" else RUNTIME_STDLIB


def top_level_modules(files: Iterable[str], folder: str) -> dict[str, str]:
    """Module name -> file for the modules and packages directly in `folder` ('' = SRC)."""
    base = PurePosixPath(folder or ".")
    found: dict[str, str] = {}
    for rel in files:
        path = PurePosixPath(rel)
        if path.parent == base and path.suffix == ".py" and path.name != "__init__.py":
            found.setdefault(path.stem, rel)
        elif path.name == "__init__.py" and path.parent != base and path.parent.parent == base:
            found.setdefault(path.parent.name, rel)
    return found


def shadow_warnings(files: Iterable[str], folders: Iterable[str], backend: str = "runtime") -> list[str]:
    """One warning per project module in `folders` (the entry files' folders) named like a module of
    RUNTIME_STDLIB (NVTX_STDLIB under the nvtx backend)."""
    files = list(files)
    names = stdlib_names(backend)
    who = "the nvtx package (with numpy) or scaleprobe's runtime" if backend == "nvtx" else "scaleprobe's runtime"
    warnings = []
    for folder in sorted(set(folders)):
        for name, rel in sorted(top_level_modules(files, folder).items()):
            if name in names:
                warnings.append(
                    f"{rel}: named like the standard-library module '{name}', which {who} "
                    f"imports in the instrumented program: there it would import {rel} instead, and the "
                    "program may fail to start (a circular import, a crash); rename the module"
                )
    return warnings
