"""PMNFModeler's contract, run over both modes: options checked in fit, fit returns self, learned
state in `_` attributes, typed errors, recovery of known functions, determinism."""

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.errors import InputError, ModelerError, NotFittedError, TooFewPointsError
from modeler.estimator import PMNFModeler

MODES = [None, "extrap"]
P_VALUES = (2.0, 4.0, 8.0, 16.0, 32.0)
N_VALUES = (10.0, 20.0, 30.0, 40.0, 50.0)


def grid(*axes):
    return np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(axes), -1).T


def dataset(params, fns, points, reps=3, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    series = []
    for i, f in enumerate(fns):
        exact = f(*points.T)
        values = exact[:, None] * (1 + rng.uniform(-noise, noise, size=(len(exact), reps)))
        series.append(Series(f"main->f{i}", "time", points, tuple(values)))
    return Dataset(params, series)


def shape(m):
    return sorted(tuple(sorted((f.parameter, f.exponent, f.log_exponent) for f in t.factors)) for t in m.model.terms)


@pytest.mark.parametrize("compat", MODES)
def test_recovers_known_functions_noise_free(compat):
    pts = grid(P_VALUES, N_VALUES)
    fns = [
        lambda p, n: 3 + 0.5 * p**2,
        lambda p, n: 1 + 2 * p * np.log2(p) * n**0.5,
        lambda p, n: 10 + 4 * np.log2(p) + 0.1 * n**1.5,
        lambda p, n: 5 + 0.2 * p * n + 3 * p,
    ]
    est = PMNFModeler(compat=compat).fit(dataset(("p", "n"), fns, pts))
    assert est.parameters_ == ("p", "n")
    assert [shape(m) for m in est.models_] == [
        [(("p", 2.0, 0),)],
        [(("n", 0.5, 0), ("p", 1.0, 1))],
        [(("n", 1.5, 0),), (("p", 0.0, 1),)],
        [(("n", 1.0, 0), ("p", 1.0, 0)), (("p", 1.0, 0),)],
    ]
    at = np.array([[128.0, 200.0]])
    truth = np.array([f(128.0, 200.0) for f in fns])
    np.testing.assert_allclose(est.predict(at)[:, 0], truth, rtol=1e-6)
    for m in est.models_:
        assert m.smape < 1e-6 and m.points == 25 and m.warnings == ()


@pytest.mark.parametrize("compat", MODES)
def test_fit_returns_self_and_is_deterministic(compat):
    pts = grid(P_VALUES)
    ds = dataset(("p",), [lambda p: 2 + p**1.5, lambda p: 7 + np.log2(p) ** 2], pts, noise=0.05, seed=3)
    est = PMNFModeler(compat=compat)
    assert est.fit(ds) is est
    again = PMNFModeler(compat=compat).fit(ds)
    assert [m.model.formula(17) for m in est.models_] == [m.model.formula(17) for m in again.models_]
    assert [(m.callpath, m.metric) for m in est.models_] == [("main->f0", "time"), ("main->f1", "time")]


def test_options_are_validated_in_fit_not_in_init():
    ds = dataset(("p",), [lambda p: p], grid(P_VALUES))
    for bad in ({"compat": "extra-p"}, {"aggregate": "mode"}, {"candidates": 0}, {"on_too_few": "ignore"}):
        est = PMNFModeler(**bad)  # accepted here, as in scikit-learn
        with pytest.raises(InputError, match=next(iter(bad))):
            est.fit(ds)
    with pytest.raises(TypeError):
        PMNFModeler("extrap")  # keyword-only


def test_predict_before_fit_and_bad_points():
    with pytest.raises(NotFittedError):
        PMNFModeler().predict(np.array([[1.0]]))
    assert issubclass(NotFittedError, ModelerError)
    est = PMNFModeler().fit(dataset(("p", "n"), [lambda p, n: p + n], grid(P_VALUES, N_VALUES)))
    with pytest.raises(InputError, match="2 parameters"):
        est.predict(np.array([[1.0, 2.0, 3.0]]))
    with pytest.raises(InputError, match="parameter.*n"):
        est.predict({"p": [1.0]})
    out = est.predict({"p": [64.0, 128.0], "n": [100.0, 100.0]})
    assert out.shape == (1, 2)


def test_too_few_points_warns_or_raises():
    pts = np.array([[2.0], [4.0]])
    ds = Dataset(("p",), [Series("a", "time", pts, (np.array([1.0]), np.array([2.0])))])
    (m,) = PMNFModeler().fit(ds).models_
    assert m.model.terms == () and m.model.constant == pytest.approx(1.5)
    assert "at least 3" in m.warnings[0] and "a/time" in m.warnings[0]
    with pytest.raises(TooFewPointsError, match="a/time: 2 point.*at least 3"):
        PMNFModeler(on_too_few="raise").fit(ds)
    with pytest.raises(TooFewPointsError, match="no series"):
        PMNFModeler().fit(Dataset(("p",), []))


@pytest.mark.parametrize("compat", MODES)
def test_few_values_of_a_parameter_are_modeled_with_a_warning(compat):
    pts = grid((1.0, 2.0, 3.0), (1.0, 2.0, 3.0, 4.0, 5.0))
    (m,) = PMNFModeler(compat=compat).fit(dataset(("x", "y"), [lambda x, y: x**2 + y], pts)).models_
    assert m.warnings == ("fewer than 5 values of parameter x (3)",)
    assert shape(m) == [(("x", 2.0, 0),), (("y", 1.0, 0),)]


@pytest.mark.parametrize("compat", MODES)
def test_parameter_with_two_values_is_constant_in_it(compat):
    pts = grid((1.0, 2.0), (2.0, 4.0, 8.0, 16.0, 32.0))
    (m,) = PMNFModeler(compat=compat).fit(dataset(("x", "y"), [lambda x, y: 1 + x + y**2], pts)).models_
    if compat:
        assert any("only 2 value(s) of parameter x" in w for w in m.warnings)
    else:  # its values differ between x=1 and x=2: said so, and marked (review 128 MED-1: modeler.levels)
        assert any("values differ between x=1 and x=2" in w and "not modeled" in w for w in m.warnings)
        assert m.miss.startswith("does not follow x") and m.levels[0].modeled_at is None
    assert {f.parameter for t in m.model.terms for f in t.factors} == {"y"}


@pytest.mark.parametrize("compat", MODES)
def test_two_by_two_grid_gives_a_constant(compat):
    pts = grid((1.0, 2.0), (3.0, 4.0))
    (m,) = PMNFModeler(compat=compat).fit(dataset(("x", "y"), [lambda x, y: x * y], pts)).models_
    y = np.array([3.0, 4.0, 6.0, 8.0])
    # compat: the mean; default: the constant with the least relative squared error
    expected = y.mean() if compat else (1 / y).sum() / (1 / y**2).sum()
    assert m.model.terms == () and m.model.constant == pytest.approx(expected)
    assert len(m.warnings) == 2


def test_series_missing_points_are_modeled_on_the_points_they_have():
    full = grid(P_VALUES)
    part = full[[0, 1, 3, 4]]
    ds = Dataset(
        ("p",),
        [
            Series("a", "t", full, tuple(np.array([3 + p]) for p in full[:, 0])),
            Series("b", "t", part, tuple(np.array([3 + p * p]) for p in part[:, 0])),
        ],
    )
    a, b = PMNFModeler().fit(ds).models_
    assert (a.points, b.points) == (5, 4)
    assert shape(b) == [(("p", 2.0, 0),)]
    assert b.warnings == ("fewer than 5 values of parameter p (4)",)


def test_noise_test_keeps_a_flat_series_constant():
    pts = grid(P_VALUES, N_VALUES)
    ds = dataset(("p", "n"), [lambda p, n: np.full(p.shape, 50.0)] * 20, pts, reps=5, noise=0.05, seed=11)
    with_test = PMNFModeler().fit(ds)
    assert len(with_test.models_) == 20
    assert all(m.model.terms == () for m in with_test.models_)
    assert all(m.model.constant == pytest.approx(50.0, rel=0.02) for m in with_test.models_)


def test_robust_default_aggregate_ignores_a_broken_repetition():
    pts = grid(P_VALUES)
    reps = [np.array([1.00, 1.01, 0.99, 1.0, 1.0]) * (10 + p) for p in P_VALUES]
    reps[4] = reps[4].copy()
    reps[4][0] *= 5  # one run went wrong
    ds = Dataset(("p",), [Series("a", "time", pts, tuple(reps))])
    (m,) = PMNFModeler().fit(ds).models_
    assert shape(m) == [(("p", 1.0, 0),)]
    (mean_model,) = PMNFModeler(aggregate="mean").fit(ds).models_
    # the mean is dragged off by the outlier, but that point's repetitions disagree far more than the
    # others', so its weight drops and the form survives even so
    assert shape(mean_model) == [(("p", 1.0, 0),)]


def test_quality_fields_and_interval():
    pts = grid(P_VALUES, N_VALUES)
    ds = dataset(("p", "n"), [lambda p, n: 2 + p * n], pts, reps=5, noise=0.04, seed=5)
    (m,) = PMNFModeler().fit(ds).models_
    assert 0 < m.smape < 4 and m.rss > 0 and 0.9 < m.ar2 <= 1
    assert m.cv_smape is not None and m.cv_smape >= m.smape
    lo, hi = m.interval
    assert 0.9 < lo < 1 < hi < 1.1 and hi - 1 == pytest.approx(1 - lo)
    single = dataset(("p", "n"), [lambda p, n: 2 + p * n], pts, reps=1)
    assert PMNFModeler().fit(single).models_[0].interval is None


def test_negative_and_zero_values_do_not_break_the_fit():
    pts = grid(P_VALUES)
    ds = dataset(("p",), [lambda p: 5 - 0.5 * p, lambda p: np.where(p > 2, p, 0.0)], pts)
    models = PMNFModeler().fit(ds).models_
    np.testing.assert_allclose(models[0].predict(pts), 5 - 0.5 * pts[:, 0], atol=1e-9)
    assert np.isfinite(models[1].predict(pts)).all()


def test_growth_far_beyond_large_repetition_noise_is_not_called_flat():
    # 256x growth over five points, every point's repetitions spread 0.1x..1.9x around it. Relative
    # deviations from the mean are capped at 1 above it, so they once summed to a chi-square that
    # passed the series off as noise; in log space the growth counts in full.
    x = np.array([[2.0], [4.0], [8.0], [16.0], [32.0]])
    reps = tuple(4.0 ** i * np.array([0.1, 1.0, 1.9]) for i in range(5))
    fitted = PMNFModeler(aggregate="mean").fit(Dataset(("x",), [Series("g", "time", x, reps)])).models_[0]
    assert fitted.model.terms, f"constant model {fitted.model} for a series that grows 256x"


def test_one_point_with_wildly_disagreeing_repetitions_does_not_flatten_a_growing_series():
    # Measured on a real sweep: two repetitions at n=4 differ 14x (a straggler), the series grows 25x
    # from n=8 to n=20. Pooling the noise by its mean made the whole series look like noise and the
    # default mode answered with a constant (SMAPE 112%).
    n = np.array([[4.0], [8.0], [12.0], [16.0], [20.0]])
    reps = (
        [0.00059986, 0.008565691], [0.001694183, 0.002309467], [0.012929146, 0.013026239],
        [0.028369748, 0.02547976], [0.071588281, 0.074103585],
    )
    ds = Dataset(("n",), [Series("w", "time", n, reps)])
    fitted = PMNFModeler().fit(ds).models_[0]
    assert fitted.model.terms, f"constant model {fitted.model} for a series that grows 25x"
    # the model follows the four consistent points and keeps growing beyond them
    values = np.array([np.mean(r) for r in reps[1:]])
    predicted = fitted.predict(n[1:])
    assert np.all(np.abs(predicted - values) / values < 0.5), (predicted, values)
    assert fitted.predict(np.array([[40.0]]))[0] > 2 * values[-1]


def test_a_group_s_quality_is_taken_once_for_all_its_series(monkeypatch):
    """Review 54 F1: where `ranks` is a parameter, every series that kept its plain model beside a
    weighted split one copied its whole group's quality arrays: memory quadratic in the call paths
    (6.6 GB for 16k paths). One copy per group of series measured at the same points."""
    import modeler.estimator as est

    calls = []
    real = est._quality_rows
    monkeypatch.setattr(est, "_quality_rows", lambda q, rows: calls.append(len(rows)) or real(q, rows))
    ranks = (1.0, 2.0, 4.0, 8.0, 16.0)
    pts = grid(ranks)
    # a time that grows with log2(ranks): plain models, the split form weighted in their ranges
    fns = [lambda p, k=k: (1 + 0.1 * k) * (2 + 0.3 * np.log2(p)) for k in range(40)]
    m = PMNFModeler().fit(dataset(("ranks",), fns, pts, noise=0.08, seed=3))
    assert len(m.models_) == 40
    assert len(calls) <= 1, calls  # one group: the same points for all 40
