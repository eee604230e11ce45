"""The engine's building blocks: hypothesis space, batched least squares, point selection."""

from fractions import Fraction

import numpy as np
import pytest

from modeler.pmnf.hypotheses import EXPONENTS, N_HYPOTHESES, POLY_ONLY, allowed, basis
from modeler.pmnf.lstsq import pinv_solve, wls
from modeler.pmnf.points import extrap_lines, group_by_points
from modeler.pmnf.structures import extrap_structures


def test_hypothesis_space_is_extraps():
    assert N_HYPOTHESES == 42
    by_log = {j: sorted(e for e, jj in EXPONENTS if jj == j) for j in (0, 1, 2)}
    assert len(by_log[0]) == 19 and len(by_log[1]) == 13 and len(by_log[2]) == 10
    assert Fraction(11, 4) in by_log[0] and Fraction(0) in by_log[1] and Fraction(5, 2) in by_log[2]
    assert EXPONENTS[0] == (Fraction(0), 1) and EXPONENTS[-1] == (Fraction(3), 1)  # Extra-P's order
    assert len(set(EXPONENTS)) == 42


def test_log_terms_need_values_of_at_least_one():
    assert len(allowed(np.array([1.0, 2.0, 4.0]))) == 42
    assert list(allowed(np.array([0.5, 2.0, 4.0]))) == list(POLY_ONLY)
    assert len(POLY_ONLY) == 19
    assert list(allowed(np.array([2.0, 4.0]), allow_log=False)) == list(POLY_ONLY)


def test_basis_values():
    x = np.array([2.0, 4.0, 8.0])
    b = basis(x)
    i = EXPONENTS.index((Fraction(3, 2), 2))
    np.testing.assert_allclose(b[i], x**1.5 * np.log2(x) ** 2)
    np.testing.assert_allclose(b[EXPONENTS.index((Fraction(0), 1))], [1, 2, 3])


