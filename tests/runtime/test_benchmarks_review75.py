"""The benchmark scripts' logic (review 75): usage errors for bad options, the --extrap-cache key
and its marking, the probe benchmark's GPU-rotation state, suspend_overhead's --backend. No timing
is asserted: the scripts print their ratios, these tests only check what is compared with what."""
import importlib.util
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.envclean import clean_env

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}_under_test", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)
    spec.loader.exec_module(mod)
    return mod


# ----- F6: bad options are usage errors ----------------------------------------------------------------

@pytest.mark.parametrize("script, args, option", [
    ("derived_speedup.py", ["--noise", "abc"], "--noise"),
    ("derived_speedup.py", ["--paths", "0"], "--paths"),
    ("original_lines_compile.py", ["--lines", "x"], "--lines"),
    ("original_lines_compile.py", ["--rounds", "0"], "--rounds"),
    ("built_import.py", ["--modules", "0"], "--modules"),
    ("read_speed.py", ["--rounds", "0", "--paths", "5"], "--rounds"),
    ("probe_overhead.py", ["--repeat", "0", "--no-app"], "--repeat"),
    ("probe_overhead.py", ["--calls", "0", "--no-app"], "--calls"),
    ("suspend_overhead.py", ["--calls", "0"], "--calls"),
    ("timeline_alignment.py", ["--repeat", "0"], "--repeat"),
    ("timeline_alignment.py", ["--src", "no-such-checkout"], "--src"),
])
def test_bad_option_is_a_usage_error_not_a_traceback(tmp_path, script, args, option):
    p = subprocess.run([sys.executable, str(BENCH / script), *args], env=clean_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "usage:" in p.stderr and option in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_peer_suites_only_with_an_unknown_name_names_the_valid_ones(tmp_path, monkeypatch, capsys):
    peers = load("peer_suites", monkeypatch)
    monkeypatch.setattr(peers, "venv", lambda *a: pytest.fail("a misspelt --only went on to build the venv"))
    with pytest.raises(SystemExit) as exc:
        peers.main(["--only", "clik", "--work", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "clik" in err and all(p.name in err for p in peers.PEERS), err
    assert "pyparsing" in err


# ----- F3: the --extrap-cache key and its marking --------------------------------------------------------

@pytest.fixture
def fake_extrap(tmp_path, monkeypatch):
    """A stand-in for .venv-extrap/bin/python that counts its runs, with a version folder to change."""
    mve = load("modeler_vs_extrap", monkeypatch)
    venv = tmp_path / "venv-extrap"
    (venv / "bin").mkdir(parents=True)
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "extrap-4.2.5.dist-info").mkdir(parents=True)
    count = tmp_path / "runs.txt"
    exe = venv / "bin" / "python"
    exe.write_text(f"#!/bin/sh\necho run >> {count}\necho '{{\"parameters\": [\"p\"], \"models\": []}}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(mve, "EXTRAP_PYTHON", exe)
    runs = lambda: len(count.read_text().splitlines()) if count.exists() else 0  # noqa: E731
    return mve, site, runs


def test_extrap_cache_is_keyed_by_the_data_and_extrap_version(tmp_path, fake_extrap):
    mve, site, runs = fake_extrap
    cache, data = tmp_path / "cache", tmp_path / "synthetic.jsonl"
    data.write_text('{"params": {"p": 1}, "callpath": "main->f0", "metric": "time", "value": 1.0}\n')
    first = mve.run_extrap(data, ("p",), 60, cache, "1p_0.05_6_2")
    assert runs() == 1 and first is not None
    again = mve.run_extrap(data, ("p",), 60, cache, "1p_0.05_6_2")
    assert runs() == 1, "the same data and version: Extra-P's result comes from the cache"
    assert again[-1] is True and first[-1] is False  # and says so
    data.write_text('{"params": {"p": 1}, "callpath": "main->f0", "metric": "time", "value": 2.0}\n')
    mve.run_extrap(data, ("p",), 60, cache, "1p_0.05_6_2")
    assert runs() == 2, "the generated data changed under the same setting name: Extra-P must run again"
    (site / "extrap-4.2.5.dist-info").rename(site / "extrap-4.3.0.dist-info")
    mve.run_extrap(data, ("p",), 60, cache, "1p_0.05_6_2")
    assert runs() == 3, "another Extra-P version: its result is not the cached one"


def _row(cached: bool) -> dict:
    e = np.array([0.01, 0.02])
    return {"params": 1, "noise": 0.05, "paths": 2, "ours_rec": 1, "extrap_rec": 1, "oracle_rec": 1,
            "ours_err": e, "extrap_err": e, "oracle_err": e, "floor_err": e, "bayes_err": None,
            "ours_s": 0.5, "extrap_s": 16.5, "extrap_cached": cached}


def test_table_takes_no_ratio_from_a_cached_extrap_time(fake_extrap, capsys):
    mve, _, _ = fake_extrap
    mve.print_table([_row(False), _row(True)])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(" 1 ")]
    assert lines[0].rstrip().endswith("16.50    33x"), lines
    assert "33x" not in lines[1] and "16.50*" in lines[1], lines


def test_timing_line_takes_no_ratio_from_a_cached_extrap_time(tmp_path, fake_extrap, monkeypatch, capsys):
    mve, _, runs = fake_extrap
    monkeypatch.setattr(mve, "run_ours", lambda *a, **k: ({}, 0.5, {}))
    cache = tmp_path / "cache"
    mve.timing(20, 1, tmp_path, 60, cache, repeats=2)
    fresh = capsys.readouterr().out
    assert runs() == 2 and "ratio" in fresh, fresh
    mve.timing(20, 1, tmp_path, 60, cache, repeats=2)
    cached = capsys.readouterr().out
    assert runs() == 2 and "cached" in cached and "ratio" not in cached.replace("no ratio", ""), cached


# ----- F1: the GPU rotation is compared with the probe without it ----------------------------------------

def test_probe_runners_without_the_rotation_run_with_the_backend_hooks_cleared(monkeypatch):
    """The rotation's hooks are a backend's global state: the plain probe's samples must run without
    them and the rotation's with them (the review found both running with them)."""
    from runtime import _pyprobe

    po = load("probe_overhead", monkeypatch)
    try:
        from runtime import _cprobe
        backends = [("C", _cprobe), ("python", _pyprobe)]
    except ImportError:
        backends = [("python", _pyprobe)]
    seen: dict[str, list[int]] = {}

    class Stop(Exception):
        pass

    def spy(runners, calls, repeat):
        for k, run in list(runners.items()) * 2:  # in any order: the state is set per sample
            run(10)
            for name, mod in backends:
                if k.startswith((f"probe {name}", f"loop {name}")):
                    seen.setdefault(k, []).append(mod.gpu_target())
        raise Stop

    monkeypatch.setattr(po, "measure", spy)
    try:
        with pytest.raises(Stop):
            po.micro(1000, 1)
    finally:
        for _, mod in backends:
            mod.set_gpu_hooks(None, None)
            mod.reset_after_fork()
    for name, _ in backends:
        for k in (f"probe {name}", f"probe {name}, outermost", f"probe {name} off"):
            assert set(seen[k]) == {-1}, (k, seen[k])
        assert set(seen[f"probe {name}, GPU rotation"]) == {4}, seen
        # the target's own row runs with f (region 1) as the target, told to the backend
        assert f"probe {name}, GPU rotation, target" in seen


# ----- F7: --backend python measures the Python backend ----------------------------------------------------

def test_suspend_overhead_backend_python_measures_the_python_backend(tmp_path):
    env = {k: v for k, v in clean_env().items() if k != "SCALEPROBE_PURE"}
    p = subprocess.run([sys.executable, str(BENCH / "suspend_overhead.py"), "--calls", "50", "--repeat", "1",
                        "--backend", "python"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("backend python "), p.stdout
    assert not (tmp_path / "scaleprobe-runs").exists()
