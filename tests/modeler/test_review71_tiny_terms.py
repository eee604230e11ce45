"""Review 71 F1: a region whose time is exactly 1e-3 * work / ranks, measured 0.15-1.5% high (a
systematic deviation that grows with ranks, as sleep wake-up jitter under contention does) and with
repetitions that agree to 0.05%, got an extra term of about 1% (`ranks^(3/2) * work`), was ranked
the worst-scaling region (deg 2.5) and was predicted 2.8x too slow at 64 ranks. A measured series
keeps no hypothesis with a term below `selection.TERM_SHARE` of the value at every point; values
whose repetitions agree exactly (counts, the noise-free benchmark) keep every term they show."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.growth import growth
from modeler.ranking import rank_models

RANKS, WORK = (1, 2, 4, 8), (1000, 2000, 4000)


def _deviation(r: float) -> float:
    """+0.15% at 1 rank to +1.45% at 8: systematic, the same in every repetition."""
    return 0.0015 + 0.013 * ((r - 1) / 7) ** 2


def _strong(seed: int, reps: int = 5, jitter: float = 0.0005, deviation=_deviation) -> Series:
    rng = np.random.default_rng(seed)
    pts, values = [], []
    for r, w in itertools.product(RANKS, WORK):
        pts.append((r, w))
        values.append(1e-3 * w / r * (1 + deviation(r) + rng.normal(0, jitter, reps)))
    return Series("main->compute_share", "time", np.array(pts, dtype=float), values)


def _fit(series: list[Series]) -> PMNFModeler:
    return PMNFModeler().fit(Dataset(("ranks", "work"), series))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_one_percent_systematic_deviation_gets_no_term(seed):
    m = _fit([_strong(seed)])
    model = m.models_[0].model
    # no term rises with ranks: the region falls as 1/ranks, as measured
    for t in model.terms:
        assert all(f.exponent <= 0 for f in t.factors if f.parameter == "ranks"), str(model)
    assert growth(model)[0] <= 0.0
    ideal = 1e-3 * 4000 / 64
    assert m.predict(np.array([[64.0, 4000.0]]))[0, 0] == pytest.approx(ideal, rel=0.03)


def test_the_perfectly_scaling_region_is_not_ranked_first():
    # beside it, a region that truly grows with ranks (an exchange: 0.02 * ranks)
    rng = np.random.default_rng(5)
    pts, values = [], []
    for r, w in itertools.product(RANKS, WORK):
        pts.append((r, w))
        values.append(0.02 * r * (1 + rng.normal(0, 0.01, 5)))
    exchange = Series("main->exchange", "time", np.array(pts, dtype=float), values)
    m = _fit([_strong(0), exchange])
    ranking = rank_models(m.models_, ("ranks", "work"), {"ranks": 64, "work": 4000})
    assert ranking.rows[0].fitted.callpath == "main->exchange"
    share = next(r for r in ranking.rows if r.fitted.callpath == "main->compute_share")
    assert share.growth[0] <= 0.0


def test_exact_values_keep_a_small_term():
    # repetitions that agree exactly (a count): a 1% term is not noise, and stays
    pts, values = [], []
    for r, w in itertools.product(RANKS, WORK):
        pts.append((r, w))
        values.append(np.full(3, float(1000 * w + 100 * r * r)))
    m = _fit([Series("main->bytes", "bytes", np.array(pts, dtype=float), values)])
    at = np.array([[64.0, 4000.0]])
    assert m.predict(at)[0, 0] == pytest.approx(1000 * 4000 + 100 * 64 * 64, rel=1e-6)


def test_a_term_with_a_visible_share_stays():
    # the same region with a real rise: +12% at 8 ranks is far beyond a measurement's accuracy
    m = _fit([_strong(3, deviation=lambda r: 0.015 * r)])
    model = m.models_[0].model
    def in_ranks(t):
        return sum(f.exponent for f in t.factors if f.parameter == "ranks")

    assert any(in_ranks(t) > -1 for t in model.terms), str(model)
    truth = 1e-3 * 4000 / 64 + 1.5e-5 * 4000
    assert m.predict(np.array([[64.0, 4000.0]]))[0, 0] == pytest.approx(truth, rel=0.05)


def test_tiny_terms_masks_padding_and_zero_values():
    from modeler.pmnf.selection import TERM_SHARE, tiny_terms

    cols = np.array([[[[1.0, 2.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]]])  # (1, M=2, J=2, n=2)
    coef = np.array([[[0.1, 0.0], [0.1, 0.001]]])
    y = np.array([[10.0, 10.0]])
    # hypothesis 0 has one term (2% at the second point), its second column is padding;
    # hypothesis 1's second term is 0.01% everywhere
    assert tiny_terms(cols, coef, y, np.array([1, 2]), TERM_SHARE).tolist() == [[False, True]]
    # a nonzero term at a zero value is not small there
    assert tiny_terms(cols, coef, np.array([[0.0, 10.0]]), np.array([1, 2]), TERM_SHARE).tolist() == [[False, False]]
