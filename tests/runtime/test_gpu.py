"""GPU timing with the fake event backend: lazy resolution, pooling, step records."""
from runtime.gpu import FakeBackend, GpuTimer
from tests.envclean import clean_env

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
import json
import subprocess
import sys
from pathlib import Path

import pytest


GPU_CHECK = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
NEEDS_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="its programs need torch, which is not installed")


def _gpu_check(*args, timeout=300):
    env = clean_env()
    return subprocess.run([sys.executable, str(GPU_CHECK), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@NEEDS_TORCH
def test_gpu_check_script_fake_mode_passes(tmp_path):
    """--fake runs every scenario on CPU: the script's plumbing and what needs no GPU are checked,
    every comparison with GPU time is a [skip] that says why."""
    out = tmp_path / "gpu.json"
    p = _gpu_check("--fake", "--steps", "5", "--epochs", "2", "--reps", "5", "--json", str(out))
    text = p.stdout + p.stderr
    assert p.returncode == 0, text
    assert "[FAILED]" not in p.stdout and "all GPU checks passed" in p.stdout, text
    lines = [ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith("[")]
    for check in ("accuracy", "sync", "spans", "cpu_bound", "memory", "overhead", "nccl", "robust", "nvtx"):
        assert any(ln.startswith((f"[ok] {check}:", f"[skip] {check}:")) for ln in lines), (check, text)
    # what needs no GPU is checked for real in fake mode ...
    for check in ("accuracy", "sync", "cpu_bound", "memory", "nccl", "robust"):
        assert any(ln.startswith(f"[ok] {check}:") for ln in lines), (check, text)
    assert any(ln.startswith("[ok] sync: 0 host synchronisation(s) by the runtime") for ln in lines), text
    # nvtx is a declared dependency, but the check says why it skips where it is missing
    nvtx = ("[ok] nvtx: a matmul loop with NVTX ranges on CPU (fake): 10 step records (want 10), end record 'ok'"
            if importlib.util.find_spec("nvtx") is not None else "[skip] nvtx: the nvtx package is not installed")
    assert nvtx in p.stdout, text
    # ... and what needs one is skipped, saying why
    assert "[skip] accuracy: fake events, no verdict: region `sleeper`" in p.stdout, text
    assert "[skip] overhead: fake events, no verdict: many_regions" in p.stdout, text
    assert "[skip] nccl: world size 2: needs 2 GPUs" in p.stdout, text
    assert "[skip] robust: a region under torch.cuda.device(1): needs 2 GPUs" in p.stdout, text
    assert "measured:" in p.stdout and "overhead.many_regions.ratio" in p.stdout, text
    data = json.loads(out.read_text())
    assert data["exit_status"] == 0 and data["environment"]["fake"] is True
    assert {c["status"] for c in data["checks"]} <= {"ok", "skip"}
    for key in ("accuracy.calibrated_sleep", "sync.runtime_syncs_in_loop", "memory.step0_peak",
                "overhead.matmul.ratio", "overhead.many_regions.added_per_visit", "nccl.ws1_sync_allreduce.event_pair"):
        assert key in data["numbers"], key
    assert data["numbers"]["sync.runtime_syncs_in_loop"]["value"] == 0
    # the parameters used (review 75 F4): the options and each scenario's own
    assert data["parameters"]["options"]["reps"] == 5 and data["parameters"]["options"]["fake"] is True
    assert data["parameters"]["scenarios"]["timing"]["steps"] == 5 and "nccl" in data["parameters"]["scenarios"]


@NEEDS_TORCH
def test_gpu_check_script_says_usage_and_setup_errors_with_status_2():
    p = _gpu_check("--fake", "--reps", "3", timeout=60)
    assert p.returncode == 2 and "at least 5 alternations" in p.stderr, p.stdout + p.stderr
    p = _gpu_check("--checks", "accuracy,bogus", timeout=60)
    assert p.returncode == 2 and "unknown bogus" in p.stderr, p.stdout + p.stderr
    import torch

    if not torch.cuda.is_available():
        p = _gpu_check(timeout=120)
        assert p.returncode == 2 and "no CUDA" in p.stdout and "--fake" in p.stdout, p.stdout + p.stderr


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
