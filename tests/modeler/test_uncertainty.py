"""The prediction range drawn from the forms in play (modeler.uncertainty, modeler.pmnf.alternatives)."""

from __future__ import annotations

import csv
import io
import json
import sys

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.model import Alternative, Factor, Model, Term
from modeler.outputs import render
from modeler.ranking import rank_models
from modeler.uncertainty import mixture_range

from _synthetic import make_case, target_point

PARAMS = ("p",)


def const(c: float, var: float, weight: float = 1.0) -> Alternative:
    return Alternative(weight, Model(PARAMS, c), np.array([[var]]))


def test_one_normal_form_gives_its_central_interval():
    lo, hi = mixture_range([const(10.0, 4.0)], np.array([[1.0], [2.0]]), 0.8)
    assert lo == pytest.approx([10.0 - 1.2815516 * 2.0] * 2, abs=1e-6)
    assert hi == pytest.approx([10.0 + 1.2815516 * 2.0] * 2, abs=1e-6)


def test_the_covariance_is_taken_at_the_point():
    # c0 + c1 * p with independent coefficient variances 1 and 0.25: variance 1 + 0.25 p^2
    alt = Alternative(1.0, Model(PARAMS, 1.0, (Term(2.0, (Factor("p", 1.0),)),)), np.diag([1.0, 0.25]))
    lo, hi = mixture_range([alt], np.array([[4.0]]), 0.5)
    sd = np.sqrt(1.0 + 0.25 * 16)
    assert (lo[0], hi[0]) == pytest.approx((9.0 - 0.6744898 * sd, 9.0 + 0.6744898 * sd), abs=1e-6)


def test_separate_exact_forms_split_by_weight():
    alts = [const(1.0, 0.0, 0.5), const(3.0, 0.0, 0.3), const(100.0, 0.0, 0.2)]
    lo, hi = mixture_range(alts, np.array([[1.0]]), 0.8)
    assert lo[0] == pytest.approx(1.0) and hi[0] == pytest.approx(100.0)
    lo, hi = mixture_range(alts, np.array([[1.0]]), 0.5)  # 25% and 75%: inside the first two
    assert lo[0] == pytest.approx(1.0) and hi[0] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="level"):
        mixture_range(alts, np.array([[1.0]]), 1.0)


def _fit(n_params, noise, seed, paths=100, **kw):
    funcs, pts, values = make_case(seed, n_params, paths, noise)
    names = funcs[0].model.parameters
    ds = Dataset(names, [Series(f"f{i}", "time", pts, tuple(values[i])) for i in range(paths)])
    return PMNFModeler(**kw).fit(ds), [f.model for f in funcs]


def test_alternatives_hold_the_chosen_model_and_weights_sum_to_one():
    est, _ = _fit(2, 0.05, 3, paths=30)
    assert len(est.models_) == 30
    for fm in est.models_:
        assert fm.alternatives
        assert sum(a.weight for a in fm.alternatives) == pytest.approx(1.0)
        assert any(a.model == fm.model for a in fm.alternatives)
        assert all(a.cov.shape == (1 + len(a.model.terms),) * 2 for a in fm.alternatives)
        assert [a.weight for a in fm.alternatives] == sorted((a.weight for a in fm.alternatives), reverse=True)


def test_noise_free_ranges_collapse_onto_the_prediction():
    est, truth = _fit(2, 0.0, 5, paths=40)
    at = target_point(2)
    assert len(est.models_) == len(truth) == 40
    for fm, t in zip(est.models_, truth):
        lo, hi = fm.prediction_range(at)
        exact = t.evaluate(at)[0]
        assert lo[0] == pytest.approx(exact, rel=1e-6) and hi[0] == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("n_params,noise", [(1, 0.05), (2, 0.05), (3, 0.02)])
def test_the_80_percent_range_holds_the_truth_about_that_often(n_params, noise):
    # fixed functions and noise: deterministic; the benchmark measures it on more (docs/modeling.md)
    est, truth = _fit(n_params, noise, 7)
    at = target_point(n_params)
    assert len(est.models_) == len(truth) == 100
    inside, widths = [], []
    for fm, t in zip(est.models_, truth):
        lo, hi = fm.prediction_range(at)
        true = t.evaluate(at)[0]
        inside.append(lo[0] <= true <= hi[0])
        widths.append((hi[0] - lo[0]) / true)
    assert 0.65 <= np.mean(inside) <= 0.95
    assert np.median(widths) > 0


