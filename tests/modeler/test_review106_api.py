"""Review 106: the session-32 changes (the Python API, the end-of-sweep note), read again."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modeler.aggregate import dataset_from_runs
from modeler.commands.fit import fit_dataset
from modeler.dataset import Dataset, Series
from modeler.end_slope import _value_se, end_slope_note
from modeler.errors import InputError
from modeler.estimator import PMNFModeler
from modeler.model import Alternative, Factor, FittedModel, Model, Term
from modeler.readers import ReadOptions, load
from modeler.readers.runs import load_runs
from test_review103_api import _runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _runs(tmp_path_factory.mktemp("runs106"))


@pytest.mark.parametrize("ranks", ["mean", "max", "sum", "min"])
def test_dataset_from_runs_says_how_the_ranks_were_combined(runs, ranks):
    """MED-1: `dataset_from_runs(runset, ranks="sum")`, the docs' first example, said "mean" and a
    time per rank, and `fit_dataset` derived speedup from a summed time."""
    built = dataset_from_runs(load_runs([str(runs)]), ranks=ranks)
    read = load([str(runs)], ReadOptions(ranks=ranks))
    assert (built.across_ranks, built.time_per_rank) == (read.across_ranks, read.time_per_rank)
    assert built.across_ranks == ranks and built.time_per_rank == (ranks in ("mean", "max"))
    ranking = fit_dataset(built, metrics=["time", "speedup"], min_share=0, at="ranks=64")
    speedups = [r for r in ranking.rows if r.fitted.metric == "speedup"]
    assert speedups
    # a figure from the per-rank time where the time is one, none from rank-seconds or the fastest rank's
    assert all((r.from_time is not None) == (ranks in ("mean", "max")) for r in speedups)


def _with_forms(model: Model, *forms: Model) -> FittedModel:
    alts = (Alternative(0.5, model, np.eye(1 + len(model.terms)) * 1e-6),
            *(Alternative(0.5 / len(forms), f, np.eye(1 + len(f.terms)) * 1e-6) for f in forms))
    return FittedModel("s", "time", model, 1.0, 0.0, 1.0, None, 5, alternatives=alts)


def test_prediction_range_refuses_a_zero_that_a_form_in_play_cannot_take():
    """LOW-1: the model `3 + n` takes n=0, a form in play with log2(n) does not: the range was (nan, nan)."""
    linear = Model(("n",), 3.0, (Term(1.0, (Factor("n", 1.0, 0),)),))
    logged = Model(("n",), 4.0, (Term(0.4, (Factor("n", 0.75, 1),)),))
    fm = _with_forms(linear, logged)
    assert fm.predict([[0]])[0] == 3.0
    with pytest.raises(InputError, match=r"log2\(n\) is not defined at 0, and the form in play .* of s \[time\]"):
        fm.prediction_range([[0]])
    # a pass model is checked where its predictions are asked for
    fm = FittedModel("s", "time", linear, 1.0, 0.0, 1.0, None, 5, pass_models=(((1,), logged),))
    with pytest.raises(InputError, match=r"without pass\(es\) 1 has that factor"):
        fm.pass_predictions([[0]])
    lo, hi = _with_forms(linear, linear).prediction_range([[0]])
    assert math.isfinite(lo[0]) and math.isfinite(hi[0])


def _note(params, points, values, model, counts=5, spread=0.01):
    pts = np.asarray(points, dtype=float)
    n = len(pts)
    return end_slope_note(params, pts, np.asarray(values, dtype=float), np.full(n, spread), np.full(n, counts),
                          model, "r [time]")


def test_end_slope_names_the_values_as_measured():
    """LOW-2: 1048576 was written `1.04858e+06`, a value never measured."""
    xs = [16384 * k for k in (4, 8, 16, 32, 64)]
    values = [100 / (x / 16384) + x / 16384 for x in xs]
    flat = Model(("n",), float(np.mean(values[-2:])), ())
    note = _note(("n",), [[x] for x in xs], values, flat)
    assert note is not None and "n=1048576" in note and "e+06" not in note


def test_end_slope_tells_falling_values_as_falling_and_where_the_line_is():
    """LOW-6: values falling as ranks^-1.41 against a model falling as ranks^-1.78 were told "the
    growth steepens"; the other parameter's value on the line was not said."""
    pts = [[r, n] for n in (16, 64) for r in (1, 2, 4, 8)]
    values = [r ** -1.41 * n for r, n in pts]
    model = Model(("ranks", "n"), 0.0, (Term(1.0, (Factor("ranks", -1.78, 0), Factor("n", 1.0, 0))),))
    note = _note(("ranks", "n"), pts, values, model)
    assert note is not None
    assert "between ranks=4 and ranks=8 (n=64) the values fall as ranks^-1.41, the model as ranks^-1.78" in note
    assert "fall more slowly than the model" in note and note.endswith("likely low")
    assert "steepens" not in note
    # and the other way round: the values fall faster than the model, whose predictions are high
    model = Model(("ranks", "n"), 0.0, (Term(1.0, (Factor("ranks", -1.0, 0), Factor("n", 1.0, 0))),))
    note = _note(("ranks", "n"), pts, values, model)
    assert "fall faster than the model" in note and note.endswith("likely high")


def test_one_run_standard_error_counts_the_model_s_coefficients():
    """LOW-5: with one run a point, the residuals' mean square over n points, where a fit of k
    coefficients leaves n - k degrees of freedom."""
    pts = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    model = Model(("x",), 1.0, (Term(1.0, (Factor("x", 1.0, 0),)),))  # 2 coefficients
    r = np.array([0.05, -0.04, 0.03, -0.02, 0.01])
    vals = model.evaluate(pts) * np.exp(r)
    se = _value_se(0, pts, vals, np.zeros(5), np.ones(5), model)
    assert se == pytest.approx(math.sqrt(float(np.sum(r * r)) / 3))


def test_select_takes_one_name_as_one_name():
    """LOW-3: `metrics="exclusive_time"` kept `time` (a substring); `callpaths="main->work"` kept `main`."""
    pts = [[1], [2], [4]]
    ds = Dataset(("p",), [Series(cp, m, pts, [[1.0], [2.0], [3.0]]) for cp in ("main", "main->work")
                          for m in ("time", "exclusive_time")])
    assert {s.metric for s in ds.select(metrics="exclusive_time").series} == {"exclusive_time"}
    assert {s.callpath for s in ds.select(callpaths="main->work").series} == {"main->work"}


def test_predict_with_a_mapping_on_a_fit_without_parameters():
    """LOW-4: `predict({})` raised "... one list each); got " where `predict([[]])` gave the mean."""
    est = PMNFModeler().fit(Dataset((), [Series("a", "time", [[], [], []], [[1.0], [2.0], [3.0]])]))
    assert est.predict({}).tolist() == est.predict([[]]).tolist() == [[2.0]]
    assert est.models_[0].predict({}).tolist() == [2.0]
