"""GPU timing with the fake event backend: lazy resolution, pooling, step records."""
from runtime.gpu import FakeBackend, GpuTimer

from .test_recorder import only_run, run_app


def test_events_resolve_lazily_in_order_without_synchronize():
    b = FakeBackend(tick_ns=500, auto=False)
    t = GpuTimer(b)
    targets = []
    for _ in range(3):
        ev = t.start()
        d = {"gpu_ns": None}
        t.stop(ev, d)
        targets.append(d)
    assert t.resolve() == 0  # not completed yet: nothing waits
    b.advance(3)  # first two events (step 0) and the start of step 1
    assert t.resolve() == 1 and targets[1]["gpu_ns"] is None
    b.advance(3)
    assert t.resolve() == 2
    assert [d["gpu_ns"] for d in targets] == [500, 500, 500]
    assert b.synchronizes == 0


def test_pool_reuses_events():
    b = FakeBackend()
    t = GpuTimer(b)
    for _ in range(100):
        t.stop(t.start(), {})
        t.resolve()
    assert b.created <= 4 and b.records == 200  # bounded by the events in flight, not by the steps


def test_final_resolve_waits():
    b = FakeBackend(auto=False)
    t = GpuTimer(b)
    d = {}
    t.stop(t.start(), d)
    assert t.resolve() == 0
    assert t.resolve(wait=True) == 1 and d["gpu_ns"] == b.tick_ns and b.synchronizes == 1


def test_steps_and_epochs_get_gpu_time_with_fake_backend(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_GPU": "fake"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert len(run.steps) == 6 and all(isinstance(s["gpu_ns"], int) and s["gpu_ns"] > 0 for s in run.steps)
    assert all(s["memory"] == {"cuda_peak_bytes": 0} for s in run.steps)
    assert all(isinstance(e["gpu_ns"], int) for e in run.epochs)


import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="its programs need torch, which is not installed")
def test_gpu_check_script_fake_mode_passes():
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
    p = subprocess.run([sys.executable, str(repo / "benchmarks" / "gpu_check.py"), "--fake", "--steps", "5", "--epochs", "2"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "all GPU checks passed" in p.stdout and "FAILED" not in p.stdout


def test_rotation_gives_ordinary_regions_gpu_samples_within_budget(tmp_path):
    p = run_app(tmp_path, env={"SCALEPROBE_GPU": "fake", "SCALEPROBE_GPU_BUDGET": "2", "APP_EPOCHS": "4",
                               "SCALEPROBE_FLUSH_INTERVAL": "0"})
    assert p.returncode == 0, p.stderr
    run = only_run(tmp_path)
    assert run.gpu_regions, "no region got GPU samples"
    names = {run.regions[r].name for r in run.gpu_regions}
    assert names <= {"fib", "main.inner", "tiny", "main", "worker"}
    assert "main.step" not in names and "main.epoch" not in names
    # At most `budget` samples per step, and only steps after the first flush know the regions.
    assert sum(g["samples"] for g in run.gpu_regions.values()) <= 2 * len(run.steps)
    assert all(g["gpu_ns"] > 0 for g in run.gpu_regions.values())