def test_pinv_solve_matches_lstsq_including_rank_deficient():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 7, 3))
    A[2, :, 2] = A[2, :, 1] * 2  # rank deficient: minimum-norm solution expected
    A[3, 4] = 0.0  # a zeroed row is a dropped point
    y = rng.normal(size=(6, 7))
    c = pinv_solve(A, y)
    for b in range(6):
        np.testing.assert_allclose(c[b], np.linalg.lstsq(A[b], y[b], rcond=None)[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(c[3], np.linalg.lstsq(np.delete(A[3], 4, 0), np.delete(y[3], 4), rcond=None)[0])


def test_wls_coefficients_and_exact_leave_one_out():
    rng = np.random.default_rng(1)
    X = np.concatenate([np.ones((4, 8, 1)), rng.uniform(1, 50, size=(4, 8, 2))], axis=-1)
    X[1, :, 2] = 0.0  # a padding column gets coefficient 0
    y = rng.uniform(1, 100, size=(4, 8))
    w = 1.0 / y**2
    res = wls(X, y, w)
    for b in range(4):
        cols = [0, 1] if b == 1 else [0, 1, 2]
        sw = np.sqrt(w[b])
        ref = np.linalg.lstsq(X[b][:, cols] * sw[:, None], y[b] * sw, rcond=None)[0]
        np.testing.assert_allclose(res.coef[b][cols], ref, rtol=1e-8)
        if b == 1:
            assert res.coef[b][2] == 0.0
        for i in range(8):  # refit without point i, predict it
            keep = np.arange(8) != i
            ci = np.linalg.lstsq(X[b][keep][:, cols] * sw[keep, None], y[b][keep] * sw[keep], rcond=None)[0]
            np.testing.assert_allclose(res.loo[b, i], y[b, i] - X[b, i, cols] @ ci, rtol=1e-6, atol=1e-9)


def test_lines_average_parallel_lines_on_a_full_grid():
    pts = np.array([(x, y) for x in (1, 2, 3) for y in (10, 20, 30, 40)], dtype=float)
    vals = pts[:, 0] * 100 + pts[:, 1]
    lx, ly = extrap_lines(pts)
    assert list(lx.x) == [1, 2, 3] and list(ly.x) == [10, 20, 30, 40]
    np.testing.assert_allclose(lx.weights @ vals, [125, 225, 325])  # mean over y of 100x + y
    np.testing.assert_allclose(ly.weights @ vals, [210, 220, 230, 240])


def test_lines_on_a_sparse_layout_keep_the_longest_lines():
    # a cross: the line y=2 has 4 points, the line x=2 has 3
    pts = np.array([(1, 2), (2, 2), (3, 2), (4, 2), (2, 1), (2, 3)], dtype=float)
    lx, ly = extrap_lines(pts)
    assert list(lx.x) == [1, 2, 3, 4]
    assert list(ly.x) == [2, 1, 3]
    assert (lx.weights.sum(axis=1) == 1).all()


def test_group_by_points():
    a = np.array([[1.0], [2.0]])
    groups = group_by_points([a, a.copy(), np.array([[1.0], [3.0]]), a])
    assert sorted(groups.values()) == [[0, 1, 3], [2]]


def test_structures_are_extraps():
    assert extrap_structures(2) == (((0, 1),), ((0,), (1,)), ((0,), (0, 1)), ((1,), (0, 1)))
    assert len(extrap_structures(3)) == 23
    assert len(set(extrap_structures(3))) == 23
    assert extrap_structures(4) == (((0, 1, 2, 3),), ((0,), (1,), (2,), (3,)))


@pytest.mark.parametrize("k", [2, 3])
def test_every_structure_uses_every_kept_term(k):
    for st in extrap_structures(k):
        assert set().union(*map(set, st)) == set(range(k))


def test_chi2_quantile_approximation():
    stats = pytest.importorskip("scipy.stats")
    from modeler.pmnf.default_mode import _chi2_quantile

    for df in (2, 4, 8, 24, 124):
        assert _chi2_quantile(df) == pytest.approx(stats.chi2.ppf(0.99, df), rel=0.01)


def test_robust_values_drop_outliers_with_any_repetition_counts():
    from modeler.dataset import robust_values

    equal = [np.array([10.0, 10.1, 9.9, 10.05, 9.95]), np.array([20.0, 20.2, 19.8, 20.1, 100.0])]
    np.testing.assert_allclose(robust_values(equal), [10.0, 20.025])
    unequal = [np.array([10.0, 10.1, 9.9]), np.array([20.0, 20.2, 19.8, 20.1, 100.0])]
    np.testing.assert_allclose(robust_values(unequal), [10.0, 20.025])
    np.testing.assert_allclose(robust_values([np.array([3.0, 3.0]), np.array([4.0])]), [3.0, 4.0])


def test_robust_values_with_two_repetitions_far_apart_is_their_mean():
    # bug: both repetitions of the odd point were outliers, leaving 0/0 = nan and a crashed fit
    from modeler.dataset import robust_values

    reps = [np.array([1.0, 1.01]), np.array([2.0, 2.02]), np.array([3.0, 24.0]), np.array([4.0, 4.04])]
    np.testing.assert_allclose(robust_values(reps), [1.005, 2.01, 13.5, 4.02])
    np.testing.assert_allclose(robust_values(reps[:3] + [np.array([4.0, 4.04, 4.02])]), [1.005, 2.01, 13.5, 4.02])


def test_extrapolation_points_lie_beyond_the_measured_range():
    from modeler.pmnf.selection import extrapolation_points

    pts = np.array([(x, y) for x in (2, 4, 8) for y in (10, 20, 30)], dtype=float)
    np.testing.assert_array_equal(extrapolation_points(pts), [[16, 60], [32, 120], [32, 30], [8, 120]])
    np.testing.assert_array_equal(extrapolation_points(np.array([[1.0], [3.0], [5.0]])), [[10], [20]])


def test_class_prior_splits_mass_equally_at_every_level():
    from modeler.pmnf.selection import class_prior

    classes = [(0,), (1, "p", "a"), (1, "p", "a"), (1, "n", "a"), (2, "pn", "a*b"), (2, "pn", "a*b"), (2, "pn", "a+b")]
    prior = np.exp(class_prior(classes))
    np.testing.assert_allclose(prior, [1 / 3, 1 / 12, 1 / 12, 1 / 6, 1 / 12, 1 / 12, 1 / 6])
    assert prior.sum() == pytest.approx(1.0)


def test_noise_variance_pools_the_repetitions_and_is_unknown_without_them():
    from modeler.pmnf.selection import noise_variance

    spread = np.array([[0.1, 0.2, 0.1], [0.1, 0.2, 0.3], [0.0, 0.0, 0.0]])
    reps = np.array([[4, 4, 1], [1, 1, 1], [5, 5, 5]])
    v = noise_variance(spread, reps, "robust")
    # the median of the points' variances (the point with one repetition is left out), unbiased for
    # chi-square sampling with 3 degrees of freedom
    assert v[0] == pytest.approx((0.01 / 4 + 0.04 / 4) / 2 / (1 - 2 / 27) ** 3)
    assert np.isnan(v[1]) and np.isnan(v[2])  # no repetitions; identical repetitions
    assert noise_variance(spread, reps, "median")[0] == pytest.approx(v[0] * np.pi / 2)


def test_one_straggler_point_neither_sets_the_noise_nor_keeps_its_full_weight():
    from modeler.pmnf.selection import noise_variance, outlier_weights

    spread = np.array([[0.02, 0.02, 0.02, 0.02, 1.2]])  # the last point's repetitions disagree wildly
    reps = np.full((1, 5), 2)
    v = noise_variance(spread, reps, "robust")[0]
    # the points agree on 0.02**2 / 2 per value (2e-4, 4.3e-4 after the 1-dof correction); a mean over
    # the points would give ~0.14, from the straggler (1.2**2 / 2 = 0.72) alone
    assert v < 0.02**2 * 1.1
    w = outlier_weights(spread, reps, "robust")[0]
    assert np.all(w[:4] == 1.0) and 0 < w[4] < 0.01


def test_min_risk_noise_free_takes_the_simplest_exact_fit():
    from modeler.pmnf.selection import min_risk

    # hypotheses: constant, two one-term fits (the second exact), the exact one with a useless extra term
    rss = np.array([[1e-2, 1e-3, 1e-30, 1e-31]])
    n_coef = np.array([1, 2, 2, 3])
    pred = np.array([[[1.0, 1.0], [2.0, 3.0], [2.5, 4.0], [2.5, 4.0]]])
    complexity = np.array([0, 101, 101, 202])
    for by_risk in (True, False):
        chosen = min_risk(rss, n_coef, 25, np.array([np.nan]), pred, complexity, None, np.arange(4), by_risk)
        assert list(chosen) == [2]


def test_min_risk_picks_the_prediction_with_the_least_expected_error():
    from modeler.pmnf.selection import min_risk

    # three equally likely exponents of one structure predict 1.0, 1.1 and 1.5 beyond the range:
    # the middle one has the least expected relative error; the heaviest-first rule takes the first
    rss = np.full((1, 3), 25e-4)
    n_coef = np.full(3, 2)
    pred = np.array([[[1.0], [1.1], [1.5]]])
    classes = np.zeros(3, dtype=int)
    noise = np.array([1e-4])
    assert list(min_risk(rss, n_coef, 25, noise, pred, np.zeros(3), None, classes)) == [1]
    assert list(min_risk(rss, n_coef, 25, noise, pred, np.zeros(3), None, classes, by_risk=False)) == [0]
    # a structure is chosen by its summed weight: two near-equal hypotheses of class 1 outweigh
    # a slightly better single one of class 0
    rss = np.array([[24e-4, 25e-4, 25e-4]])
    chosen = min_risk(rss, n_coef, 25, noise, pred, np.zeros(3), None, np.array([0, 1, 1]))
    assert chosen[0] in (1, 2)


def test_log_weights_without_repetitions_use_the_best_fits_residuals():
    from modeler.pmnf.selection import PENALTY, log_weights

    rss = np.array([[2.3e-3, 4.6e-3]])
    n_coef = np.array([2, 2])
    lw = log_weights(rss, n_coef, 25, np.array([np.nan]))
    s2 = 2.3e-3 / 23
    np.testing.assert_allclose(lw[0, 1] - lw[0, 0], -0.5 * 2.3e-3 / s2)
    # repetitions showing less noise than the best fit leaves: the fit's residual scale wins
    np.testing.assert_allclose(log_weights(rss, n_coef, 25, np.array([1e-9])), lw)
    assert lw[0, 0] == pytest.approx(-0.5 * 23 - PENALTY * 0.5 * np.log(25) * 2)


def test_min_risk_in_chunks_equals_one_pass(monkeypatch):
    import modeler.pmnf.selection as selection

    rng = np.random.default_rng(5)
    S, M, E = 7, 12, 3
    rss = rng.uniform(0.5, 2.0, size=(S, M)) * 1e-3
    rss[2, 4] = np.inf  # an unusable hypothesis
    pred = rng.uniform(1.0, 3.0, size=(S, M, E))
    args = (rss, np.full(M, 2), 25, np.full(S, 1e-4), pred, np.zeros(M), None, rng.integers(0, 3, size=M))
    whole = selection.min_risk(*args)
    monkeypatch.setattr(selection, "_CHUNK", 1)
    np.testing.assert_array_equal(selection.min_risk(*args), whole)
    assert 4 not in selection.min_risk(*args)[2:3]
