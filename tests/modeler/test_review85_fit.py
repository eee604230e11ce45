"""Review 85 F3, F4 and F7: ties under compat="extrap", a value near zero that the relative fit
hinges on, and the boolean options' error."""

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.estimator import PMNFModeler

# 1 + 3 x^2 at x = 1, 2, 4, three runs with 2% noise (the review's three_pts.jsonl)
THREE_POINTS = (
    (1.0, (4.010058417687471, 3.9894316109366956, 4.051233812035463)),
    (2.0, (13.02727403045979, 12.86072596297811, 13.094014714276465)),
    (4.0, (50.277920044227535, 49.92813934386666, 48.31033946890915)),
)


def test_exact_ties_go_to_the_first_hypothesis_as_in_extrap():
    # with 1, a, a^2 every pair of log hypotheses with the same i + j is proportional on the points:
    # equal scores, which the vectorized sums put 1e-14 apart the other way than Extra-P's loop
    s = Series("r", "time", np.array([[x] for x, _ in THREE_POINTS]), tuple(np.array(r) for _, r in THREE_POINTS))
    fm = PMNFModeler(compat="extrap").fit(Dataset(("x",), [s])).models_[0]
    # Extra-P 4.2.5 prints 3.99356635475018 + 7.166765103408544 * x^(1/3) * log2(x)^(2); we gave
    # 3.99357 + 3.58338 * x^(4/3) * log2(x)^(1), 5x higher at x = 64
    assert fm.model.shape() == frozenset({(("x", 1 / 3, 2),)})
    assert fm.model.constant == pytest.approx(3.99356635475018, rel=1e-9)
    assert fm.model.terms[0].coefficient == pytest.approx(7.166765103408544, rel=1e-9)


def test_first_lowest_takes_the_first_of_scores_equal_within_rounding():
    from modeler.pmnf.single import TIE, first_lowest

    score = np.array([[3.0, 0.8029195440982275, 1.0, 0.8029195440982151, np.inf],
                      [np.inf] * 5,
                      [2.0, 1.0, 1.0 - 10 * TIE, 1.0, 5.0]])
    assert first_lowest(score).tolist() == [1, 0, 2]


def _tiny_first(first: float, compat=None):
    rng = np.random.default_rng(1)
    xs = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    ys = [first, 0.4, 1.6, 6.4, 25.6]  # 0.1 x^2 but the first value
    R = tuple(y * (1 + 0.02 * rng.standard_normal(3)) for y in ys)
    return PMNFModeler(compat=compat).fit(Dataset(("x",), [Series("r", "time", xs[:, None], R)])).models_[0]


def test_a_value_near_zero_that_the_fit_hinges_on_is_named():
    fm = _tiny_first(1e-6)
    said = [w for w in fm.warnings if "near zero" in w]
    assert len(said) == 1
    assert said[0].startswith("the value at (x=1) is near zero against the others (1.01e-06; "
                              "the other points put it at ")
    assert "it carries 100% of the weight of the relative fit, and the model hinges on it" in said[0]


@pytest.mark.parametrize("first, compat", [(0.0, None), (0.1, None), (1e-6, "extrap")])
def test_no_note_for_a_zero_a_clean_value_or_extraps_fit(first, compat):
    # a zero's weight is floored at a tenth of the median (review 111), and the others put it near
    # 0; compat="extrap" fits absolute errors
    assert not [w for w in _tiny_first(first, compat).warnings if "near zero" in w]


@pytest.mark.parametrize("f", [lambda x: x**2, lambda x: 1 + 0.5 * x, lambda x: 1e-3 + 0.5 * x**3])
def test_growth_that_puts_most_weight_on_its_smallest_value_is_not_named(f):
    # 1/y^2 puts 94% of x^2's weight on x = 2 and 60% of 1 + 0.5x's: how relative errors work
    rng = np.random.default_rng(2)
    xs = np.array([2.0, 4.0, 8.0, 16.0, 32.0])
    R = tuple(f(x) * (1 + 0.02 * rng.standard_normal(3)) for x in xs)
    fm = PMNFModeler().fit(Dataset(("x",), [Series("r", "time", xs[:, None], R)])).models_[0]
    assert not [w for w in fm.warnings if "near zero" in w]


@pytest.mark.parametrize("option", ["allow_log", "noise_test", "strong_scaling", "pass_range"])
def test_a_bad_boolean_option_is_named_alone(option):
    s = Series("r", "time", np.array([[1.0], [2.0], [4.0]]), (np.ones(2), np.ones(2), np.ones(2)))
    with pytest.raises(InputError) as e:
        PMNFModeler(**{option: 1}).fit(Dataset(("x",), [s]))
    assert str(e.value) == f"{option} must be True or False, got 1"
