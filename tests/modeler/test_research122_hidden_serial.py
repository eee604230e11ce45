"""Research 122: Amdahl's c + W * g / 48 / ranks beside a 2-valued `g` (modeled as constant in g).
The fits hold `g` constant, so its effect rules their residuals: the engine's fit of values x ranks
kept W/ranks alone (the serial part lost: 93% low at 16x the ranks), and the plain fit was
`a - b * log2(ranks)`, below 0 at 16x the ranks, kept because W/ranks failed the CV margin against
it. Both now give way to c + W/ranks where the tests per value of `g` say so
(`strong_scaling._hidden_serial`, `strong_scaling._below_zero`)."""

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler

RANKS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
PTS = np.array([(r, g) for r in RANKS for g in (48.0, 96.0)])


def _model(c, W, seed, runs=5, noise=0.01):
    rng = np.random.default_rng(seed)
    t = (c + W * PTS[:, 1] / 48 / PTS[:, 0])[:, None] * (1 + noise * rng.standard_normal((len(PTS), runs)))
    return PMNFModeler().fit(Dataset(("ranks", "g"), [Series("main->f", "time", PTS, tuple(t))])).models_[0]


def _is_amdahl(model):
    (term,) = model.terms
    (factor,) = term.factors
    return model.constant > 0 and factor.parameter == "ranks" and factor.exponent == -1 and not factor.log_exponent


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("c, W", [(0.5, 13.3), (1.0, 20.0)])  # W/ranks alone; a - b * log2(ranks) before
def test_amdahl_beside_a_two_valued_parameter_keeps_its_serial_part(c, W, seed):
    fm = _model(c, W, seed)
    assert _is_amdahl(fm.model), str(fm.model)
    true = c + W / 512
    assert fm.predict(np.array([[512.0, 48.0]]))[0] == pytest.approx(true, rel=0.25)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_perfect_strong_scaling_beside_a_two_valued_parameter_gets_no_serial_part(seed):
    fm = _model(0.0, 20.0, seed)
    assert fm.model.constant == 0 or fm.predict(np.array([[512.0, 48.0]]))[0] < 3 * 20.0 / 512, str(fm.model)
