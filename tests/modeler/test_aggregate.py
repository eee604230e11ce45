"""Derived metrics (speedup, parallel efficiency, cost) and the rank imbalance metric."""

from __future__ import annotations

import numpy as np
import pytest

from modeler.aggregate import METRICS, dataset_from_runs
from modeler.readers import ReadOptions
from modeler.readers.runs import load_runs, read_runs
from modeler_synthetic_runs import write_rank_file, write_sweep

MS = 10**6


def series(ds, callpath, metric):
    (s,) = [s for s in ds.series if s.callpath == callpath and s.metric == metric]
    return s


def strong_scaling(p: dict, rank: int, rep: int) -> float:
    # serial part 0.1 s, parallel part 1.6 s * batch/16 split over the ranks
    return 0.1 + 1.6 * p["batch"] / 16 / p["ranks"]


def test_speedup_efficiency_and_cost_per_fixed_other_parameters(tmp_path):
    write_sweep(tmp_path, {"ranks": [2, 4, 8], "batch": [16, 32]}, time_s=strong_scaling)
    ds = read_runs([tmp_path])
    t = series(ds, "main->train", "time")
    sp = series(ds, "main->train", "speedup")
    eff = series(ds, "main->train", "parallel_efficiency")
    cost = series(ds, "main->train", "cost")
    r, b = t.points[:, 0], t.points[:, 1]
    expected_t = 0.1 + 1.6 * b / 16 / r
    assert np.allclose(t.values(), expected_t)
    # the baseline is the fewest ranks measured (2) at the same batch
    base = 0.1 + 1.6 * b / 16 / 2
    assert np.allclose(sp.values(), base / expected_t)
    assert np.allclose(eff.values(), base / expected_t * 2 / r)
    assert np.allclose(cost.values(), expected_t * r)
    assert np.allclose(sp.values()[r == 2], 1.0)
    assert (np.diff(eff.values()[b == 16]) < 0).all(), "efficiency falls as ranks grow with a serial part"


def test_speedup_uses_median_baseline_and_keeps_repetitions(tmp_path):
    times = {(2, 0): 1.0, (2, 1): 1.2, (2, 2): 3.0, (4, 0): 0.6, (4, 1): 0.6, (4, 2): 0.5}
    for (r, rep), t in times.items():
        for rank in range(r):
            write_rank_file(tmp_path / f"r{r}-{rep}", run_id=f"r{r}-{rep}", params={"ranks": r}, rank=rank, world_size=r,
                            repetition=rep, profile={(0,): (1, int(t * 1e9), MS)})
    sp = series(read_runs([tmp_path]), "main", "speedup")
    assert sorted(sp.repetitions[0].tolist()) == pytest.approx(sorted([1.2 / 1.0, 1.2 / 1.2, 1.2 / 3.0]))
    assert sorted(sp.repetitions[1].tolist()) == pytest.approx(sorted([1.2 / 0.6, 1.2 / 0.6, 1.2 / 0.5]))


def test_no_derived_metrics_without_ranks_parameter(tmp_path):
    write_sweep(tmp_path, {"batch": [16, 32, 64]}, time_s=lambda p, r, rep: 0.01 * p["batch"])
    metrics = read_runs([tmp_path]).metrics()
    assert "time" in metrics
    assert not {"speedup", "parallel_efficiency", "cost"} & set(metrics)


def test_derived_can_be_switched_off(tmp_path):
    write_sweep(tmp_path, {"ranks": [1, 2]}, time_s=lambda p, r, rep: 1.0)
    assert "speedup" not in read_runs([tmp_path], ReadOptions(derived=False)).metrics()


def test_imbalance_left_out_when_every_run_has_one_rank(tmp_path):
    write_sweep(tmp_path, {"batch": [16, 32]}, time_s=lambda p, r, rep: 1.0)
    assert "imbalance" not in read_runs([tmp_path]).metrics()


def test_imbalance_is_one_on_single_rank_runs_of_a_multi_rank_sweep(tmp_path):
    write_sweep(tmp_path, {"ranks": [1, 2, 4]}, time_s=lambda p, r, rep: 1.0 + (0.5 if r == 1 else 0.0))
    imb = series(read_runs([tmp_path]), "main->train", "imbalance")
    assert imb.values()[0] == 1.0
    assert imb.values()[1] == pytest.approx(1.5 / 1.25)
    assert imb.values()[2] == pytest.approx(1.5 / 1.125)


def test_every_metric_has_a_unit_and_description():
    for name, m in METRICS.items():
        assert m.description, name
    assert METRICS["time"].unit == "s" and METRICS["comm_bytes"].unit == "B"


def test_dataset_from_runs_reuses_a_runset(tmp_path):
    write_sweep(tmp_path, {"ranks": [1, 2]}, time_s=lambda p, r, rep: 1.0 / p["ranks"])
    rs = load_runs([tmp_path])
    mean = dataset_from_runs(rs, ranks="mean")
    total = dataset_from_runs(rs, ranks="sum")
    assert series(mean, "main->train", "time").values().tolist() == pytest.approx([1.0, 0.5])
    assert series(total, "main->train", "time").values().tolist() == pytest.approx([1.0, 1.0])


def test_series_values_in_one_array_op_agree_with_the_per_point_reduction():
    """The vectorized path (every point with as many runs) gives what the per-point one gives."""
    import numpy as np

    from modeler.dataset import Series

    rng = np.random.default_rng(0)
    reps = tuple(rng.uniform(1, 2, 5) for _ in range(7))
    even = Series("a", "time", np.arange(7.0)[:, None], reps)
    uneven = Series("a", "time", np.arange(8.0)[:, None], (*reps, np.array([3.0, 4.0])))
    for how in ("median", "mean", "min", "max"):
        per_point = np.array([{"median": np.median, "mean": np.mean, "min": np.min, "max": np.max}[how](r) for r in reps])
        assert np.allclose(even.values(how), per_point)
        assert np.allclose(uneven.values(how)[:7], per_point)
