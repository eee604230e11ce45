"""Models of work split over the ranks (`modeler.strong_scaling`): fitted as values x ranks and
divided back, where that cross-validates clearly better; nowhere else (and along another parameter
only for values that fall along it)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.estimator import PMNFModeler
from modeler.model import Alternative, Factor, Model, Term
from modeler.strong_scaling import split, split_alternative

RANKS = (1, 2, 4, 8, 16)
SIZES = (8, 16, 32, 64, 128)


def _dataset(funcs: dict, params=("ranks", "n"), noise=0.01, seed=0) -> Dataset:
    rng = np.random.default_rng(seed)
    pts = np.array(list(itertools.product(RANKS, SIZES)), dtype=float)
    out = []
    for name, f in funcs.items():
        reps = tuple(f(*pt) * (1 + rng.uniform(-noise, noise, 5)) for pt in pts)
        out.append(Series(name, "time", pts, reps))
    return Dataset(params, out)


def _ranks_exponents(model: Model) -> set[float]:
    return {f.exponent for t in model.terms for f in t.factors if f.parameter == "ranks"}


STRONG = {
    "amdahl": lambda r, n: 0.5 + 0.02 * n / r,
    "with_comm": lambda r, n: 0.1 + 0.05 * n / r + 0.02 * np.log2(r),
}
PMNF = {
    "weak_log": lambda r, n: 1.0 + 0.3 * np.log2(r),
    "grows": lambda r, n: 0.2 + 0.01 * n * r**0.5,
    "flat": lambda r, n: 2.0 + 0.0 * r,
    "size_only": lambda r, n: 0.1 + 0.002 * n**1.5,
}


def test_work_split_over_ranks_gets_a_term_falling_as_one_over_ranks():
    models = {fm.callpath: fm for fm in PMNFModeler().fit(_dataset(STRONG)).models_}
    plain = {fm.callpath: fm for fm in PMNFModeler(strong_scaling=False).fit(_dataset(STRONG)).models_}
    assert set(models) == set(plain) == set(STRONG)
    assert all(-1.0 in _ranks_exponents(fm.model) for fm in models.values())
    assert all(-1.0 not in _ranks_exponents(fm.model) for fm in plain.values())
    at = {"ranks": [256.0], "n": [512.0]}  # 16x the measured ranks, 4x the size
    # Amdahl's c + w * n / ranks is exactly a split PMNF model
    assert models["amdahl"].predict(at)[0] == pytest.approx(STRONG["amdahl"](256.0, 512.0), rel=0.05)
    # with communication (ranks and ranks * log2(ranks) in the cost: no single PMNF form) the split
    # model is approximate, but far better than a time model that cannot fall as 1/ranks
    for name, f in STRONG.items():
        true = f(256.0, 512.0)
        err, err_plain = (abs(m[name].predict(at)[0] - true) / true for m in (models, plain))
        assert err < 0.5 * err_plain, (name, err, err_plain)


def test_series_that_pmnf_explains_are_not_split():
    fitted = PMNFModeler().fit(_dataset(PMNF)).models_
    assert [fm.callpath for fm in fitted] == list(PMNF)
    for fm in fitted:
        assert all(e >= 0 for e in _ranks_exponents(fm.model)), (fm.callpath, fm.model.formula())


def test_a_parameter_not_named_ranks_is_split_where_the_values_fall_along_it_never_in_compat_mode():
    # review 61 F7: values falling as 1/p came back as a - b * log2(p), negative beyond the range;
    # the values x p are now fitted for the series that fall along p, and only for them
    renamed = PMNFModeler().fit(_dataset(STRONG, params=("p", "n"))).models_
    named = PMNFModeler().fit(_dataset(STRONG)).models_
    compat = PMNFModeler(compat="extrap").fit(_dataset(STRONG)).models_
    assert [fm.callpath for fm in renamed] == [fm.callpath for fm in compat] == list(STRONG)
    for fm, ranks in zip(renamed, named):
        assert fm.model.formula() == ranks.model.formula().replace("ranks", "p")
    for fm in compat:
        assert all(e >= 0 for e in _ranks_exponents(fm.model))
    growing = PMNFModeler().fit(_dataset(PMNF, params=("p", "n"))).models_
    assert all(f.exponent >= 0 for fm in growing for t in fm.model.terms for f in t.factors)
    off = PMNFModeler(strong_scaling=False).fit(_dataset(STRONG, params=("p", "n"))).models_
    assert all(f.exponent >= 0 for fm in off for t in fm.model.terms for f in t.factors)


def test_fit_quality_is_reported_on_the_values_not_on_values_times_ranks():
    (fm,) = PMNFModeler().fit(_dataset({"amdahl": STRONG["amdahl"]}, noise=0.0)).models_
    assert -1.0 in _ranks_exponents(fm.model)
    pts = np.array(list(itertools.product(RANKS, SIZES)), dtype=float)
    y = np.array([STRONG["amdahl"](*p) for p in pts])
    resid = y - fm.predict(pts)
    assert fm.rss == pytest.approx(float(resid @ resid), abs=1e-12)
    assert fm.smape < 1e-6 and fm.ar2 == pytest.approx(1.0)


def test_split_maps_coefficients_and_covariance():
    # (values x ranks) = 3 + 2 * ranks + 5 * ranks^2 * n  ->  values = 2 + 3 * ranks^-1 + 5 * ranks * n
    m = Model(("ranks", "n"), 3.0, (Term(2.0, (Factor("ranks", 1.0),)),
                                    Term(5.0, (Factor("ranks", 2.0), Factor("n", 1.0)))))
    out, A = split(m, "ranks")
    assert out.formula() == "2 + 3 * ranks^(-1) + 5 * ranks^(1) * n^(1)"
    pts = np.array([[2.0, 3.0], [8.0, 5.0]])
    assert out.evaluate(pts) == pytest.approx(m.evaluate(pts) / pts[:, 0])
    cov = np.diag([1.0, 2.0, 3.0])
    alt = split_alternative(Alternative(0.5, m, cov), "ranks")
    assert alt.weight == 0.5
    # the new order is (constant = old term 1, old constant, old term 2)
    assert np.diag(alt.cov).tolist() == [2.0, 1.0, 3.0]
    # no term in ranks^1 alone: the split model has no constant, and none is printed
    bare, _ = split(Model(("ranks",), 4.0, (Term(1.0, (Factor("ranks", 2.0),)),)), "ranks")
    assert bare.constant == 0.0 and bare.formula() == "4 * ranks^(-1) + 1 * ranks^(1)"


def test_predict_refuses_zero_ranks_for_a_term_in_ranks_to_the_minus_one():
    est = PMNFModeler().fit(_dataset({"amdahl": STRONG["amdahl"]}))
    with pytest.raises(InputError, match=r"ranks=0 at point 0: ranks\^\(-1\) is not defined at 0"):
        est.predict({"ranks": [0.0], "n": [8.0]})
