"""Review 79: the import hook of `launch --instrument` (cache per interpreter, symlinked modules
and entries, an entry that does not decode, the entry that spawned children re-run)."""

from __future__ import annotations

import ast
import json
import multiprocessing.spawn as mp_spawn
import sys
from pathlib import Path

import pytest

from instrumentor import importhook
from instrumentor.importhook import Instrumenter

LOOP = "def work(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"


def define_file(code: str) -> str:
    """The file name the runtime backend's `__sp_define__` gives the module's regions."""
    call = next(node for node in ast.walk(ast.parse(code))
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__sp_define__")
    return next(arg.value for arg in call.args if isinstance(arg, ast.Constant) and str(arg.value).endswith(".py"))


@pytest.fixture
def hook():
    yield importhook
    importhook.uninstall()


def test_f1_a_cache_entry_written_by_another_python_is_not_used(tmp_path, monkeypatch):
    # An older Python stores "invalid" for a module in newer syntax; the newer one, sharing the
    # default cache, ran the module uninstrumented and said nothing.
    path = tmp_path / "mod.py"
    path.write_text(LOOP)
    cache = tmp_path / "cache"
    real_tag = sys.implementation.cache_tag
    monkeypatch.setattr(sys.implementation, "cache_tag", "cpython-310")
    Instrumenter(tmp_path, cache, "nvtx")._rewrite(path, path.read_bytes())
    (written,) = cache.glob("*.json")
    written.write_text(json.dumps({"code": None, "n": 0, "linemap": None, "shifts": None, "columns": None,
                                   "error": "mod.py:1: syntax error", "invalid": True}))
    monkeypatch.setattr(sys.implementation, "cache_tag", real_tag)
    inst = Instrumenter(tmp_path, cache, "nvtx")
    assert not inst.invalid(path)
    namespace: dict = {}
    exec(inst.compile(path, path.read_bytes()), namespace)
    assert "__sp_on__" in namespace, "instrumented"
    assert len(list(cache.glob("*.json"))) == 2, "one entry per interpreter"


def test_f4_a_symlinked_module_is_named_by_its_link_and_a_symlinked_folder_is_left_alone(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "amod.py").write_text(LOOP)
    (tmp_path / "alias.py").symlink_to("real/amod.py")
    (tmp_path / "linked").symlink_to("real", target_is_directory=True)
    inst = Instrumenter(tmp_path, None, "runtime")
    # as the build: `alias.py` is the project's module `alias.py`; `linked/` is not looked into
    assert inst.owns(tmp_path / "alias.py", "alias")
    assert define_file(inst._rewrite(tmp_path / "alias.py", (real / "amod.py").read_bytes())["code"]) == "alias.py"
    assert not inst.owns(tmp_path / "linked" / "amod.py", "linked.amod")
    assert inst.owns(real / "amod.py", "real.amod")


def test_f4_a_root_given_through_a_link_or_found_through_one_is_still_the_project(tmp_path):
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "m.py").write_text(LOOP)
    (tmp_path / "via").symlink_to("proj", target_is_directory=True)
    for root in (project, tmp_path / "via"):
        inst = Instrumenter(root, None, "runtime")
        for found in (project / "pkg" / "m.py", tmp_path / "via" / "pkg" / "m.py"):
            assert inst.owns(found, "pkg.m"), (root, found)
            assert define_file(inst._rewrite(found, found.read_bytes())["code"]) == "pkg/m.py"


def test_f7_a_symlinked_entry_keeps_its_own_name_in_tracebacks(tmp_path, hook):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "main.py").write_text(LOOP)
    entry = tmp_path / "entry.py"
    entry.symlink_to("real/main.py")
    hook.install(tmp_path, cache_dir=None, backend="nvtx")
    code = hook.instrument_entry(entry)
    namespace: dict = {}
    exec(code, namespace)
    assert "__sp_on__" in namespace
    # as `python entry.py` and `__file__` say it
    assert code.co_filename == str(entry)
    assert namespace["work"].__code__.co_filename == str(entry)


def test_f8_an_entry_with_an_unknown_coding_raises_pythons_own_error(tmp_path, hook):
    path = tmp_path / "bogus.py"
    path.write_bytes(b"# -*- coding: bogus -*-\nprint(1)\n")
    with pytest.raises(SyntaxError) as plain:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    hook.install(tmp_path, cache_dir=None, backend="nvtx")
    with pytest.raises(SyntaxError) as got:
        hook.instrument_entry(path)
    assert str(got.value) == str(plain.value)
    assert got.value.__context__ is None, "no chained LookupError from tokenize"


def test_f3_spawned_children_are_told_the_entry_the_parent_instrumented(tmp_path, hook):
    # `python trainer`: an entry without .py, which the hook does not own by its name
    entry = tmp_path / "trainer"
    entry.write_text(LOOP)
    hook.install(tmp_path, cache_dir=None, backend="nvtx")
    assert not hook.owned(entry)
    hook.instrument_entry(entry)
    cmd = mp_spawn.get_command_line(tracker_fd=3, pipe_handle=4)
    prog = cmd[cmd.index("-c") + 1]
    assert f"'nvtx', entry={str(entry)!r})" in prog
    compile(prog, "<child>", "exec")
