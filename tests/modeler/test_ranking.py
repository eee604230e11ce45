"""Ranking by asymptotic growth, then by the prediction at the `--at` point."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.model import Factor, FittedModel, Model, Term
from modeler.growth import growth
from modeler.ranking import nonnegative_keys, rank_models
from modeler.target_point import measured_maximum, parse_at

PARAMS = ("p", "n")


def fitted(name: str, constant: float, *terms: tuple[float, tuple[Factor, ...]], interval=None) -> FittedModel:
    model = Model(PARAMS, constant, tuple(Term(c, f) for c, f in terms))
    return FittedModel(name, "time", model, smape=1.0, rss=0.1, ar2=0.99, cv_smape=2.0, points=25, interval=interval)


def test_growth_of_dominant_term():
    m = Model(PARAMS, 1.0, (Term(2.0, (Factor("p", 1.0),)), Term(0.1, (Factor("p", 1.0, 1), Factor("n", 0.5)))))
    assert growth(m) == (1.5, 1.0)
    assert growth(Model(PARAMS, 3.0)) == (0.0, 0.0)
    falling = Model(PARAMS, 10.0, (Term(-0.5, (Factor("p", 0.0, 1),)),))
    assert growth(falling) == (-0.0, -1.0)


def test_sorted_by_growth_then_prediction():
    models = [
        fitted("const_big", 1e6),
        fitted("linear", 1.0, (1.0, (Factor("p", 1.0),))),
        fitted("nlogn", 1.0, (1.0, (Factor("p", 1.0, 1),))),
        fitted("quadratic", 1.0, (1e-9, (Factor("p", 2.0),))),
        fitted("falls", 5.0, (-1.0, (Factor("p", 0.0, 1),))),
        fitted("linear_n_big", 1.0, (100.0, (Factor("n", 1.0),))),
    ]
    r = rank_models(models, PARAMS, {"p": 1024, "n": 256})
    order = [row.fitted.callpath for row in r.rows]
    # same growth (linear): the one predicting more at the target comes first
    assert order == ["quadratic", "nlogn", "linear_n_big", "linear", "const_big", "falls"]
    pred = {row.fitted.callpath: row.prediction for row in r.rows}
    assert pred["linear"] == pytest.approx(1025.0)
    assert pred["linear_n_big"] == pytest.approx(25601.0)


def test_target_point_changes_order_within_a_growth_class():
    models = [fitted("by_p", 0.0, (1.0, (Factor("p", 1.0),))), fitted("by_n", 0.0, (1.0, (Factor("n", 1.0),)))]
    assert rank_models(models, PARAMS, {"p": 100, "n": 10}).rows[0].fitted.callpath == "by_p"
    assert rank_models(models, PARAMS, {"p": 10, "n": 100}).rows[0].fitted.callpath == "by_n"


def test_interval_scales_prediction():
    m = fitted("x", 10.0, interval=(0.9, 1.2))
    (row,) = rank_models([m], PARAMS, {"p": 2, "n": 2}).rows
    assert (row.low, row.prediction, row.high) == pytest.approx((9.0, 10.0, 12.0))
    assert rank_models([fitted("y", 1.0)], PARAMS, {"p": 2, "n": 2}).rows[0].low is None


def test_unevaluable_prediction_sorts_last_within_class():
    # log2 of a target below 1 is negative: log^2 fine, but x^0.5 of a negative is nan
    bad = Model(PARAMS, 0.0, (Term(1.0, (Factor("p", 0.5),)),))
    good = fitted("good", 0.0, (1.0, (Factor("n", 0.5),)))
    nan_model = FittedModel("nan", "time", bad, 1, 1, 1, None, 5)
    r = rank_models([nan_model, good], PARAMS, {"p": -4.0, "n": 4.0})
    assert [row.fitted.callpath for row in r.rows] == ["good", "nan"]
    assert math.isnan(r.rows[1].prediction)


def test_parse_at():
    defaults = {"p": 32.0, "n": 500.0}
    assert parse_at(None, PARAMS, defaults) == defaults
    assert parse_at("p=1024", PARAMS, defaults) == {"p": 1024.0, "n": 500.0}
    assert parse_at(" p = 1024 , n=2.5e3 ", PARAMS, defaults) == {"p": 1024.0, "n": 2500.0}
    assert parse_at("p=4,p=4.0", PARAMS, defaults)["p"] == 4.0  # the same value twice is no conflict


@pytest.mark.parametrize(
    "text, message",
    [("q=3", "unknown parameter 'q'"), ("p", "NAME=VALUE"), ("p=abc", "not a number"), ("p=0", "positive"),
     ("p=-2", "positive"), ("=4", "NAME=VALUE"), ("p=nan", "is not a number"), ("p=4,n=2,p=8", "p is given twice"),
     # review 40: inf was "not positive", and 1e250 passed to a traceback where the parts' sum overflowed
     ("p=inf", "too large to predict at"), ("p=1e250", "values above 1e+30 are too large")],
)
def test_parse_at_errors_name_the_option(text, message):
    with pytest.raises(InputError, match="--at") as e:
        parse_at(text, PARAMS, {"p": 1.0, "n": 1.0})
    assert message in str(e.value)


def test_an_overflowing_parts_sum_is_no_contradiction_to_divide_by():
    """Review 40: `--at ranks=1e250` put an infinite parts' sum into `1 / ratio`: ZeroDivisionError."""
    from modeler.parts_growth import contradiction

    assert contradiction(1.0, math.inf) is None and contradiction(math.inf, 1.0) is None
    assert "3x more" in contradiction(1.0, 3.0)


