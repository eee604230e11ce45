"""A value near or at zero beside much larger ones (a ring allreduce on one rank, a log term at
x = 1) must not choose the form (review 111): the one-parameter leave-one-out score measures each
error against at least a tenth of the series' median |value| (`default_mode.loo_weights`), and a
series with an exact 0 keeps relative weights, floored the same way (`single.relative_weights`)."""

from __future__ import annotations

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf.default_mode import LOO_FLOOR, loo_weights
from modeler.pmnf.single import ZERO_FLOOR, relative_weights

RANKS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


def _ring_models(offset: float, ranks=RANKS, noise=0.05, draws=12, seed=0):
    rng = np.random.default_rng(seed)
    pts = np.array(ranks)[:, None]
    series = []
    for i in range(draws):
        t = (offset + 8.0 * (pts[:, 0] - 1.0) / pts[:, 0])[:, None] * (1.0 + noise * rng.standard_normal((len(ranks), 5)))
        series.append(Series(f"main->ring{i}", "time", pts, tuple(t)))
    return PMNFModeler().fit(Dataset(("ranks",), series)).models_


def _is_ring_form(fm) -> bool:
    """c + a * ranks^-1: the saturating ring's own form."""
    return [(f.exponent, f.log_exponent) for t in fm.model.terms for f in t.factors] == [(-1.0, 0)]


def test_a_near_zero_value_at_one_rank_does_not_pick_a_log_form():
    """Before: 17 of 40 draws at 5% noise became c/ranks + a * log2(ranks)^2 / ranks or the like
    (the left-out value at ranks=1, 0.05 beside 8 to 500 x ranks, 400-600% off for the right form)."""
    models = _ring_models(0.05)
    wrong = [str(fm.model) for fm in models if not _is_ring_form(fm)]
    assert not wrong
    for fm in models:
        assert fm.predict(np.array([[256.0]]))[0] == pytest.approx(0.05 + 8.0 * 255 / 256, rel=0.05)


def test_an_exact_zero_at_one_rank_keeps_relative_weights():
    """Before: a series with a 0 was fitted with uniform weights, its largest values ruling the
    choice (22 of 40 right at 5% noise)."""
    right = sum(_is_ring_form(fm) for seed in range(4) for fm in _ring_models(0.0, ranks=RANKS[:6], seed=seed))
    assert right >= 36  # of 48 (40 now; 23 before)


def test_loo_weights_floor_a_near_zero_value_only():
    Y = np.array([[0.05, 4.0, 6.0, 7.0, 7.5, 7.8, 7.9]])
    odd = np.ones_like(Y)
    w = loo_weights(Y, odd, LOO_FLOOR)
    typical = np.median(Y)
    assert w[0, 0] == pytest.approx(1.0 / (LOO_FLOOR * typical) ** 2)
    assert w[0, 1:] == pytest.approx(1.0 / Y[0, 1:] ** 2)
    # the outlier factors still apply
    odd[0, 3] = 0.5
    assert loo_weights(Y, odd, LOO_FLOOR)[0, 3] == pytest.approx(0.5 / Y[0, 3] ** 2)


def test_relative_weights_with_a_zero():
    Y = np.array([[0.0, 4.0, 6.0, 8.0], [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 2.0]])
    w = relative_weights(Y)
    assert w[0, 0] == pytest.approx(1.0 / (ZERO_FLOOR * 5.0) ** 2)  # median 5
    assert w[0, 1:] == pytest.approx(1.0 / Y[0, 1:] ** 2)
    assert w[1] == pytest.approx(1.0 / Y[1] ** 2)  # no zero: unchanged
    # median 0: the floor is a tenth of the mean
    assert w[2, :3] == pytest.approx(np.full(3, 1.0 / (ZERO_FLOOR * 0.5) ** 2))
    assert np.isfinite(relative_weights(np.zeros((1, 3)))).all()


@pytest.mark.parametrize("f", [lambda p: 3.0 * np.log2(p), lambda p: 2.0 * p * np.log2(p), lambda p: 8.0 * (p - 1) / p])
def test_exact_data_with_a_zero_stay_exact(f):
    pts = np.array(RANKS)[:, None]
    y = f(pts[:, 0])
    fm = PMNFModeler().fit(Dataset(("ranks",), [Series("main->f", "time", pts, tuple(y[:, None]))])).models_[0]
    assert fm.predict(np.array([[256.0]]))[0] == pytest.approx(float(f(np.array(256.0))), rel=1e-9)
