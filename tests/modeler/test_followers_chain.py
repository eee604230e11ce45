"""Three parameters that move together with the rank count (review 112 LOW-2): with `a` = 4 x `p`,
`b` = 32 x `p` and `p` the rank count last, `followers` gave {b: a, a: p}, a chain; the engine held
`a` and `b` and fitted `p`, as it should, but the warning said the models follow `a` and `p`. Each
now maps to the one it ends at, the rank count, whatever it is named and wherever it stands."""

from __future__ import annotations

import json

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.grid import followers, moving_together_warning, scattered_warning

R = (1, 2, 4, 8, 16)


def _points(names: tuple[str, ...], ranks: str) -> np.ndarray:
    """`a` = 4 x the rank count, `b` = 32 x it, in the columns of `names`."""
    of = {"a": lambda r: 4 * r, "b": lambda r: 32 * r, ranks: lambda r: r}
    return np.array([[of[n](r) for n in names] for r in R], dtype=float)


CASES = [  # names, ranks parameter, the mapping, the warning's pairs
    (("a", "b", "p"), "p", {0: 2, 1: 2}, "a with p, b with p"),  # was {1: 0, 0: 2}: b with a
    (("a", "b", "ranks"), "ranks", {0: 2, 1: 2}, "a with ranks, b with ranks"),  # was the same chain
    (("p", "a", "b"), "p", {1: 0, 2: 0}, "a with p, b with p"),
    (("ranks", "a", "b"), "ranks", {1: 0, 2: 0}, "a with ranks, b with ranks"),
    (("a", "p", "b"), "p", {0: 1, 2: 1}, "a with p, b with p"),
]


@pytest.mark.parametrize("names, ranks, expected, pairs", CASES)
def test_each_follows_the_rank_count_and_the_warning_says_so(names, ranks, expected, pairs):
    pts = _points(names, ranks)
    assert followers(pts, names, ranks) == expected
    said = moving_together_warning(names, [pts], None, ranks)
    assert f"parameters move together: {pairs}:" in said, said
    assert f"the models follow {ranks} alone" in said, said


def test_without_a_rank_count_the_earlier_is_followed_as_before():
    pts = _points(("a", "b", "p"), "p")
    assert followers(pts, ("a", "b", "p")) == {1: 0, 2: 0}
    assert "the models follow a alone" in moving_together_warning(("a", "b", "p"), [pts])


def test_the_others_are_held_as_before_so_no_scattered_warning():
    pts = _points(("a", "b", "p"), "p")
    assert scattered_warning(("a", "b", "p"), [pts], "p") is None


@pytest.mark.parametrize("names, ranks", [(("a", "b", "p"), "p"), (("a", "b", "ranks"), "ranks"),
                                          (("p", "a", "b"), "p")])
def test_the_model_follows_the_rank_count_alone(names, ranks):
    pts = _points(names, ranks)
    col = names.index(ranks)
    s = Series("main", "time", pts, [np.array([2.0 + 0.5 * r, 2.0 + 0.5 * r]) for r in pts[:, col]])
    (fm,) = PMNFModeler().fit(Dataset(names, [s], ranks_parameter=ranks)).models_
    assert {f.parameter for t in fm.model.terms for f in t.factors} == {ranks}, fm.model
    at = _points(names, ranks)[-1:] * 4  # 64 ranks, a and b moving with them
    assert fm.model.evaluate(at)[0] == pytest.approx(2.0 + 0.5 * 64, rel=1e-6)


def test_fit_under_ranks_parameter_warns_that_the_models_follow_it(tmp_path, capsys):
    rows = [{"params": {"a": 4 * r, "b": 32 * r, "p": r}, "callpath": "main", "metric": "time",
             "value": [2 + 0.5 * r, 2.01 + 0.5 * r]} for r in R]
    path = tmp_path / "chain.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert cli.main(["fit", str(path), "--ranks-parameter", "p", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    (model,) = json.loads(out)["models"]
    assert {f["parameter"] for t in model["terms"] for f in t["factors"]} == {"p"}
    assert "parameters move together: a with p, b with p:" in err and "the models follow p alone" in err, err
