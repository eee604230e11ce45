"""Review 84 L1: the warning about a program's module named like one the launcher imported also
named modules that a plain `python` imports at start-up itself (site's .pth files: an editable
install's finder imports re, types, pathlib...), for which the program never gets its own file,
launcher or not: the warning blamed the launcher for Python's own behaviour."""

from __future__ import annotations

import _imp
import importlib.util
import sys

import pytest

from runtime import launch_script
from runtime.launch_script import _startup_modules, shadowed_warnings


def test_the_startup_modules_are_a_plain_pythons(tmp_path):
    startup = _startup_modules(str(tmp_path))
    assert "sys" in startup and "builtins" in startup
    assert "runtime" not in startup and "libcst" not in startup  # ours, not python's


def test_a_module_python_imports_at_startup_is_not_warned_about(tmp_path):
    candidates = [n for n in sorted(_startup_modules(str(tmp_path)))
                  if n in sys.modules and n not in sys.builtin_module_names and not _imp.is_frozen(n)
                  and not n.startswith("_") and n not in ("encodings", "sitecustomize", "usercustomize")
                  and getattr(importlib.util.find_spec(n), "has_location", False)]
    if not candidates:
        pytest.skip("this interpreter imports no module from a file at start-up beyond the ones always skipped")
    name = candidates[0]
    (tmp_path / f"{name}.py").write_text("MINE = 1\n")
    assert shadowed_warnings(str(tmp_path)) == []  # before: "... is named like the module ..."


def test_a_module_only_the_launcher_imported_is_still_warned_about(tmp_path, monkeypatch):
    import platform  # noqa: F401 - imported here, as in the launcher

    (tmp_path / "platform.py").write_text("MINE = 1\n")
    assert len(shadowed_warnings(str(tmp_path))) == 1
    monkeypatch.setattr(launch_script, "_startup_modules", lambda d: frozenset({"platform"}))
    assert shadowed_warnings(str(tmp_path)) == []
