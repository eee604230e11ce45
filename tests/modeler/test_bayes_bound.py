"""The benchmark's Bayes bound (benchmarks/_bayes.py): the yardstick the modeler's error targets are
judged against, so it must itself find the truth where the data allow and pick by its criterion."""

import numpy as np
import pytest
from _bayes import Posterior, mean_choice, posterior, within_choice
from _synthetic import make_case, target_point


@pytest.mark.parametrize("n_params, n_paths", [(1, 40), (2, 12)])
def test_nearly_noise_free_data_put_the_weight_on_the_true_prediction(n_params, n_paths):
    funcs, pts, values = make_case(5, n_params, n_paths, 0.001)
    at = target_point(n_params)
    truth = np.array([f.model.evaluate(at)[0] for f in funcs])
    post = posterior(pts, at[0], values.mean(axis=2), 0.001, values.shape[2])
    err = np.abs(mean_choice(post) - truth) / truth
    assert np.median(err) < 0.005
    assert np.mean(err < 0.05) >= 0.9
    # the weights are a distribution over the forms that carry any
    assert all(abs(w.sum() - 1) < 1e-9 and (w > 0).all() for w in post.weight)


def test_more_noise_spreads_the_posterior_and_the_errors():
    funcs, pts, values = make_case(7, 1, 60, 0.1)
    at = target_point(1)
    truth = np.array([f.model.evaluate(at)[0] for f in funcs])
    noisy = posterior(pts, at[0], values.mean(axis=2), 0.1, values.shape[2])
    clean_funcs, _, clean_values = make_case(7, 1, 60, 0.001)
    clean = posterior(pts, at[0], clean_values.mean(axis=2), 0.001, clean_values.shape[2])
    assert np.median([w.max() for w in noisy.weight]) < np.median([w.max() for w in clean.weight])
    noisy_err = np.abs(mean_choice(noisy) - truth) / truth
    assert np.median(noisy_err) > 0.005


def test_the_two_rules_choose_by_their_own_criterion():
    # one heavy form alone at 1, and two lighter ones close together at 1.5 and 1.6
    post = Posterior([np.array([1.0, 1.5, 1.6])], [np.array([0.4, 0.3, 0.3])], [np.full(3, 1e-9)])
    # least expected relative error: the median weighted by w / f (0.4, 0.2, 0.19) is 1
    assert mean_choice(post)[0] == 1.0
    # within 10%: 1 holds 40% of the mass, 1.5 holds 60% (itself and 1.6)
    assert within_choice(post, 0.1)[0] == 1.5
    # within 60%, 1 reaches up to 2.5: all the mass
    assert within_choice(post, 0.6)[0] == 1.0


def test_within_choice_counts_the_uncertainty_of_each_prediction():
    # a broad form at 1 has little of its mass within 5% of 1; a sharp one at 3 has all of it
    post = Posterior([np.array([1.0, 3.0])], [np.array([0.6, 0.4])], [np.array([1.0, 1e-6])])
    assert within_choice(post, 0.05)[0] == 3.0


def test_refuses_what_it_cannot_enumerate_or_weigh():
    funcs, pts, values = make_case(1, 3, 2, 0.05)
    with pytest.raises(ValueError, match="1 to 2 parameters, not 3"):
        posterior(pts, target_point(3)[0], values.mean(axis=2), 0.05, 5)
    funcs, pts, values = make_case(1, 1, 2, 0.0)
    with pytest.raises(ValueError, match="noise above 0"):
        posterior(pts, target_point(1)[0], values.mean(axis=2), 0.0, 5)


def test_the_benchmark_names_a_target_beyond_the_bayes_rule():
    from modeler_vs_extrap import _error_target

    # target 0.2 (half of 0.4); ours 0.3 misses it
    assert _error_target("p90", 0.3, 0.4, 0.5, 0.01, (0.14, 0.1)) == (
        "p90 <= half: NO (even the Bayes rule for it leaves 14.0% of the errors above, 10% allowed)"
    )
    # the Bayes rule could meet it: only the oracle comparison is left
    assert _error_target("p90", 0.3, 0.4, 0.5, 0.01, (0.08, 0.1)) == "p90 <= half: NO (below the oracle)"
    # below what knowing the exact form gives: that says more than the Bayes rule
    assert _error_target("median", 0.3, 0.4, 0.5, 0.25, (0.6, 0.5)).endswith("(below the floor: unreachable)")
    assert _error_target("median", 0.19, 0.4, 0.5, 0.25, None) == "median <= half: yes"


def test_limiting_the_exponents_to_all_of_them_changes_nothing():
    funcs, pts, values = make_case(3, 2, 6, 0.05)
    at = target_point(2)
    full = posterior(pts, at[0], values.mean(axis=2), 0.05, 5)
    every = posterior(pts, at[0], values.mean(axis=2), 0.05, 5, exponents=42)
    np.testing.assert_allclose(mean_choice(every), mean_choice(full), rtol=1e-9)
    assert [len(p) for p in every.pred] == [len(p) for p in full.pred]


def test_three_parameters_with_limited_exponents_find_the_truth_on_clean_data():
    funcs, pts, values = make_case(4, 3, 3, 0.001)
    at = target_point(3)
    truth = np.array([f.model.evaluate(at)[0] for f in funcs])
    post = posterior(pts, at[0], values.mean(axis=2), 0.001, 5, exponents=4)
    assert np.all(np.abs(mean_choice(post) - truth) / truth < 0.02)
