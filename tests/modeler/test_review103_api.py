"""Review 103: the modeler's Python API held to the estimator contract and to the command's output."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from modeler import cli
from modeler.commands.fit import fit_dataset
from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.estimator import PMNFModeler
from modeler.readers import ReadOptions, load
from modeler_synthetic_runs import write_rank_file

RANKS = (1, 2, 4, 8, 16)


def _runs(root: Path) -> Path:
    for ranks in RANKS:
        for rep, noise in enumerate((0.99, 1.01)):
            run = f"r{ranks}-{rep}"
            t = int(0.5 * (1 + 0.5 * math.log2(ranks)) * noise * 1e9)
            for rank in range(ranks):
                write_rank_file(root / run, run_id=run, rank=rank, world_size=ranks, repetition=rep,
                                params={"ranks": ranks}, profile={(0,): (1, t, t)})
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return _runs(tmp_path_factory.mktemp("runs103"))


def _cli(capsys, *argv: str) -> dict:
    assert cli.main(["fit", *argv, "--format", "json"]) == cli.EXIT_OK
    return json.loads(capsys.readouterr().out)


def _api_rows(ranking) -> dict:
    return {(r.fitted.callpath, r.fitted.metric): r for r in ranking.rows}


@pytest.mark.parametrize("ranks", ["sum", "min"])
def test_the_api_gives_no_figure_from_time_where_the_command_gives_none(runs, capsys, ranks):
    """MED-1: under `--ranks sum` the time is rank-seconds; the API took it for a per-rank time (a
    speedup of 0.0054 beside a model of 0.37, and false "far from" warnings)."""
    doc = _cli(capsys, str(runs), "--ranks", ranks, "--metric", "time,speedup", "--min-share", "0", "--at", "ranks=64")
    cli_from = {(m["callpath"], m["metric"]): m["prediction_from_time"] for m in doc["models"]}
    dataset = load([str(runs)], ReadOptions(ranks=ranks))
    assert dataset.across_ranks == ranks and dataset.time_per_rank is False
    ranking = fit_dataset(dataset, metrics=["time", "speedup"], min_share=0, at="ranks=64")
    api = _api_rows(ranking)
    assert set(api) == set(cli_from)
    for key, row in api.items():
        assert cli_from[key] is None and row.from_time is None, key
    assert not [w for w in ranking.warnings if "far from what the call path's per-rank time gives" in w]


def test_an_extrap_input_gives_the_api_the_command_s_figures(tmp_path, capsys):
    """MED-1: an Extra-P file's `time` may be a sum over ranks: no figure from it, in both."""
    path = tmp_path / "xp.jsonl"
    with path.open("w") as f:
        for r in RANKS:
            t = 4.0 * (2 + 0.5 * math.log2(r)) * r
            for rep in range(2):
                for metric, v in (("time", t), ("speedup", 8.0 / (t / r))):
                    f.write(json.dumps({"params": {"ranks": r}, "callpath": "main", "metric": metric,
                                        "value": v * (1 + 0.01 * rep)}) + "\n")
    doc = _cli(capsys, str(path), "--metric", "time,speedup", "--at", "ranks=64")
    dataset = load([str(path)])
    assert dataset.time_per_rank is False
    ranking = fit_dataset(dataset, metrics=["time", "speedup"], at="ranks=64")
    for m in doc["models"]:
        row = _api_rows(ranking)[(m["callpath"], m["metric"])]
        assert row.prediction == pytest.approx(m["prediction"])
        assert m["prediction_from_time"] is None and row.from_time is None
    assert not [w for w in ranking.warnings if "far from" in w]


def test_runs_under_mean_still_give_the_figure_from_time_in_both(runs, capsys):
    doc = _cli(capsys, str(runs), "--metric", "speedup", "--min-share", "0", "--at", "ranks=64")
    dataset = load([str(runs)])
    assert dataset.time_per_rank is True and dataset.across_ranks == "mean"
    (row,) = fit_dataset(dataset, metrics=["speedup"], min_share=0, at="ranks=64").rows
    (m,) = doc["models"]
    assert m["prediction_from_time"] is not None
    assert row.from_time[0] == pytest.approx(m["prediction_from_time"])


def test_a_selection_keeps_how_the_runs_were_read(runs):
    dataset = load([str(runs)], ReadOptions(ranks="sum"))
    part = dataset.select(metrics=["time"])
    assert (part.across_ranks, part.time_per_rank) == ("sum", False)


def _dataset(values=(1, 2, 4, 8, 16), params=("p",), scale=1.0) -> Dataset:
    pts = [[v * scale] for v in values]
    return Dataset(params, [Series("a", "time", pts, [[1.0 + v, 1.01 + v] for v in values])])


def test_the_estimator_refuses_parameter_values_too_large_to_model():
    """MED-2: values of 1e200 ended in numpy's "SVD did not converge"."""
    with pytest.raises(InputError, match=r"parameter p: values up to 1\.6e\+201 are too large"):
        PMNFModeler().fit(_dataset(scale=1e200))


