"""Review 100 LOW-3: `inspect.getmembers(module, inspect.isfunction)` of an instrumented module
listed the header's `__sp_define__` (a Python function) beside the module's own: a registry that
collects a module's functions so found it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("runtime._cprobe") is None, reason="the C probes are not built")
def test_the_header_leaves_no_python_function_among_the_modules(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "tasks.py").write_text("def a():\n    return 1\n\n\ndef b():\n    return 2\n")
    (src / "main.py").write_text("import inspect\nimport tasks\n\n\ndef run():\n"
                                 "    return [n for n, _ in inspect.getmembers(tasks, inspect.isfunction)]\n\n\n"
                                 "print(run(), '__sp_define__' in dir(tasks))\n")
    p = subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(tmp_path / "out"), "-q"],
                       capture_output=True, text=True, timeout=120, env=clean_env(PYTHONPATH=str(REPO)))
    assert p.returncode == 0, p.stderr
    assert "__sp_define__" in (tmp_path / "out" / "tasks.py").read_text()
    run = subprocess.run([sys.executable, "main.py"], cwd=tmp_path / "out", capture_output=True, text=True,
                         timeout=120, env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"),
                                                    SCALEPROBE_QUIET="1"))
    assert (run.returncode, run.stdout) == (0, "['a', 'b'] False\n"), run.stderr
