"""The overhead benchmark stays runnable (its figures are reported, never asserted)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_probe_overhead_micro_section_runs(tmp_path):
    env = clean_env()
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "probe_overhead.py"), "--no-app", "--calls", "2000",
                        "--repeat", "2"], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for row in ("function region: probe python", "function region: probe python off", "loop iteration: loop python",
                "baseline: empty call"):
        assert row in p.stdout, p.stdout
    # Measuring must not leave a profile or a run file behind.
    assert not (tmp_path / "scaleprobe-runs").exists()


def test_derived_speedup_benchmark_runs():
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "derived_speedup.py"), "--paths", "12", "--noise", "0.05"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [ln.split() for ln in p.stdout.splitlines() if ln.startswith(("pmnf", "strong"))]
    metrics = sorted(r[2] for r in rows)
    assert metrics == ["parallel_efficiency"] * 2 + ["speedup"] * 2 + ["time"] * 2, p.stdout


def test_suspend_overhead_benchmark_runs(tmp_path):
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "suspend_overhead.py"), "--calls", "200", "--repeat", "2",
                        "--backend", "both"], env=clean_env(), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("async for, async generator") == 2, p.stdout
    try:
        import runtime._asyncwrap  # noqa: F401
    except ImportError:
        return
    # the frameless wrapper against the coroutine one, in both backends' processes
    assert p.stdout.count("async for wrapper: frameless C") == 2, p.stdout
    assert not (tmp_path / "scaleprobe-runs").exists()


def test_pass_range_benchmark_runs():
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "pass_range.py"), "--paths", "4"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [ln.split("|")[1:-1] for ln in p.stdout.splitlines() if ln.startswith("| ") and "%" in ln]
    assert sorted({r[2].strip() for r in rows}) == ["independent", "slow pass"] and len(rows) == 18, p.stdout
    assert re.search(r"fit time with the refits over without .*: \d+\.\d\dx \(median of 3 pairs", p.stdout), p.stdout
