"""Step records with a `weight` (runs thinned by SCALEPROBE_STEP_RECORDS): the modeler's step metrics
weigh them, so a thinned run gives the metrics of the same run written whole, up to sampling."""
import random

import numpy as np
import pytest

from modeler.aggregate import RegionNames, per_step, rank_metrics, record_weight, weighted_median
from modeler.readers.runs import load_runs
from modeler.timeline import build_trace
from runtime.recorder import StepThinning
from runtime.runfile import read_run

from modeler_synthetic_runs import MS, write_rank_file

STEPS = 20000
STEP_CP = "main->train->train_epoch"
PROFILE = {(0,): (1, 60_000 * MS, 1 * MS), (0, 1): (1, 59_000 * MS, 1 * MS), (0, 1, 2): (1, 58_000 * MS, 58_000 * MS)}


def synthetic_steps(n=STEPS, seed=3):
    """Steps that slow down over the run (2 ms to 8 ms), with noise: the early steps, which a thinned
    run keeps densest, are the fast ones, so an unweighted median of its records would be far off.
    Every 4th step communicates (gradient accumulation: a stride of 4 or 8 taking the same step of
    each block would see all of it or none), the loader waits now and then."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        dur = int((2 + 6 * i / n) * MS * rng.uniform(0.9, 1.1))
        out.append({"region": 2, "step": i, "start_ns": i * 10 * MS, "duration_ns": dur,
                    "data_wait_ns": int(rng.uniform(0.1, 0.3) * MS) if rng.random() < 0.3 else 0,
                    "comm_ns": int(dur * 0.4 * i / n) if i % 4 == 3 else 0, "gpu_ns": None, "memory": None})
    return out


def thinned(steps, bound):
    """The records the runtime writes for `steps` with SCALEPROBE_STEP_RECORDS=bound, and its count of
    steps left out (runtime.recorder.StepThinning, as runtime.series uses it)."""
    t = StepThinning(bound)
    out = []
    for s in steps:
        w = t.take(s["region"], None)
        if w == 1:
            out.append(dict(s))
        elif w:
            t.hold(s["region"], None, dict(s, weight=w), out)
    out.extend(t.release())
    return out, t.end_counts()


def metrics(tmp_path, name, steps, end=None):
    path = write_rank_file(tmp_path / name, run_id=name, params={"p": 1}, profile=PROFILE,
                           steps=steps,
                           end={"status": "ok", "exit_code": 0, **(end or {})})
    runset = load_runs([path])
    [run] = runset.completed()
    names = RegionNames([run])
    values = rank_metrics(run.files, names).values
    return {m: values[(STEP_CP, m)] for m in ("step_time", "data_wait", "step_comm_time")}, read_run(path)


def test_thinned_run_gives_the_metrics_of_the_whole_run(tmp_path):
    steps = synthetic_steps()
    recs, counts = thinned(steps, 1000)  # 20000 steps: 4300 records
    assert len(recs) < 1000 * (1 + np.log2(STEPS / 1000)) and sum(r.get("weight", 1) for r in recs) == STEPS
    whole, _ = metrics(tmp_path, "whole", steps)
    thin, run = metrics(tmp_path, "thin", recs, {"steps_thinned": counts})
    assert run.problems == []
    # sampling: the median from a few thousand records, the parts' means from fewer that have them
    for m, rel in (("step_time", 0.01), ("data_wait", 0.05), ("step_comm_time", 0.05)):
        assert thin[m] == pytest.approx(whole[m], rel=rel), m
    # without their weights the same records say something else: the weights are what makes it right
    unweighted, _ = metrics(tmp_path, "unweighted", [{k: v for k, v in r.items() if k != "weight"} for r in recs])
    assert abs(unweighted["step_time"] / whole["step_time"] - 1) > 0.15
    assert abs(unweighted["step_comm_time"] / whole["step_comm_time"] - 1) > 0.15


def test_weights_are_honoured(tmp_path):
    # unweighted median 3 ms, mean wait 2 ms; weighted (1, 1, 1, 5): median 9 ms, mean wait 3.5 ms
    recs = [{"region": 2, "step": i, "start_ns": i * 100 * MS, "duration_ns": d * MS, "data_wait_ns": w * MS,
             "comm_ns": 0, "gpu_ns": None, "memory": None}
            for i, (d, w) in enumerate([(1, 1), (3, 1), (5, 1), (9, 5)])]
    recs[-1]["weight"] = 5
    got, _ = metrics(tmp_path, "w", recs)
    assert got["step_time"] == pytest.approx(9e-3)
    assert got["data_wait"] == pytest.approx((1 + 1 + 1 + 25) / 8 * 1e-3)
    plain, _ = metrics(tmp_path, "plain", [{k: v for k, v in r.items() if k != "weight"} for r in recs])
    assert plain["step_time"] == pytest.approx(4e-3) and plain["data_wait"] == pytest.approx(2e-3)


def test_weighted_median_and_mean():
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 6):
        v = list(rng.normal(size=n))
        assert weighted_median(v, [1] * n) == pytest.approx(float(np.median(v)))  # np.median, also for even n
        assert per_step("duration_ns", v, [1] * n) == float(np.median(v))
    # a weighted set is the expanded set
    v, w = [4.0, 1.0, 3.0, 2.0], [1, 3, 2, 2]
    expanded = [x for x, k in zip(v, w) for _ in range(k)]
    assert weighted_median(v, w) == pytest.approx(float(np.median(expanded)))
    assert per_step("duration_ns", v, w) == pytest.approx(float(np.median(expanded)))
    assert per_step("comm_ns", v, w) == pytest.approx(float(np.mean(expanded)))
    assert weighted_median([1.0, 2.0, 10.0], [1, 0, 1]) == pytest.approx(5.5)  # weight 0: left out
    assert weighted_median([1.0, 2.0, 3.0], [1, 1, 5]) == 3.0 != float(np.median([1.0, 2.0, 3.0]))


def test_record_weight_of_odd_values():
    assert record_weight({}) == 1 and record_weight({"weight": None}) == 1
    assert record_weight({"weight": 8}) == 8
    for bad in ("8", True, float("nan"), float("inf"), -2):
        assert record_weight({"weight": bad}) == 1


def test_negative_weight_leaves_the_record_out(tmp_path):
    recs = [{"region": 2, "step": i, "start_ns": i * MS, "duration_ns": (i + 1) * MS, "data_wait_ns": 0,
             "comm_ns": 0, "gpu_ns": None, "memory": None} for i in range(3)]
    recs[2]["weight"] = -4
    path = write_rank_file(tmp_path / "neg", run_id="neg", params={"p": 1}, profile=PROFILE,
                           steps=recs)
    runset = load_runs([path])
    [run] = runset.completed()
    assert any("weight=-4" in w for w in runset.warnings), runset.warnings
    values = rank_metrics(run.files, RegionNames([run])).values
    assert values[(STEP_CP, "step_time")] == pytest.approx(1.5e-3)


def test_timeline_draws_the_written_steps_and_says_thinned(tmp_path):
    recs, counts = thinned(synthetic_steps(1000), 50)
    path = write_rank_file(tmp_path / "t", run_id="t", params={"p": 1}, profile=PROFILE,
                           steps=recs,
                           end={"status": "ok", "exit_code": 0, "steps_thinned": counts})
    trace = build_trace([read_run(path)])
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "step"]
    assert len(slices) == len(recs)
    assert trace["otherData"]["steps_thinned"] == 1000 - len(recs)
    assert sum(e["args"].get("weight", 1) for e in slices) == 1000


def test_the_reports_loop_statistics_weigh_thinned_records(tmp_path):
    """The report's step table (`report.runs.loop_stats`) counted records, not steps: a thinned run
    of 20000 steps read as 4313, with its median and means leaning to the early steps."""
    from modeler.report.runs import loop_stats

    steps = synthetic_steps()
    recs, counts = thinned(steps, 1000)

    def stats(name, records, end=None):
        path = write_rank_file(tmp_path / name, run_id=name, params={"p": 1}, profile=PROFILE, steps=records,
                               end={"status": "ok", "exit_code": 0, **(end or {})})
        [run] = load_runs([path]).completed()
        return loop_stats(run.files, RegionNames([run]))["steps"][STEP_CP]

    whole, thin = stats("whole", steps), stats("thin", recs, {"steps_thinned": counts})
    assert thin["count"] == whole["count"] == STEPS
    for field in ("duration", "mean_duration", "comm"):
        assert thin[field] == pytest.approx(whole[field], rel=0.05), field
