"""Speedup, parallel efficiency and cost at the target from the call path's time model
(`modeler.derived`): PMNF cannot fall as 1/x, a ratio of time models can."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from modeler import cli
from modeler.derived import choose_basis, disagreement_warning, from_time
from modeler.model import Factor, FittedModel, Model, Term
from modeler.ranking import RankedModel
from modeler_synthetic_runs import write_rank_file

RANKS = (1, 2, 4, 8, 16)
BATCH = (8, 16, 32, 64, 128)


def _true_time(ranks: int, batch: int) -> float:
    """Per-rank seconds of `main`: grows with batch, and slows by half per doubling of ranks
    (communication), so the speedup falls as 1 / (1 + log2(ranks) / 2): no PMNF can follow it."""
    return 0.001 * batch * (1 + 0.5 * math.log2(ranks))


def _strong_time(ranks: int, batch: int) -> float:
    """Strong scaling: the batch's work is split over the ranks. The time falls as 1/ranks (no PMNF
    term does), the cost 0.01 * ranks + 0.01 * batch is PMNF."""
    return 0.01 + 0.01 * batch / ranks


def _sweep(root: Path, true_time) -> None:
    for ranks in RANKS:
        for batch in BATCH:
            for rep, noise in enumerate((0.99, 1.01)):
                run = f"r{ranks}-b{batch}-{rep}"
                t = int(true_time(ranks, batch) * noise * 1e9)
                for rank in range(ranks):
                    write_rank_file(root / run, run_id=run, rank=rank, world_size=ranks, repetition=rep,
                                    params={"ranks": ranks, "batch": batch}, profile={(0,): (1, t, t)})


@pytest.fixture(scope="module")
def ranks_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ranks")
    _sweep(root, _true_time)
    return root


@pytest.fixture(scope="module")
def strong_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("strong")
    _sweep(root, _strong_time)
    return root


def _fit_json(capsys, *argv: str) -> dict:
    assert cli.main(["fit", *argv, "--format", "json"]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    return {"doc": json.loads(out), "err": err}


def test_speedup_efficiency_and_cost_come_from_the_time_model_when_only_they_are_selected(ranks_runs, capsys):
    res = _fit_json(capsys, str(ranks_runs), "--metric", "speedup,parallel_efficiency,cost", "--callpath", "main",
                    "--at", "ranks=64,batch=128")
    models = {m["metric"]: m for m in res["doc"]["models"]}
    assert set(models) == {"speedup", "parallel_efficiency", "cost"}  # the time model is fitted, not shown
    true_speedup = _true_time(1, 128) / _true_time(64, 128)  # 0.25
    assert models["speedup"]["prediction_from_time"] == pytest.approx(true_speedup, rel=0.02)
    assert models["parallel_efficiency"]["prediction_from_time"] == pytest.approx(true_speedup / 64, rel=0.02)
    assert models["cost"]["prediction_from_time"] == pytest.approx(64 * _true_time(64, 128), rel=0.02)
    assert {m["prediction_from_time_basis"] for m in models.values()} == {"time"}  # the time is PMNF here
    # the efficiency's own model is far off at 64 ranks, and the warning says which figure to prefer
    own = models["parallel_efficiency"]["prediction"]
    assert not (1 / 1.5 <= own / (true_speedup / 64) <= 1.5)
    assert "far from what the call path's per-rank time gives" in res["err"]
    assert "main (parallel_efficiency)" in res["err"] and "main (speedup)" not in res["err"]


def test_table_and_csv_show_the_figure_from_time(ranks_runs, capsys):
    assert cli.main(["fit", str(ranks_runs), "--metric", "time,speedup", "--callpath", "main", "--at", "ranks=64"]) == 0
    table = capsys.readouterr().out
    (speedup_line,) = [ln for ln in table.splitlines() if " speedup " in ln]
    (time_line,) = [ln for ln in table.splitlines() if " time " in ln]
    assert "(from time: 0.25" in speedup_line and "from " not in time_line
    assert cli.main(["fit", str(ranks_runs), "--metric", "time,speedup", "--callpath", "main", "--at", "ranks=64",
                     "--format", "csv"]) == 0
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert float(rows["speedup"]["prediction_from_time"]) == pytest.approx(0.25, rel=0.02)
    assert rows["time"]["prediction_from_time"] == ""


def test_no_figure_from_time_where_time_is_not_a_time_per_rank(ranks_runs, capsys):
    # under --ranks sum the time series is rank-seconds: the speedups do not derive from it
    res = _fit_json(capsys, str(ranks_runs), "--ranks", "sum", "--metric", "speedup", "--callpath", "main",
                    "--at", "ranks=64")
    (model,) = res["doc"]["models"]
    assert model["prediction_from_time"] is None


def test_strong_scaling_time_falls_as_one_over_ranks_and_the_speedup_follows(strong_runs, capsys):
    res = _fit_json(capsys, str(strong_runs), "--metric", "time,speedup,parallel_efficiency", "--callpath", "main",
                    "--at", "ranks=64,batch=128")
    models = {m["metric"]: m for m in res["doc"]["models"]}
    # the time model is split over the ranks (modeler.strong_scaling): a term in ranks^(-1)
    ranks_exponents = {f["exponent"] for t in models["time"]["terms"] for f in t["factors"] if f["parameter"] == "ranks"}
    assert ranks_exponents == {-1.0}
    assert models["time"]["prediction"] == pytest.approx(_strong_time(64, 128), rel=0.03)
    true_speedup = _strong_time(1, 128) / _strong_time(64, 128)  # 1.29 / 0.03 = 43
    assert models["speedup"]["prediction_from_time"] == pytest.approx(true_speedup, rel=0.03)
    assert models["parallel_efficiency"]["prediction_from_time"] == pytest.approx(true_speedup / 64, rel=0.03)


def _time_model(constant: float, per_rank: float, metric: str = "time", cv: float | None = None) -> FittedModel:
    model = Model(("ranks", "n"), constant, (Term(per_rank, (Factor("ranks", 1.0),)),))
    return FittedModel("main", metric, model, 1.0, 0.0, 1.0, cv, 25)


def test_the_basis_is_the_model_that_cross_validates_better():
    t, c = _time_model(1, 1, "time", 5.0), _time_model(1, 1, "cost", 4.0)
    assert choose_basis(t, c) is c
    tie = _time_model(1, 1, "time", 4.0)
    assert choose_basis(tie, c) is tie  # a tie goes to time
    assert choose_basis(_time_model(1, 1, "time", None), c).metric == "time"  # no score: time
    assert choose_basis(None, c) is c and choose_basis(None, None) is None


def test_a_cost_basis_is_divided_by_ranks():
    cost = _time_model(0.0, 2.0, "cost")  # cost = 2 * ranks: a per-rank time of 2 everywhere
    at = {"ranks": 8.0, "n": 1.0}
    assert from_time("speedup", cost, at, ("ranks", "n"), 2.0) == pytest.approx(1.0)
    assert from_time("parallel_efficiency", cost, at, ("ranks", "n"), 2.0) == pytest.approx(0.25)
    assert from_time("cost", cost, at, ("ranks", "n"), 2.0) == pytest.approx(16.0)


def test_from_time_follows_the_definitions_of_the_measurements():
    tm = _time_model(2.0, 1.0)  # T = 2 + ranks: T(2) = 4, T(8) = 10
    at = {"ranks": 8.0, "n": 3.0}
    assert from_time("speedup", tm, at, ("ranks", "n"), 2.0) == pytest.approx(0.4)
    assert from_time("parallel_efficiency", tm, at, ("ranks", "n"), 2.0) == pytest.approx(0.4 * 2 / 8)
    assert from_time("cost", tm, at, ("ranks", "n"), 2.0) == pytest.approx(80.0)
    with pytest.raises(ValueError, match="'time' is not derived"):
        from_time("time", tm, at, ("ranks", "n"), 2.0)


def test_from_time_is_nan_where_the_time_model_falls_below_zero():
    tm = _time_model(10.0, -1.0)  # T(16) = -6
    assert math.isnan(from_time("speedup", tm, {"ranks": 16.0, "n": 1.0}, ("ranks", "n"), 1.0))


def _row(metric: str, prediction: float, from_time_: float | None) -> RankedModel:
    fm = FittedModel("main", metric, Model(("ranks",), prediction), 1.0, 0.0, 1.0, None, 5)
    return RankedModel(fm, (0.0, 0.0), prediction, None, None, from_time=None if from_time_ is None else (from_time_, "time"))


def test_disagreement_warning_names_only_models_far_from_the_time_figure():
    assert disagreement_warning([_row("speedup", 0.3, 0.25), _row("cost", 5.0, None)], "ranks=64") is None
    w = disagreement_warning([_row("speedup", 0.6, 0.25), _row("parallel_efficiency", -0.1, 0.004),
                              _row("cost", 10.0, 9.0)], "ranks=64")
    assert w.startswith("2 speedup, efficiency or cost models predict at ranks=64 far from")
    assert "main (speedup) 0.6 against 0.25 from time" in w
    assert "main (parallel_efficiency) -0.1 against 0.004 from time" in w
    assert "(cost)" not in w


def test_the_other_basis_is_used_where_the_chosen_one_falls_below_zero():
    from modeler.derived import Baselines, derived_predictions

    falling = _time_model(10.0, -1.0, "time", 1.0)  # better cross-validated, but T(16) = -6
    cost = _time_model(0.0, 2.0, "cost", 5.0)  # cost = 2 * ranks: a per-rank time of 2
    speedup = FittedModel("main", "speedup", Model(("ranks", "n"), 1.0), 1.0, 0.0, 1.0, None, 25)
    bases = Baselines(("ranks", "n"), {"main": {(1.0,): 1.0}})
    (got,) = derived_predictions([speedup], [falling, cost], {"ranks": 16.0, "n": 1.0}, ("ranks", "n"), bases)
    assert got == (pytest.approx(1.0), "cost")
    (none,) = derived_predictions([speedup], [falling], {"ranks": 16.0, "n": 1.0}, ("ranks", "n"), bases)
    assert none is None  # no figure, and no basis named beside it (review 66 F2)
