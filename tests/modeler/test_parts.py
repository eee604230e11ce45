"""A region's time model against its parts' (modeler.parts), alone, in the ranking and in `modeler fit`."""

from __future__ import annotations

import json
import math

import pytest

from modeler import cli
from modeler.model import Factor, FittedModel, Model, Term
from modeler.parts import check_parts, parts_sums
from modeler.ranking import rank_models
from modeler_synthetic_runs import write_sweep

PARAMS = ("p",)


def fitted(callpath: str, constant: float, slope: float = 0.0, metric: str = "time") -> FittedModel:
    terms = (Term(slope, (Factor("p", 1.0),)),) if slope else ()
    return FittedModel(callpath, metric, Model(PARAMS, constant, terms), smape=1.0, rss=0.1, ar2=0.99,
                       cv_smape=1.0, points=5)


def test_a_parent_far_above_its_exclusive_time_and_children_is_named():
    preds = {("main", "time"): 235.0, ("main", "exclusive_time"): 5.0,
             ("main->a", "time"): 60.0, ("main->b", "time"): 30.0}
    (c,) = check_parts(preds)
    assert (c.callpath, c.whole, c.parts, c.children, c.with_exclusive) == ("main", 235.0, 95.0, 2, True)
    msg = c.message("p=1024")
    assert "main" in msg and "235" in msg and "95" in msg and "p=1024" in msg and "exclusive time" in msg


def test_parts_that_agree_are_not_reported():
    preds = {("main", "time"): 100.0, ("main", "exclusive_time"): 10.0,
             ("main->a", "time"): 60.0, ("main->b", "time"): 28.0}
    assert check_parts(preds) == []
    assert parts_sums(preds)["main"].parts == pytest.approx(98.0)


def test_without_exclusive_time_only_a_parent_below_its_children_is_a_contradiction():
    above = {("main", "time"): 300.0, ("main->a", "time"): 95.0}  # may be main's own work
    assert check_parts(above) == []
    below = {("main", "time"): 50.0, ("main->a", "time"): 60.0, ("main->b", "time"): 35.0}
    (c,) = check_parts(below)
    assert c.callpath == "main" and not c.with_exclusive and "children's models" in c.message("p=8")


def test_deep_call_paths_compare_with_direct_children_only():
    preds = {("main", "time"): 100.0, ("main->a", "time"): 99.0, ("main->a->x", "time"): 20.0,
             ("main->a->y", "time"): 30.0, ("main->a", "exclusive_time"): 49.0}
    sums = parts_sums(preds)
    assert sums["main"].parts == 99.0 and sums["main->a"].parts == 99.0
    assert check_parts(preds) == []


def test_small_or_unevaluable_regions_are_left_alone():
    preds = {("main", "time"): 1000.0, ("main->tiny", "time"): 0.5, ("main->tiny->x", "time"): 5.0,
             ("main->nan", "time"): math.nan, ("main->nan->x", "time"): 900.0}
    # main->tiny: 10x below its child, but 0.5% of the root; main->nan: no prediction to compare
    assert [c.callpath for c in check_parts(preds)] == []


def test_ranking_reports_parts_and_uses_companion_models():
    models = [fitted("main", 1.0, 2.0), fitted("main->a", 0.5, 0.25), fitted("main->b", 0.5, 0.25)]
    companion = [fitted("main", 0.0, 0.05, metric="exclusive_time")]
    r = rank_models(models, PARAMS, {"p": 1000.0}, companions=companion)
    rows = {row.fitted.callpath: row for row in r.rows}
    assert [row.fitted.metric for row in r.rows] == ["time"] * 3  # companions are not ranked
    assert rows["main"].prediction == pytest.approx(2001.0)
    assert rows["main"].from_parts == pytest.approx(50.0 + 2 * 250.5)
    assert rows["main->a"].from_parts is None  # no children
    assert any(w.startswith("main: its time model predicts 2001 at p=1000") for w in r.warnings)
    assert rows["main"].to_json()["prediction_from_parts"] == pytest.approx(551.0)
    # without the exclusive time, main above its children is not a contradiction
    assert not any(w.startswith("main:") for w in rank_models(models, PARAMS, {"p": 1000.0}).warnings)


def test_fit_checks_time_against_exclusive_time_it_does_not_show(tmp_path, capsys):
    runs = tmp_path / "runs"
    write_sweep(runs, {"ranks": [1, 2, 3, 4, 5], "batch": [8, 16, 32, 64, 128]}, ranks_of=lambda p: 1,
                time_s=lambda p, r, rep: 0.002 * p["ranks"] ** 2 + 0.01 * p["batch"])
    assert cli.main(["fit", str(runs), "--format", "json", "--at", "ranks=64,batch=256"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {m["metric"] for m in doc["models"]} == {"time"}
    train = next(m for m in doc["models"] if m["callpath"] == "main->train")
    # main->train's parts: its exclusive time (1/5, fitted for the check only) and train_epoch (4/5)
    assert train["prediction_from_parts"] == pytest.approx(train["prediction"], rel=1e-3)
    assert not any("extrapolates badly" in w for w in doc["warnings"])


def test_a_whole_below_its_parts_is_reported_from_a_smaller_gap():
    # inclusive time cannot be below its parts: 1.25x is reported, while 1.25x above is not
    below = {("main", "time"): 80.0, ("main", "exclusive_time"): 1.0, ("main->a", "time"): 99.0}
    above = {("main", "time"): 125.0, ("main", "exclusive_time"): 1.0, ("main->a", "time"): 99.0}
    assert [c.callpath for c in check_parts(below)] == ["main"]
    assert check_parts(above) == []