@pytest.fixture(scope="module")
def fitted():
    values = (1, 2, 4, 8, 16)
    pts = [[p, n] for p in values for n in values]
    reps = [[1 + 0.5 * math.log2(p) + 0.01 * n] * 2 for p, n in pts]
    est = PMNFModeler().fit(Dataset(("p", "n"), [Series("b", "time", pts, reps)]))
    return est, est.models_[0]


def test_the_per_model_predict_checks_points_as_the_estimator_does(fitted):
    """MED-3: a third coordinate was dropped, a negative value gave NaN, a mapping of scalars raised
    TypeError, a missing key KeyError, an unknown key was taken."""
    est, m = fitted
    assert m.model.growth() != (0.0, 0.0) and any(f.log_exponent for t in m.model.terms for f in t.factors)
    for bad, said in (([[4, 20, 999]], "3 coordinates"), ([[-4, 20]], "p=-4 at point 0"),
                      ({"p": [4]}, "no values for parameter"), ({"p": [4], "n": [20], "zz": [1]}, "unknown parameter"),
                      ([[0, 20]], r"log2\(p\) is not defined at 0"), ([[1e300, 20]], "too large")):
        for call in (m.predict, m.prediction_range, m.pass_predictions, est.predict):
            with pytest.raises(InputError, match=said):
                call(bad)
    one = m.predict({"p": 4, "n": 20})
    assert one.shape == (1,) and one[0] == pytest.approx(est.predict({"p": 4, "n": 20})[0, 0])
    lo, hi = m.prediction_range({"p": 1024, "n": 256})
    assert lo[0] <= m.predict([[1024, 256]])[0] <= hi[0]


def test_a_dataset_refuses_a_parameter_named_twice_or_not_at_all():
    """LOW-2: `p` twice predicted 100 where 2 was measured; "" printed `1 * ^(1)`."""
    with pytest.raises(InputError, match="parameter 'p' given twice"):
        Dataset(("p", "p"), [Series("a", "time", [[v, 100 - v] for v in (1, 2, 4)], [[1.0]] * 3)])
    with pytest.raises(InputError, match="a parameter needs a name"):
        Dataset(("",), [])


def test_a_dataset_without_parameters_gets_a_constant_with_a_note():
    """LOW-1: three rows of no coordinates reached the least squares (AttributeError)."""
    ds = Dataset((), [Series("a", "time", np.zeros((3, 0)), [[1.0], [2.0], [3.0]])])
    (m,) = PMNFModeler().fit(ds).models_
    assert not m.model.terms and m.model.constant == pytest.approx(2.0)
    assert any("no parameter" in w for w in m.warnings)


def test_repr_and_validation_of_array_options_never_raise_other_errors():
    """LOW-4: repr raised numpy's ambiguity error; an array `aggregate` gave TypeError at fit."""
    assert "candidates=array" in repr(PMNFModeler(candidates=np.arange(3)))
    assert repr(PMNFModeler(aggregate="mean")) == "PMNFModeler(aggregate='mean')"
    for options, name in (({"aggregate": np.array(["mean"])}, "aggregate"), ({"aggregate": np.array(["a", "b"])}, "aggregate"),
                          ({"compat": np.array(["extrap"])}, "compat"), ({"on_too_few": ["warn"]}, "on_too_few")):
        with pytest.raises(InputError, match=name):
            PMNFModeler(**options).fit(_dataset())


@pytest.mark.parametrize("kwargs, said", [
    ({"min_points": "3"}, "min_points must be a whole number"),
    ({"min_points": 2.5}, "min_points must be a whole number"),
    ({"combine": "bogus"}, "combine must be None or one of"),
    ({"repetitions": "avg"}, "repetitions must be None or one of"),
    ({"pass_refits": "no"}, "pass_refits must be True or False"),
    ({"at": {"p": "x"}}, "at: the value of 'p' is not a number"),
    ({"at": 64}, "at must be text"),
])
def test_fit_dataset_names_its_own_bad_arguments(kwargs, said):
    """LOW-5: some raised AttributeError or TypeError, some were taken, some named the estimator's options."""
    with pytest.raises(InputError, match=said):
        fit_dataset(_dataset(), **kwargs)
    with pytest.raises(InputError, match="fit_dataset expects a modeler.dataset.Dataset, got NoneType"):
        fit_dataset(None)


def test_fit_dataset_takes_the_target_as_a_mapping():
    ds = _dataset()
    by_text = fit_dataset(ds, at="p=64", min_share=0)
    by_map = fit_dataset(ds, at={"p": 64}, min_share=0)
    assert [r.prediction for r in by_map.rows] == [r.prediction for r in by_text.rows]
    assert by_map.at == by_text.at == {"p": 64.0}


def test_a_fitted_model_still_pickles_and_predicts(fitted):
    est, m = fitted
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.predict([[32, 32]]), est.predict([[32, 32]]))
