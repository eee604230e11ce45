"""One parameter, noisy values: the exponent by leave-one-out error (`selection.loo_when_noisy`)."""

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf import default_mode
from modeler.pmnf.selection import loo_when_noisy

from _synthetic import make_case, target_point

N_COEF = np.array([1, 2, 2, 2])  # hypothesis 0: the constant; 1-3: one term each
LOO = np.array([[9.0, 5.0, 1.0, 3.0]] * 4)


def test_switches_only_noisy_series_that_chose_a_term():
    chosen = np.array([1, 1, 0, 1])
    noise = np.array([0.03**2, 0.01**2, 0.03**2, np.nan])  # noisy; quiet; noisy but constant; unknown
    assert loo_when_noisy(chosen, LOO, N_COEF, noise, 0.02).tolist() == [2, 1, 0, 1]


def test_unusable_hypotheses_are_never_taken():
    loo = LOO.copy()
    loo[0, 2] = np.inf
    assert loo_when_noisy(np.array([1]), loo[:1], N_COEF, np.array([0.05**2]), 0.02).tolist() == [3]
    nothing = np.full((1, 4), np.inf)
    assert loo_when_noisy(np.array([1]), nothing, N_COEF, np.array([0.05**2]), 0.02).tolist() == [1]


def _errors(noise, seeds, threshold, monkeypatch):
    monkeypatch.setattr(default_mode, "LOO_FROM_NOISE", threshold)
    out, models = [], []
    for seed in seeds:
        funcs, pts, values = make_case(seed, 1, 100, noise)
        ds = Dataset(funcs[0].model.parameters, [Series(f"f{i}", "time", pts, tuple(values[i])) for i in range(len(funcs))])
        fitted = [m.model for m in PMNFModeler().fit(ds).models_]
        at = target_point(1)
        out += [abs(m.evaluate(at)[0] - f.model.evaluate(at)[0]) / f.model.evaluate(at)[0] for m, f in zip(fitted, funcs)]
        models += [m.formula() for m in fitted]
    return np.array(out), models


def test_at_ten_percent_noise_it_cuts_the_extrapolation_error(monkeypatch):
    # four fixed sets other than the two the threshold was chosen on (make_case seeds 2 and 12)
    seeds = (32, 42, 52, 62)
    on, _ = _errors(0.10, seeds, 0.02, monkeypatch)
    off, _ = _errors(0.10, seeds, None, monkeypatch)
    assert np.median(on) < np.median(off)
    assert np.percentile(on, 90) < np.percentile(off, 90)


@pytest.mark.parametrize("noise", [0.0, 0.02])
def test_low_noise_models_are_untouched(noise, monkeypatch):
    on = _errors(noise, (32,), 0.02, monkeypatch)[1]
    off = _errors(noise, (32,), None, monkeypatch)[1]
    assert on == off
