"""Both modes on random functions from the PMNF space (the benchmark's kind of data, smaller):
every form comes back without noise, and under noise the default mode extrapolates better than
the Extra-P-compatible one. Fixed seeds: the outcome is deterministic."""

import itertools

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf.hypotheses import EXPONENTS
from modeler.pmnf.structures import extrap_structures

VALUES = ((2.0, 4.0, 8.0, 16.0, 32.0), (5.0, 10.0, 15.0, 20.0, 25.0))


def random_functions(n, seed):
    """(evaluate(points) -> values, true shape) pairs: 1 or 2 parameters, any Extra-P structure."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        active = [[0], [1], [0, 1]][rng.integers(3)]
        st = extrap_structures(len(active))[rng.integers(len(extrap_structures(len(active))))]
        hyp = {p: EXPONENTS[rng.integers(42)] for p in active}
        c0 = 10 ** rng.uniform(0, 2)
        terms = []
        for term in st:
            params = [active[i] for i in term]
            top = np.prod([max(VALUES[p]) ** float(hyp[p][0]) * np.log2(max(VALUES[p])) ** hyp[p][1]
                           for p in params])
            terms.append((c0 * 10 ** rng.uniform(-0.3, 1.3) / top, params))

        def f(pts, terms=terms, c0=c0, hyp=hyp):
            y = np.full(len(pts), c0)
            for c, params in terms:
                y = y + c * np.prod([pts[:, p] ** float(hyp[p][0]) * np.log2(pts[:, p]) ** hyp[p][1] for p in params], axis=0)
            return y

        shape = sorted(tuple(sorted(("pn"[p], float(hyp[p][0]), hyp[p][1]) for p in params)) for _, params in terms)
        out.append((f, shape))
    return out


def fit_all(funcs, noise, seed, compat):
    rng = np.random.default_rng(seed)
    pts = np.array(list(itertools.product(*VALUES)))
    series = []
    for i, (f, _) in enumerate(funcs):
        y = f(pts)
        reps = y[:, None] * (1 + rng.uniform(-noise, noise, size=(len(y), 5)))
        series.append(Series(f"f{i}", "time", pts, tuple(reps)))
    est = PMNFModeler(compat=compat).fit(Dataset(("p", "n"), series))
    shapes = [
        sorted(tuple(sorted((x.parameter, x.exponent, x.log_exponent) for x in t.factors)) for t in m.model.terms)
        for m in est.models_
    ]
    at = np.array([[128.0, 100.0]])
    truth = np.array([f(at)[0] for f, _ in funcs])
    err = np.abs(est.predict(at)[:, 0] - truth) / truth
    return sum(s == t for s, (_, t) in zip(shapes, funcs)), err


@pytest.mark.parametrize("compat", [None, "extrap"])
def test_noise_free_every_form_is_recovered(compat):
    funcs = random_functions(40, seed=1)
    recovered, err = fit_all(funcs, 0.0, 0, compat)
    assert recovered == len(funcs)
    assert err.max() < 1e-6


def test_default_mode_beats_compat_under_noise():
    funcs = random_functions(80, seed=2)
    ours_rec, ours_err = fit_all(funcs, 0.05, 3, None)
    ex_rec, ex_err = fit_all(funcs, 0.05, 3, "extrap")
    assert ours_rec > ex_rec
    assert np.median(ours_err) < np.median(ex_err)
    assert np.percentile(ours_err, 90) < np.percentile(ex_err, 90)


def test_default_mode_halves_compats_extrapolation_error_at_10_percent_noise():
    # the choice aimed at extrapolation (modeler.pmnf.selection): on this fixed set of 80 functions
    # with 1 or 2 parameters, both the median and the 90th percentile of the error at (128, 100)
    # are at most half of the Extra-P-compatible mode's, with more forms recovered
    funcs = random_functions(80, seed=4)
    ours_rec, ours_err = fit_all(funcs, 0.10, 5, None)
    ex_rec, ex_err = fit_all(funcs, 0.10, 5, "extrap")
    assert ours_rec > ex_rec
    assert np.median(ours_err) <= 0.5 * np.median(ex_err)
    assert np.percentile(ours_err, 90) <= 0.5 * np.percentile(ex_err, 90)
