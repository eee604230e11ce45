"""Parameters that move together at every point measured (review 59 F8): p = n, or a global batch
swept as 32 x ranks. Their effects cannot be told apart: a warning says so, and the engine fits the
one they follow alone (it gave a constant, SMAPE 93%, since no line of points varies either alone)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.grid import followers, moving_together_warning

P = [1, 2, 4, 8, 16]


@pytest.mark.parametrize("points, names, expected", [
    ([[p, p] for p in P], ("p", "n"), {1: 0}),
    ([[p, 3 * p + 1] for p in P], ("p", "n"), {1: 0}),
    ([[32 * r, r] for r in P], ("batch", "ranks"), {0: 1}),  # ranks is the one followed
    ([[p, p, p] for p in P], ("a", "b", "c"), {1: 0, 2: 0}),
    ([[p, n] for p in P for n in P], ("p", "n"), {}),  # a grid
    ([[p, 4] for p in P], ("p", "n"), {}),  # one value of n: held, not moving
    ([[1, 1], [2, 2], [2, 4]], ("p", "n"), {}),  # p=2 comes with two values of n
    ([[p, 8 // p if p <= 8 else 1] for p in P], ("p", "n"), {}),  # n=1 twice
])
def test_followers_are_the_parameters_whose_values_go_one_to_one_with_anothers(points, names, expected):
    assert followers(np.array(points, dtype=float), names) == expected


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_one_to_one_parameters_are_modeled_as_the_one_they_follow(tmp_path, capsys):
    rows = [{"params": {"p": p, "n": p}, "callpath": "main", "metric": "time", "value": [p, p * 1.01]} for p in P]
    path = _jsonl(tmp_path / "diag.jsonl", rows)
    assert cli.main(["fit", str(path), "--at", "p=64,n=64", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    (model,) = json.loads(out)["models"]
    assert [f["parameter"] for t in model["terms"] for f in t["factors"]] == ["p"]
    assert model["prediction"] == pytest.approx(64 * 1.005, rel=1e-6)
    assert "parameters move together: n with p" in err and "the models follow p alone" in err, err


def test_a_global_batch_swept_with_the_ranks_leaves_the_model_to_ranks_and_the_other_parameters(tmp_path, capsys):
    rows = [{"params": {"batch": 32 * r, "ranks": r, "hidden": h}, "callpath": "main", "metric": "time",
             "value": [2 + 0.5 * r ** 0.5 + 0.01 * h, 2.02 + 0.5 * r ** 0.5 + 0.01 * h]}
            for r in P for h in (16, 32, 64, 128, 256)]
    path = _jsonl(tmp_path / "weak.jsonl", rows)
    assert cli.main(["fit", str(path), "--at", "ranks=64,batch=2048,hidden=256", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    (model,) = json.loads(out)["models"]
    used = {f["parameter"] for t in model["terms"] for f in t["factors"]}
    assert used == {"ranks", "hidden"}
    assert model["prediction"] == pytest.approx(2.01 + 0.5 * 8 + 0.01 * 256, rel=1e-3)  # was 5.6, -35%
    assert "batch with ranks" in err


def test_a_grid_is_fitted_and_said_as_before(tmp_path, capsys):
    rows = [{"params": {"p": p, "n": n}, "callpath": "main", "metric": "time", "value": [p + n, p + n]}
            for p in P for n in P]
    path = _jsonl(tmp_path / "grid.jsonl", rows)
    assert cli.main(["fit", str(path), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "move together" not in err
    (model,) = json.loads(out)["models"]
    assert {f["parameter"] for t in model["terms"] for f in t["factors"]} == {"p", "n"}


def test_extrap_compat_keeps_its_own_rules_and_the_warning_says_no_more_than_is_true():
    pts = [np.array([[p, p] for p in P], dtype=float)]
    assert "the models follow" in moving_together_warning(("p", "n"), pts)
    compat = moving_together_warning(("p", "n"), pts, "extrap")
    assert "cannot be told apart" in compat and "the models follow" not in compat
    assert moving_together_warning(("p",), [np.array([[1.0], [2.0]])]) is None


def test_the_estimator_predicts_new_points_from_the_parameter_followed():
    pts = np.array([[p, p] for p in P], dtype=float)
    s = Series("main", "time", pts, [np.array([3.0 * p, 3.0 * p]) for p in P])
    m = PMNFModeler().fit(Dataset(("p", "n"), [s]))
    assert m.predict(np.array([[32.0, 32.0]]))[0] == pytest.approx([96.0], rel=1e-6)
    # Extra-P's rules are Extra-P's: no line varies p alone, and it gives no model in p
    extrap = PMNFModeler(compat="extrap").fit(Dataset(("p", "n"), [s]))
    assert "p" not in str(extrap.models_[0].model)
