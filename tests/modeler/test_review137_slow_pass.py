"""Review 137: research 135's pass-corrected noise (modeler/pass_noise.py), the cases it broke."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pass_noise import shape_spread

XS = 2.0 ** np.arange(1, 6)


def _series(law, runs: int, slow_at: int, factor: float, n: int = 20, seed: int = 0) -> list[Series]:
    """`n` series of `law` over XS, `runs` labelled passes, the last `factor` times slow at the
    `slow_at` largest points, 1% noise."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        reps = []
        for j, x in enumerate(XS):
            f = np.ones(runs)
            f[-1] = factor if j >= len(XS) - slow_at else 1.0
            reps.append(law(x) * f * rng.uniform(0.99, 1.01, runs))
        out.append(Series(f"c{i}", "time", XS[:, None], tuple(reps), passes=tuple(np.arange(runs) for _ in XS)))
    return out


def _models(series, aggregate):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return PMNFModeler(aggregate=aggregate).fit(Dataset(("x",), tuple(series))).models_


@pytest.mark.parametrize("aggregate", ["min", "max"])
def test_the_extremes_judge_forms_as_before_a_slow_pass(aggregate):
    # HIGH-1: the pass-corrected noise was used under min and max too, with the full spread: 30 + 2 x
    # with one pass 4x slow at every point came out a constant under --repetitions min
    models = _models(_series(lambda x: 30 + 2 * x, 3, 5, 4.0, n=5), aggregate)
    level = 1.0 if aggregate == "min" else 4.0  # the fastest run, or the slow pass's
    assert all(m.model.terms for m in models), [str(m.model) for m in models]
    at = np.array([m.predict(np.array([[128.0]]))[0] for m in models]) / (level * (30 + 2 * 128))
    assert np.all(np.abs(at - 1) < 0.15), at


@pytest.mark.parametrize("slow_at, factor", [(3, 4.0), (4, 2.0)])
def test_a_pass_slow_at_most_points_but_not_all_leaves_constants_constant(slow_at, factor):
    # HIGH-2: its median effect over the points passed the gate, and under --repetitions mean 18-20
    # of 20 constants took a log2(x) or x^(1/4) term
    models = _models(_series(lambda x: 30.0 + 0 * x, 3, slow_at, factor), "mean")
    assert sum(bool(m.model.terms) for m in models) <= 1


def test_a_pass_slow_at_every_point_still_leaves_the_rise():
    models = _models(_series(lambda x: 5 + 2 * x, 3, 5, 4.0), "median")
    assert all(m.model.shape() == frozenset({(("x", 1.0, 0),)}) for m in models)


def test_two_runs_a_point_keep_the_plain_spread():
    # MED-3: with 2 runs the gate passed by chance for about 9% of series of independent noise
    rng = np.random.default_rng(3)
    fired = 0
    for _ in range(200):
        reps = tuple(30.0 * rng.uniform(0.95, 1.05, 2) for _ in XS)
        s = Series("c", "time", XS[:, None], reps, passes=tuple(np.arange(2) for _ in XS))
        fired += shape_spread(s, "mean") is not None
    assert fired == 0
    slow = Series("c", "time", XS[:, None], tuple(2 * x * np.array([1.0, 4.0]) for x in XS),
                  passes=tuple(np.arange(2) for _ in XS))
    assert shape_spread(slow, "mean") is None


@pytest.mark.parametrize("points, runs", [(5, 3), (7, 5)])
def test_the_correction_table_is_what_its_calibration_gives(points, runs):
    # pass_noise.CORRECTION is the table of `_calibrate` (simulated): the two agree
    from modeler.pass_noise import CORRECTION, _calibrate

    assert _calibrate(points, runs, draws=40000, seed=1) == pytest.approx(CORRECTION[points][runs - 2], rel=0.02)
