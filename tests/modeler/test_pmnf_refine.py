"""The exponent refinement of a chosen structure (modeler.pmnf.refine), alone and in the engine."""

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf import default_mode
from modeler.pmnf.hypotheses import EXPONENTS, N_HYPOTHESES, basis
from modeler.pmnf.lstsq import wls
from modeler.pmnf.refine import refine_exponents, structure_design

from _synthetic import make_case, target_point

GRID = np.array([(p, n, m) for p in (2, 4, 8, 16, 32) for n in (5, 10, 15, 20, 25) for m in (10, 20, 30, 40, 50)], float)
BASES = [basis(GRID[:, p]) for p in range(3)]
ALL = [np.arange(N_HYPOTHESES)] * 3


def hyp_of(exp, log):
    return next(i for i, (e, j) in enumerate(EXPONENTS) if float(e) == exp and j == log)


def series(structure, hyp, coef):
    X = structure_design(BASES, [structure], np.array([hyp]), 1 + len(structure))[0]
    return X @ np.asarray(coef, float)


def test_a_wrong_start_moves_to_the_exponents_that_fit_exactly():
    st = ((0,), (1, 2))  # c0 + c1 * p^a + c2 * n^b * m^c
    true = [hyp_of(1.5, 0), hyp_of(0.5, 1), hyp_of(2.0, 0)]
    y = series(st, true, [3.0, 0.02, 1e-4])
    start = np.array([[hyp_of(1.0, 0), hyp_of(1.0, 0), hyp_of(1.0, 0)]])
    out = refine_exponents(BASES, y[None], 1.0 / y[None] ** 2, [st], start, ALL)
    assert out[0].tolist() == true


def test_an_exact_fit_is_left_alone_and_unused_parameters_are_not_touched():
    st = ((0, 2),)  # n has no term: its entry must stay as given
    true = [hyp_of(2.0, 1), 7, hyp_of(0.25, 0)]
    y = series(st, true, [10.0, 0.5])
    out = refine_exponents(BASES, y[None], 1.0 / y[None] ** 2, [st], np.array([true]), ALL)
    assert out[0].tolist() == true
    # a constant series (no terms) is returned as given
    same = refine_exponents(BASES, y[None], 1.0 / y[None] ** 2, [()], np.array([[1, 2, 3]]), ALL)
    assert same[0].tolist() == [1, 2, 3]


def test_only_allowed_hypotheses_are_taken():
    st = ((0,),)
    y = series(st, [hyp_of(1.0, 1), 0, 0], [1.0, 2.0])  # p*log2(p): not allowed below
    no_log = [np.array([i for i, (_, j) in enumerate(EXPONENTS) if j == 0])] * 3
    out = refine_exponents(BASES, y[None], 1.0 / y[None] ** 2, [st], np.array([[hyp_of(1.0, 0), 0, 0]]), no_log)
    assert EXPONENTS[out[0, 0]][1] == 0


def _fit(noise, seed, refine_from, monkeypatch):
    monkeypatch.setattr(default_mode, "REFINE_FROM", refine_from)
    funcs, pts, values = make_case(seed, 3, 60, noise)
    names = funcs[0].model.parameters
    ds = Dataset(names, [Series(f"f{i}", "time", pts, tuple(values[i])) for i in range(len(funcs))])
    est = PMNFModeler().fit(ds)
    truth = [f.model for f in funcs]
    rec = sum(m.model.shape() == t.shape() for m, t in zip(est.models_, truth))
    at = target_point(3)
    err = np.array([abs(m.model.evaluate(at)[0] - t.evaluate(at)[0]) / t.evaluate(at)[0] for m, t in zip(est.models_, truth)])
    return rec, err


@pytest.mark.parametrize("noise", [0.05, 0.10])
def test_refinement_recovers_more_forms_and_cuts_the_error_tail_with_three_noisy_parameters(noise, monkeypatch):
    # two fixed sets of 60 random functions (one set alone is too small to show it every time)
    runs = {on: [_fit(noise, seed, 3 if on else 99, monkeypatch) for seed in (4, 6)] for on in (True, False)}
    rec = {on: sum(r for r, _ in runs[on]) for on in runs}
    p90 = {on: np.percentile(np.concatenate([e for _, e in runs[on]]), 90) for on in runs}
    assert rec[True] > rec[False]
    assert p90[True] < p90[False]


def test_refinement_keeps_every_noise_free_form(monkeypatch):
    rec, err = _fit(0.0, 5, 3, monkeypatch)
    assert rec == 60
    assert err.max() < 1e-6


def test_structure_design_matches_a_direct_fit():
    st = ((0,), (1, 2))
    hyp = [hyp_of(1.0, 0), hyp_of(0.5, 0), hyp_of(1.0, 1)]
    y = series(st, hyp, [2.0, 0.3, 0.001])
    X = structure_design(BASES, [st], np.array([hyp]), 4)  # one padding column
    assert np.all(X[0, :, 3] == 0)
    coef = wls(X, y[None], np.ones((1, len(y)))).coef[0]
    assert np.allclose(coef[:3], [2.0, 0.3, 0.001], rtol=1e-6) and coef[3] == 0
