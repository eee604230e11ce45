"""Review 61 (the engine on the designs users make): repetitions that agree exactly but for one wild
one (F2), and parameters that no line of 3 points varies alone (F1)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series, robust_table, robust_values
from modeler.estimator import PMNFModeler

P, N = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)


def _truth(p, n):
    return 1 + 0.8 * np.log2(p) + 0.05 * n


@pytest.mark.parametrize("reps", [3, 5])
def test_one_wild_repetition_among_repetitions_that_agree_exactly_is_left_out(reps):
    # a count, or a time on a coarse clock: the only nonzero deviation set its own scale and stayed
    # (+620% at 4x with 5 repetitions, +19029% with 3)
    pts, values = [], []
    for p, n in itertools.product(P, N):
        v = [_truth(p, n)] * reps
        if (p, n) == (32, 50):
            v[0] *= 10
        pts.append((p, n))
        values.append(np.array(v))
    s = Series("main", "time", np.array(pts, dtype=float), values)
    m = PMNFModeler().fit(Dataset(("p", "n"), [s]))
    assert m.predict(np.array([[128.0, 200.0]]))[0, 0] == pytest.approx(_truth(128, 200), rel=1e-6)
    assert robust_values(values)[-1] == pytest.approx(_truth(32, 50))


def test_the_scale_counts_exact_agreement_but_not_each_points_own_median():
    R = np.array([[[1.0, 1.0, 1.0, 1.0, 10.0], [2.0, 2.0, 2.0, 2.0, 2.0]]])
    assert robust_table(R)[0].tolist() == pytest.approx([1.0, 2.0])
    # continuous noise: each point's median is its only zero, the rest sets the scale; nothing is left out
    rng = np.random.default_rng(3)
    noisy = 1 + rng.uniform(-0.05, 0.05, size=(4, 25, 5))
    assert robust_table(noisy) == pytest.approx(noisy.mean(axis=2))
    # a point whose median is 0 says nothing on a relative scale, and keeps its values
    zeros = np.array([[[0.0, 0.0, 0.0, 0.0, 1.0], [1.0, 1.01, 0.99, 1.02, 5.0]]])
    assert robust_table(zeros)[0].tolist() == pytest.approx([0.2, 1.005])
    # uneven repetitions, the same rules
    assert robust_values([np.array([1.0, 1.0, 1.0, 1.0, 10.0]), np.array([2.0, 2.0, 2.0])]).tolist() == \
        pytest.approx([1.0, 2.0])
    # two repetitions cannot say which one is wrong: both kept
    assert robust_table(np.array([[[1.0, 10.0], [2.0, 2.0]]]))[0].tolist() == pytest.approx([5.5, 2.0])


def _lhs(seed: int = 200):
    """A Latin-hypercube-like design of 10 points: every value of p and of n once, no line at all."""
    r = np.random.default_rng(seed)
    p = np.round(2 ** (1 + 4 * (r.permutation(10) + r.uniform(0, 1, 10)) / 10))
    n = np.round(10 + 40 * (r.permutation(10) + r.uniform(0, 1, 10)) / 10)
    return np.column_stack([p, n])


def test_a_scattered_design_gets_terms_in_every_parameter_and_a_warning(tmp_path, capsys):
    # exact data came back as the constant 4.178, 3.9x low at the target, and nothing was said
    pts = _lhs()
    path = tmp_path / "lhs.jsonl"
    path.write_text("".join(json.dumps({"params": {"p": int(p), "n": int(n)}, "callpath": "main", "metric": "time",
                                        "value": [float(_truth(p, n))] * 5}) + "\n" for p, n in pts))
    assert cli.main(["fit", str(path), "--at", "p=112,n=200", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    (model,) = json.loads(out)["models"]
    assert {f["parameter"] for t in model["terms"] for f in t["factors"]} == {"p", "n"}
    assert model["prediction"] == pytest.approx(_truth(112, 200), rel=0.25)
    assert "no line of 3 or more points varies p, n alone" in err, err


def test_designs_with_lines_are_not_said_to_be_scattered():
    from modeler.grid import scattered_warning

    grid = np.array(list(itertools.product(P, N)), dtype=float)
    cross = np.array([(p, 30) for p in P] + [(8, n) for n in N], dtype=float)
    assert scattered_warning(("p", "n"), [grid]) is None
    assert scattered_warning(("p", "n"), [cross]) is None
    assert scattered_warning(("p", "n"), [np.array([(p, p) for p in P], dtype=float)]) is None  # they move together
    assert "varies p, n alone" in scattered_warning(("p", "n"), [_lhs()])
