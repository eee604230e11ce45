"""Execution: the instrumented program behaves exactly like the original.

testdata/behaviour/main.py runs constructs that real tools broke (results, exceptions, __doc__,
signatures, generator/coroutine kinds, locals(), recursion depth, pickling, multiprocessing spawn,
super(), Enum members, generator lifetimes) and prints them as JSON; we compare the runs.
"""
import json
import sys

import pytest

from instr_helpers import TESTDATA, instrument_cli, run
from runtime.runfile import read_run

PROJECT = TESTDATA / "behaviour"


def run_main(cwd, env):
    result = run([sys.executable, "main.py"], cwd=cwd, env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def original():
    return run_main(PROJECT, {"SCALEPROBE_DISABLE": "1"})


@pytest.mark.slow
def test_runtime_backend_preserves_behaviour_and_records(original, tmp_path):
    out = tmp_path / "out"
    built = instrument_cli(str(PROJECT), "-o", str(out))
    assert built.returncode == 0, built.stdout + built.stderr
    assert "files failed: 0" in built.stdout
    runs = tmp_path / "runs"
    assert run_main(out, {"SCALEPROBE_OUT": str(runs)}) == original
    files = [p for p in runs.glob("*.jsonl")]
    recorded = read_run(files[0]) if len(files) == 1 else max((read_run(p) for p in files), key=lambda r: len(r.profile))
    names = {r.name for r in recorded.regions.values()}
    assert {"plain", "gen", "Child.who", "coro", "train_like:for@211", "train_like:for@212"} <= names
    kinds = {r.name: r.kind for r in recorded.regions.values()}
    assert (kinds["train_like:for@211"], kinds["train_like:for@212"]) == ("epoch", "step")
    visited = {path[-1] for path in recorded.profile}
    by_name = {r.name: rid for rid, r in recorded.regions.items()}
    for name in ("gen", "Child.who", "coro", "train_like:for@211", "train_like:for@212", "async_for_and_with",
                 "Countdown.__anext__", "Verdict.__aexit__"):
        assert by_name[name] in visited, name


@pytest.mark.slow
def test_nvtx_backend_preserves_behaviour(original, tmp_path):
    out = tmp_path / "out"
    built = instrument_cli(str(PROJECT), "-o", str(out), "--backend", "nvtx")
    assert built.returncode == 0, built.stdout + built.stderr
    assert "import nvtx as __sp_nvtx__" in (out / "pkg/cases.py").read_text()
    assert run_main(out, {"PYTHONPATH": ""}) == original  # no runtime package on the path


@pytest.mark.slow
def test_import_hook_preserves_behaviour(original, tmp_path):
    script = (
        "import sys, runpy; from pathlib import Path; sys.path.insert(0, '.');"
        "from instrumentor import importhook;"
        f"importhook.install(Path('.'), cache_dir=Path({str(tmp_path / 'cache')!r}));"
        "import pkg.cases; assert hasattr(pkg.cases, '__sp_on__');"
        "runpy.run_path('main.py', run_name='__main__')"
    )
    result = run([sys.executable, "-c", script], cwd=PROJECT, env={"SCALEPROBE_OUT": str(tmp_path / "runs")}, timeout=180)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == original
