"""Review 50 (Python 3.10, 3.12, 3.13): what `instrument` warns of.

F2: on 3.10 orjson's `uuid` imports `platform`, which imports `subprocess` and with it `select`,
`selectors`, `fcntl`, `_posixsubprocess` (and tries `msvcrt`); 3.13's `platform` tries `_wmi`. A
project's `select.py` hung the built program at start and its `selectors.py` crashed it, and
`instrument` said nothing. These tests hold on every Python: the names are warned of wherever the
build runs, since the tree may run under another Python.
"""
from __future__ import annotations

import pytest

from instrumentor.cli import main
from instrumentor import shadowing
from instrumentor.shadowing import NVTX_STDLIB, RUNTIME_STDLIB, shadow_warnings

PLATFORM_CHAIN = ["select", "selectors", "subprocess", "fcntl", "_posixsubprocess", "msvcrt", "_wmi"]


@pytest.mark.parametrize("backend", ["runtime", "nvtx"])
@pytest.mark.parametrize("name", PLATFORM_CHAIN)
def test_the_modules_platform_imports_on_3_10_and_3_13_are_warned_of(name, backend):
    warnings = shadow_warnings(["main.py", f"{name}.py"], [""], backend)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{name}.py: named like the standard-library module '{name}'")


def test_a_project_select_py_is_warned_of_by_instrument(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text('import select as mysel\ndef work(n):\n    for i in range(n):\n        pass\n'
                                 '    return mysel.select("mine")\n\n\nprint(work(3))\n')
    (src / "select.py").write_text("def select(x):\n    return x\n")
    assert main([str(src), "-o", str(tmp_path / "out"), "-q"]) == 0  # built all the same
    err = capsys.readouterr().err
    assert "select.py: named like the standard-library module 'select', which scaleprobe's runtime imports" in err


def test_the_names_checked_are_the_names_warned_of():
    """tests/instrumentor/test_bad_input.py measures against `stdlib_names`, what shadow_warnings
    uses: under nvtx the union of both lists (it checked NVTX_STDLIB alone, stricter than the code)."""
    assert shadowing.stdlib_names("runtime") == RUNTIME_STDLIB
    assert shadowing.stdlib_names("nvtx") == NVTX_STDLIB | RUNTIME_STDLIB
    for name in sorted(NVTX_STDLIB | RUNTIME_STDLIB):
        assert shadow_warnings([f"{name}.py"], [""], "nvtx"), name
    for name in sorted(NVTX_STDLIB - RUNTIME_STDLIB):
        assert not shadow_warnings([f"{name}.py"], [""], "runtime"), name
