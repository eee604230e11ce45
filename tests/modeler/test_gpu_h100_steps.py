"""What the first sweep of the sample on a GPU (an H100) showed about a step's GPU time: the first
step's span on the GPU (cuDNN's autotuning, CUDA's lazy loading: 0.72-0.86 s against 7-30 ms for the
later ones) made the mean of 10 steps a constant 66 ms at every point, and a GPU-bound step's span
is longer than its CPU duration without anything being wrong."""
from __future__ import annotations

import json

import pytest

from modeler.readers import read_inputs
from modeler.readers.runs import load_runs
from modeler.report.runs import groups_from_runset
from modeler_synthetic_runs import MS, write_rank_file

STEP = "main->train->train_epoch"


def test_step_gpu_time_is_the_median_step_not_the_mean_a_warm_up_step_dominates(tmp_path):
    for batch in (16, 32, 64, 128, 256):
        later = (5 + batch / 16) * MS  # grows with the batch
        steps = [{"region": 2, "duration_ns": 900 * MS, "data_wait_ns": 0, "comm_ns": 0, "gpu_ns": 860 * MS}]
        steps += [{"region": 2, "duration_ns": 2 * later, "data_wait_ns": 0, "comm_ns": 0, "gpu_ns": later + i * MS}
                  for i in (-1, 0, 1)]
        write_rank_file(tmp_path / "runs" / f"b{batch}", run_id=f"b{batch}", params={"batch": batch}, steps=steps,
                        profile={(0,): (1, 2000 * MS, MS), (0, 1): (1, 1900 * MS, MS), (0, 1, 2): (4, 1800 * MS, MS)})
    ds = read_inputs([tmp_path / "runs"]).dataset
    s = next(s for s in ds.series if s.callpath == STEP and s.metric == "step_gpu_time")
    got = {float(pt[0]): float(reps[0]) for pt, reps in zip(s.points, s.repetitions)}
    # the median of 860, later - 1, later and later + 1 ms: the mean of the middle two, later + 0.5 ms
    assert got == pytest.approx({b: (5 + b / 16 + 0.5) * 1e-3 for b in (16, 32, 64, 128, 256)})
    # the report's training view takes the same
    for g in groups_from_runset(load_runs([tmp_path / "runs"])):
        st = g.loop_stats("steps")[STEP]
        assert st["gpu"] / 1e9 == pytest.approx(got[g.params["batch"]])


def test_a_steps_gpu_time_above_its_cpu_duration_is_no_contradiction(tmp_path):
    """The CPU runs ahead of a GPU-bound loop (gpu_check on an H100: 35 us of CPU for 4 ms on the
    GPU): step_gpu_time far above step_time is what such a loop looks like, not a model gone wrong."""
    values = []
    for batch in (16, 32, 64, 128, 256):
        p = {"batch": batch}
        values += [(p, "main->loop", "step_time", 0.0001), (p, "main->loop", "step_gpu_time", 0.001 * batch),
                   (p, "main->loop", "data_wait", 0.001 * batch)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"params": p, "callpath": cp, "metric": m, "value": [v, v]}) + "\n"
                           for p, cp, m, v in values))
    from modeler.commands.fit import fit_dataset
    from modeler.readers import load

    result = fit_dataset(load([src]), at="batch=1024", min_share=0)
    [w] = [w for w in result.warnings if "part of the step" in w]
    assert "data_wait" in w and "step_gpu_time" not in w


def test_the_reports_gpu_tick_says_it_is_a_median_and_names_the_median_step(tmp_path):
    """Review 98 MED-1: the split chart's bars are the mean step, which the warm-up step raises; the
    tick, now the median GPU span, looked 85-90% idle beside them. The tick says what it is, and its
    tooltip gives the median step to compare it with; the markdown report says what its GPU column is."""
    from modeler.cli import main

    for batch in (16, 32, 64, 128, 256):
        later = (5 + batch / 16) * MS
        steps = [{"region": 2, "duration_ns": 900 * MS, "data_wait_ns": 0, "comm_ns": 0, "gpu_ns": 860 * MS}]
        steps += [{"region": 2, "duration_ns": later, "data_wait_ns": 0, "comm_ns": 0, "gpu_ns": later} for _ in range(3)]
        write_rank_file(tmp_path / "runs" / f"b{batch}", run_id=f"b{batch}", params={"batch": batch}, steps=steps,
                        profile={(0,): (1, 2000 * MS, MS), (0, 1): (1, 1900 * MS, MS), (0, 1, 2): (4, 1800 * MS, MS)})
    assert main(["report", str(tmp_path / "runs"), "-q", "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "median GPU time per step" in html
    assert "64: median GPU time per step 9 ms (median step 9 ms)" in html
    assert main(["report", str(tmp_path / "runs"), "--format", "markdown", "-q", "-o", str(tmp_path / "r.md")]) == 0
    assert "GPU is each rank's median GPU time per step" in (tmp_path / "r.md").read_text(encoding="utf-8")
