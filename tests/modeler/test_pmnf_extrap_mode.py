"""The Extra-P-compatible engine against a plain, one-hypothesis-at-a-time transcription of
Extra-P 4.2.5's single-parameter modeler (extrap/modelers/single_parameter/basic.py and
abstract_base.py), on random data: same chosen hypothesis, same coefficients."""

from fractions import Fraction

import numpy as np
import pytest

from modeler.pmnf import extrap_mode
from modeler.pmnf.hypotheses import EXPONENTS, allowed
from modeler.pmnf.quality import quality
from modeler.pmnf.single import extrap_single


def _reference_single(x, y, costs=False):
    """Extra-P's loop, written the way Extra-P runs it (one hypothesis, one fold at a time); with
    `costs`, also the (SMAPE, RSS) it reports for the chosen model: leave-one-out for a term,
    in-sample for the constant."""
    n = len(x)
    mean = y.mean()
    const_rss = float(((y - mean) ** 2).sum())
    const_smape = sum(abs(mean - a) / (abs(a) + abs(mean)) * 2 for a in y if abs(a) + abs(mean) != 0) / n * 100
    if const_rss == 0:
        return (-1, (mean, 0.0), (const_smape, const_rss)) if costs else (-1, (mean, 0.0))
    best, best_smape, best_coef, best_rss = -1, const_smape, (mean, 0.0), const_rss
    for h in allowed(x):
        e, j = EXPONENTS[h]
        t = x ** float(e) * np.log2(x) ** j
        smape, rss = 0.0, 0.0
        for i in range(n):
            keep = np.arange(n) != i
            A = np.stack([np.ones(n - 1), t[keep]], axis=1)
            c0, c1 = np.linalg.lstsq(A, y[keep], rcond=None)[0]
            m = y[keep].min()
            if (abs(c0 - m) < 0.0005) if m == 0 else (abs(c0 / m) < 0.0005):
                c0 = 0.0
            pred = c0 + c1 * t[i]
            d = pred - y[i]
            rss += d * d
            if abs(y[i]) + abs(pred) != 0:
                smape += abs(d) / (abs(y[i]) + abs(pred)) * 2 / n * 100
        c0, c1 = np.linalg.lstsq(np.stack([np.ones(n), t], axis=1), y, rcond=None)[0]
        if not np.isfinite(rss):
            continue
        if c1 == 0 or np.max(np.abs(c1 * t / y)) < 0.0005:
            continue
        if smape < best_smape:
            best, best_smape, best_coef, best_rss = int(h), smape, (c0, c1), rss
    return (best, best_coef, (best_smape, best_rss)) if costs else (best, best_coef)


@pytest.mark.parametrize("seed", range(6))
def test_single_parameter_matches_extraps_loop(seed):
    rng = np.random.default_rng(seed)
    x = np.array([2.0, 4.0, 8.0, 16.0, 32.0]) if seed % 2 else np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    Y = []
    for s in range(12):
        e, j = EXPONENTS[int(rng.integers(42))]
        truth = rng.uniform(1, 50) + rng.uniform(0.1, 5) * x ** float(e) * np.log2(x) ** j
        kind = s % 4
        if kind == 0:
            Y.append(truth)  # exact
        elif kind == 1:
            Y.append(truth * (1 + rng.uniform(-0.05, 0.05, x.size)))
        elif kind == 2:
            Y.append(np.full(x.size, 3.0) * (1 + rng.uniform(-0.01, 0.01, x.size)))  # constant-ish
        else:
            Y.append(rng.uniform(1, 100, x.size))  # no structure
    Y = np.array(Y)
    fit = extrap_single(x, Y)
    for s in range(len(Y)):
        h, coef = _reference_single(x, Y[s])
        assert fit.hypothesis[s] == h, f"series {s}"
        np.testing.assert_allclose(fit.coef[s], coef, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_compat_reports_extraps_costs_for_one_parameter(seed):
    # Extra-P prints the leave-one-out RSS and SMAPE of a chosen term (and the in-sample ones of a
    # constant); its adjusted R^2 comes from that RSS
    rng = np.random.default_rng(100 + seed)
    x = np.array([20.0, 30.0, 40.0, 50.0, 60.0])
    Y = np.array([(5 + 0.2 * x**2) * (1 + rng.uniform(-0.03, 0.03, 5)) for _ in range(4)] + [np.full(5, 9.0) * (1 + rng.uniform(-1e-3, 1e-3, 5))])
    q = quality(extrap_mode.fit_group(x[:, None], Y, list(range(len(Y)))))
    for s in range(len(Y)):
        h, _, (smape, rss) = _reference_single(x, Y[s], costs=True)
        assert q.smape[s] == pytest.approx(smape, rel=1e-9) and q.rss[s] == pytest.approx(rss, rel=1e-9), f"series {s}"
        if h >= 0:
            tss = ((Y[s] - Y[s].mean()) ** 2).sum()
            assert q.ar2[s] == pytest.approx(1 - rss / tss * 4 / 3, rel=1e-9)
    assert (q.smape[:4] > quality_in_sample(x, Y[:4])).all()  # leave-one-out costs exceed the in-sample ones


def quality_in_sample(x, Y):
    g = extrap_mode.fit_group(x[:, None], Y, list(range(len(Y))))
    g.reported = None
    return quality(g).smape


def test_exactly_constant_series_is_constant():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    fit = extrap_single(x, np.full((1, 5), 7.0))
    assert fit.hypothesis[0] == -1 and fit.coef[0, 0] == 7.0


def test_multi_parameter_single_term_keeps_the_better_of_sp_and_refit():
    # y depends on x only; the other parameter is noise-free constant: one kept term
    pts = np.array([(x, y) for x in (2, 4, 8, 16, 32) for y in (1, 2, 3, 4, 5)], dtype=float)
    Y = (3 + 0.5 * pts[:, 0] ** 2)[None, :]
    g = extrap_mode.fit_group(pts, Y, [0])
    assert g.terms[0] == [((0, EXPONENTS.index((2, 0))),)]
    np.testing.assert_allclose(g.coef[0, :2], [3, 0.5], rtol=1e-9)


def test_multi_parameter_product_is_found():
    pts = np.array([(x, y) for x in (2, 4, 8, 16, 32) for y in (10, 20, 30, 40, 50)], dtype=float)
    Y = (1 + 0.25 * pts[:, 0] * np.log2(pts[:, 0]) * pts[:, 1] ** 0.5)[None, :]
    g = extrap_mode.fit_group(pts, Y, [0])
    (term,) = g.terms[0]
    assert sorted(term) == [(0, EXPONENTS.index((1, 1))), (1, EXPONENTS.index((Fraction(1, 2), 0)))]

