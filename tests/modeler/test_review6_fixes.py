"""Fixes from the review of the strong-scaling split and the figures from the per-rank time
(review 6); each test fails on the code before the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from modeler.commands.fit import fit_dataset
from modeler.dataset import Dataset, Series
from modeler.derived import baselines
from modeler.errors import InputError
from modeler.estimator import PMNFModeler
from modeler.model import Factor, Model, Term
from modeler.growth import growth
from modeler_synthetic_runs import write_rank_file

R = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])[:, None]


def _reps(values: np.ndarray, noise: float, rng) -> tuple:
    return tuple(values[:, None] * (1 + rng.uniform(-noise, noise, (len(values), 5))))


def _model(constant: float, *terms: tuple[float, float]) -> Model:
    return Model(("ranks", "n"), constant, tuple(Term(c, (Factor("ranks", e),)) for c, e in terms))


def test_growth_of_terms_in_ranks_to_the_minus_one():
    # rising to a plateau (a ring allreduce, 2 - 2/ranks) is level, not linear growth
    assert growth(_model(2.0, (-2.0, -1.0))) == (0.0, 0.0)
    assert growth(_model(2.0, (2.0, -1.0))) == (0.0, 0.0)
    # nothing but decaying terms: falls, as its slowest-decaying term
    assert growth(_model(0.0, (1.0, -1.0), (1.0, -0.5))) == (-0.5, 0.0)
    # work split over the ranks, n / ranks, is level when both grow alike; a rising term dominates
    split = Model(("ranks", "n"), 0.0, (Term(1.0, (Factor("n", 1.0), Factor("ranks", -1.0))),))
    assert growth(split) == (0.0, 0.0)
    assert growth(_model(1.0, (3.0, -1.0), (0.1, 1.0))) == (1.0, 0.0)
    assert growth(_model(1.0, (-0.1, 1.0))) == (-1.0, -0.0)


def test_a_bounded_time_does_not_rank_above_a_linear_one():
    rng = np.random.default_rng(0)
    ser = [Series("main->allreduce", "time", R, _reps(2.0 * (1 - 1 / R[:, 0]) + 0.05, 0.01, rng)),
           Series("main->linear", "time", R, _reps(0.01 * R[:, 0], 0.01, rng)),
           Series("main->const", "time", R, _reps(30.0 + 0 * R[:, 0], 0.01, rng))]
    order = [r.fitted.callpath for r in fit_dataset(Dataset(("ranks",), ser), at="ranks=1024").rows]
    assert order[0] == "main->linear"


@pytest.mark.parametrize("noise", [0.01, 0.05, 0.1])
def test_noisy_constants_are_never_split(noise):
    rng = np.random.default_rng(1)
    grid = np.array([1.0, 2.0, 4.0, 8.0, 16.0])[:, None]
    ser = [Series(f"c{i}", "time", grid, _reps(np.full(5, 3.0), noise, rng)) for i in range(60)]
    fitted = PMNFModeler().fit(Dataset(("ranks",), ser)).models_
    assert len(fitted) == 60
    for fm in fitted:
        assert all(f.exponent >= 0 for t in fm.model.terms for f in t.factors), fm.model.formula()


def test_the_baseline_is_the_fewest_ranks_measured_with_the_targets_other_parameters():
    # no 1-rank runs at n=4, 5 (out of memory): the speedups measured there are relative to 2 ranks
    pts = np.array([(r, n) for r in (1, 2, 4, 8, 16) for n in (1, 2, 3, 4, 5) if not (r == 1 and n >= 4)], float)
    s = Series("main", "time", pts, tuple(np.ones((len(pts), 1))))
    b = baselines([s], ("ranks", "n"))
    assert b.at("main", {"ranks": 16.0, "n": 5.0}) == 2.0
    assert b.at("main", {"ranks": 16.0, "n": 2.0}) == 1.0
    assert b.at("main", {"ranks": 64.0, "n": 20.0}) == 2.0  # beyond: the nearest measured combination
    assert b.at("other", {"ranks": 16.0, "n": 5.0}) is None


def _sweep(root: Path, skip) -> None:
    rng = np.random.default_rng(0)
    for r in (1, 2, 4, 8, 16):
        for n in (1, 2, 3, 4, 5):
            if skip(r, n):
                continue
            for rep in range(2):
                run = f"r{r}n{n}x{rep}"
                t = (0.05 * n + 2.0 * n / r) * (1 + rng.uniform(-0.01, 0.01))
                for rank in range(r):
                    write_rank_file(root / run, run_id=run, params={"ranks": r, "n": n}, rank=rank, world_size=r,
                                    repetition=rep, regions=((0, "function", "main", "main.py", 1),),
                                    profile={(0,): (1, t * 1e9, t * 1e9)})


def _modeler(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modeler", *argv], capture_output=True, text=True, timeout=120)


def test_speedup_from_time_at_a_measured_point_matches_the_measurement(tmp_path):
    _sweep(tmp_path, lambda r, n: r == 1 and n >= 4)
    p = _modeler("fit", str(tmp_path), "--metric", "speedup", "--at", "ranks=16,n=5", "--format", "json")
    assert p.returncode == 0, p.stderr
    (m,) = json.loads(p.stdout)["models"]
    true = (0.05 * 5 + 2.0 * 5 / 2) / (0.05 * 5 + 2.0 * 5 / 16)  # relative to 2 ranks, as measured: 6.0
    assert m["prediction_from_time"] == pytest.approx(true, rel=0.03)
    assert "far from what the call path's per-rank time gives" not in p.stderr


def test_no_figure_from_time_for_extrap_inputs_or_under_compat(tmp_path):
    _sweep(tmp_path / "runs", lambda r, n: False)
    exported = tmp_path / "sum.jsonl"
    p = _modeler("export", "--extrap", str(exported), "--ranks", "sum", "-q", str(tmp_path / "runs"))
    assert p.returncode == 0, p.stderr
    p = _modeler("fit", str(exported), "--metric", "speedup,cost", "--at", "ranks=16", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert [m["prediction_from_time"] for m in json.loads(p.stdout)["models"]] == [None, None]
    p = _modeler("fit", str(tmp_path / "runs"), "--metric", "speedup", "--compat", "extrap", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert [m["prediction_from_time"] for m in json.loads(p.stdout)["models"]] == [None]
    assert "per-rank time" not in p.stderr


def test_a_baseline_of_zero_ranks_is_no_baseline():
    pts = np.array([0.0, 1.0, 2.0, 4.0, 8.0])[:, None]
    t = np.array([5.0, 5.0, 2.5, 1.25, 0.7])
    ser = [Series("main", m, pts, tuple(v[:, None] * np.ones((1, 3)))) for m, v in
           (("time", t), ("cost", t * pts[:, 0]), ("speedup", 5.0 / t))]
    ranking = fit_dataset(Dataset(("ranks",), ser), at="ranks=32")  # raised ZeroDivisionError
    (speedup,) = [r for r in ranking.rows if r.fitted.metric == "speedup"]
    assert speedup.from_time is not None
    assert baselines(ser, ("ranks",)).at("main", {"ranks": 32.0}) == 1.0


def test_a_value_that_is_not_finite_is_named():
    pts = np.array([1.0, 2.0, 4.0])[:, None]
    ds = Dataset(("ranks",), [Series("main", "speedup", pts, (np.array([np.nan]), np.array([1.0]), np.array([2.0])))])
    with pytest.raises(InputError, match=r"main/speedup: a value at \(ranks=1\) is nan: values must be finite"):
        PMNFModeler().fit(ds)


def test_a_rank_whose_recorder_gave_up_records_makes_its_run_incomplete(tmp_path):
    from modeler.readers import ReadOptions, read_inputs

    for p in (2, 4, 8):
        write_rank_file(tmp_path / f"p{p}", run_id=f"p{p}", params={"ranks": p}, profile={(0,): (1, p * 10**6, 10**6)},
                        end={"status": "ok", "exit_code": 0, "lost_flushes": 3 if p == 8 else 0})
    loaded = read_inputs([tmp_path])
    (warning,) = [w for w in loaded.dataset.warnings if w.startswith("run p8 left out (incomplete)")]
    assert "3 flush(es) of its records could not be written (disk full?): its totals are short" in warning
    kept = read_inputs([tmp_path], ReadOptions(include_incomplete=True)).dataset
    assert any("--include-incomplete kept" in w and "run p8" in w for w in kept.warnings)