def test_measured_maximum():
    s1 = Series("a", "time", np.array([[1, 10], [4, 20]]), (np.array([1.0]), np.array([2.0])))
    s2 = Series("b", "time", np.array([[8, 5]]), (np.array([1.0]),))
    assert measured_maximum(Dataset(PARAMS, [s1, s2])) == {"p": 8.0, "n": 20.0}


def test_efficiency_that_falls_fastest_ranks_first():
    def eff(name: str, coef: float, exp: float) -> FittedModel:
        m = Model(PARAMS, 1.0, (Term(coef, (Factor("p", exp),)),) if coef else ())
        return FittedModel(name, "parallel_efficiency", m, 1, 1, 1, None, 5)

    models = [eff("flat", 0.0, 0.0), eff("slow_fall", -0.01, 0.5), eff("fast_fall", -0.001, 1.0), eff("rises", 0.01, 0.5)]
    r = rank_models(models, PARAMS, {"p": 64.0, "n": 1.0})
    assert [row.fitted.callpath for row in r.rows] == ["fast_fall", "slow_fall", "flat", "rises"]


def test_prediction_below_zero_is_named_only_where_every_measured_value_was_at_least_zero():
    falls = fitted("falls", 10.0, (-2.0, (Factor("p", 0.0, 1),)))  # 10 - 2 log2(p): -10 at p=1024
    signed = fitted("signed", 10.0, (-2.0, (Factor("p", 0.0, 1),)))
    rises = fitted("rises", 1.0, (1.0, (Factor("p", 1.0),)))
    r = rank_models([falls, signed, rises], PARAMS, {"p": 1024, "n": 2},
                    nonnegative={("falls", "time"), ("rises", "time")})
    below = [w for w in r.warnings if "below zero" in w]
    assert len(below) == 1
    assert "falls (time) -10" in below[0] and "p=1024, n=2" in below[0]
    assert "signed" not in below[0] and "rises" not in below[0]
    # within the measured range it stays quiet
    assert not [w for w in rank_models([falls], PARAMS, {"p": 16, "n": 2},
                                       nonnegative={("falls", "time")}).warnings if "below zero" in w]


def test_nonnegative_keys_looks_at_every_repetition():
    pts = np.array([[1.0, 1.0], [2.0, 1.0]])
    series = [Series("pos", "time", pts, (np.array([1.0, 0.0]), np.array([2.0]))),
              Series("neg", "time", pts, (np.array([1.0, -0.1]), np.array([2.0])))]
    assert nonnegative_keys(series) == {("pos", "time")}