def test_a_flat_series_keeps_only_its_constant():
    pts = np.array([[2.0], [4.0], [8.0], [16.0], [32.0]])
    rng = np.random.default_rng(0)
    reps = tuple(5.0 * (1 + rng.uniform(-0.05, 0.05, 5)) for _ in range(5))
    (fm,) = PMNFModeler().fit(Dataset(PARAMS, [Series("flat", "time", pts, reps)])).models_
    assert fm.model.terms == () and len(fm.alternatives) == 1
    lo, hi = fm.prediction_range(np.array([[128.0]]))
    assert lo[0] < fm.model.constant < hi[0]


def test_compat_mode_has_no_range_and_outputs_say_so():
    est, _ = _fit(1, 0.02, 9, paths=3, compat="extrap")
    assert len(est.models_) == 3
    assert all(fm.alternatives == () and fm.prediction_range(np.array([[64.0]])) is None for fm in est.models_)
    ranking = rank_models(est.models_, ("p",), {"p": 128.0})
    assert len(ranking.rows) == 3
    assert all(r.range is None for r in ranking.rows)
    doc = json.loads(render(ranking, "json"))
    assert len(doc["models"]) == 3
    assert all(m["prediction_range"] is None and m["alternatives"] == [] for m in doc["models"])


def test_outputs_carry_the_range():
    est, _ = _fit(1, 0.05, 11, paths=4)
    ranking = rank_models(est.models_, ("p",), {"p": 128.0})
    doc = json.loads(render(ranking, "json"))
    assert len(doc["models"]) == len(ranking.rows) == 4
    for m, row in zip(doc["models"], ranking.rows):
        lo, hi = m["prediction_range"]
        assert lo <= hi and (lo, hi) == pytest.approx(row.range)
        assert m["alternatives"][0]["weight"] > 0 and "model" in m["alternatives"][0]
    rows = list(csv.DictReader(io.StringIO(render(ranking, "csv"))))
    assert len(rows) == 4
    assert all(float(r["range_low"]) <= float(r["range_high"]) for r in rows)
    table = render(ranking, "table")
    assert "80% range" in table.splitlines()[1]


def test_top_hypotheses_keep_the_heaviest_and_drop_negligible_ones():
    from modeler.pmnf.alternatives import MIN_SHARE, normalize, top_hypotheses

    logw = np.array([[0.0, -1.0, np.log(MIN_SHARE) - 1.0, -np.inf, -0.5]])
    coef = np.arange(5 * 2, dtype=float).reshape(1, 5, 2)
    cov = np.zeros((1, 5, 2, 2))
    top = top_hypotheses(logw, coef, cov, k=4)
    assert top.index[0].tolist() == [0, 4, 1, -1]  # the 4th heaviest is below MIN_SHARE of the first
    assert top.coef[0, 1].tolist() == [8.0, 9.0]
    alts = normalize([(-1.0, ["a"], np.zeros(1), np.zeros((1, 1))), (0.0, ["b"], np.zeros(1), np.zeros((1, 1))),
                      (0.5, ["a"], np.ones(1), np.zeros((1, 1)))])
    # "a" twice: the first entry's fit, the larger weight; heaviest first
    assert [a[1] for a in alts] == [["a"], ["b"]] and alts[0][2][0] == 0.0
    assert alts[0][0] == pytest.approx(np.exp(0.5) / (np.exp(0.5) + 1.0))


def test_many_models_at_once_match_one_at_a_time():
    from modeler.uncertainty import mixture_ranges

    est, _ = _fit(2, 0.05, 13, paths=25)
    at = {"p": 128.0, "n": 100.0}
    lo, hi = mixture_ranges([fm.alternatives for fm in est.models_] + [()], at)
    for j, fm in enumerate(est.models_):
        one = fm.prediction_range(np.array([[128.0, 100.0]]))
        assert (lo[j], hi[j]) == pytest.approx((one[0][0], one[1][0]), rel=1e-9)
    assert np.isnan(lo[-1]) and np.isnan(hi[-1])  # no alternatives: no range


def test_normal_cdf_matches_erfc_to_the_stated_accuracy():
    import math

    from modeler.uncertainty import normal_cdf

    x = np.linspace(-12.0, 12.0, 4001)
    ref = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])
    assert np.all(np.abs(normal_cdf(x) - ref) <= 1.2e-7 * ref + 1e-300)


def test_ranking_does_not_import_scipy():
    import subprocess

    code = "import sys, modeler.ranking, modeler.uncertainty; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
