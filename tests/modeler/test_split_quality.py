"""The fit quality reported with a model is that model's own (review 114): where the strong-scaling
step replaces the engine's model of values x ranks by c + W/ranks (a plain constant split, or a
rise beyond the ranks that the values do not show), its SMAPE, RSS, adjusted R^2 and
cross-validated error were still those of the model it replaced: 15.66% printed for
`0.05933 + 51.03 * ranks^(-1)`, whose own SMAPE is 14.96%."""

from __future__ import annotations

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.estimator import PMNFModeler
from modeler.pmnf.single import smape_terms

RANKS = (2, 4, 8, 16, 32, 64, 128)


def _series(name: str, f, ranks=RANKS, noise: float = 0.0, seed: int = 0) -> Series:
    rng = np.random.default_rng(seed)
    pts = np.array([[r] for r in ranks], dtype=float)
    return Series(name, "time", pts, tuple((f(r) * (1 + rng.uniform(-noise, noise)),) for r in ranks))


def _values(series: Series) -> np.ndarray:
    return np.array([v[0] for v in series.repetitions])


def _own_smape(fm, series: Series) -> float:
    return float(smape_terms(fm.model.evaluate(series.points), _values(series)).mean())


def _own_quality(fm, series: Series) -> tuple[float, float, float]:
    """SMAPE, RSS and adjusted R^2 of the model `fm` against its one-run values."""
    y = _values(series)
    pred = fm.model.evaluate(series.points)
    n, k = len(y), len(fm.model.terms)
    rss = float(np.sum((y - pred) ** 2))
    r2 = 1.0 - rss / float(np.sum((y - y.mean()) ** 2))
    return _own_smape(fm, series), rss, 1.0 - (1.0 - r2) * (n - 1) / (n - k - 1)


def _is_c_plus_w_over_ranks(model) -> bool:
    return (len(model.terms) == 1 and model.constant > 0
            and [(f.parameter, f.exponent, f.log_exponent) for f in model.terms[0].factors] == [("ranks", -1.0, 0)])


def test_a_split_constant_reports_the_quality_of_c_plus_w_over_ranks():
    """Review 109's noise-free fall faster than 1/ranks: PMNF gives a constant, the strong-scaling
    step splits it as c + W/ranks, and the SMAPE, RSS and adjusted R^2 said are that model's."""
    s = _series("fall", lambda r: 100 * r ** -1.5 + 5 * r ** -0.5)
    (fm,) = PMNFModeler().fit(Dataset(("ranks",), [s])).models_
    assert _is_c_plus_w_over_ranks(fm.model), fm.model.formula()
    smape, rss, ar2 = _own_quality(fm, s)
    assert fm.smape == pytest.approx(smape, rel=1e-9)
    assert fm.rss == pytest.approx(rss, rel=1e-9)
    assert fm.ar2 == pytest.approx(ar2, rel=1e-9)


@pytest.mark.parametrize("scale", [1e-200, 1.0, 1e200])
def test_every_strong_scaling_model_reports_its_own_smape_at_any_magnitude(scale):
    """Over series the step keeps, splits or replaces (falls, floors, Amdahl, U shapes; one run),
    each model's SMAPE is its own, at values of 1e-200 and 1e200 too (fitted at a power-of-two
    scale near 1)."""
    shapes = [lambda r: 9.0 / r, lambda r: max(30.0 / r, 0.6), lambda r: 0.3 + 5.0 / r,
              lambda r: 100.0 / r + 0.5 * r, lambda r: 100 * r ** -1.5 + 5 * r ** -0.5]
    series = [_series(f"s{i}-{seed}", lambda r, f=f: scale * f(r), (1, 2, 3, 4, 6, 8, 12, 16), 0.02, seed)
              for i, f in enumerate(shapes) for seed in range(8)]
    fitted = PMNFModeler().fit(Dataset(("ranks",), series)).models_
    assert any(_is_c_plus_w_over_ranks(fm.model) for fm in fitted)
    for fm, s in zip(fitted, series):
        assert fm.smape == pytest.approx(_own_smape(fm, s), rel=1e-6, abs=1e-9), (s.callpath, fm.model.formula())


def test_the_strong_scaling_step_gives_the_same_models_at_any_magnitude():
    """The step decides on both families at one power-of-two scale near 1: at 1e200, c + W/ranks's
    fit overflowed (NaN coefficients), so the U shape 100/r + 0.5 r over ranks 1..16 was split as
    c + W/r at 1 and kept its rise at 1e200 and 1e-200."""
    shapes = [lambda r: 100.0 / r + 0.5 * r, lambda r: max(30.0 / r, 0.6), lambda r: 100 * r ** -1.5 + 5 * r ** -0.5]
    forms = {}
    for scale in (1e-200, 1.0, 1e200):
        series = [_series(f"s{i}-{seed}", lambda r, f=f: scale * f(r), (1, 2, 3, 4, 6, 8, 12, 16), 0.02, seed)
                  for i, f in enumerate(shapes) for seed in range(6)]
        fitted = PMNFModeler().fit(Dataset(("ranks",), series)).models_
        forms[scale] = [([(t.factors, t.coefficient / scale) for t in fm.model.terms], fm.model.constant / scale)
                        for fm in fitted]
    for low, one, high in zip(forms[1e-200], forms[1.0], forms[1e200]):
        for other in (low, high):
            assert [f for f, _ in other[0]] == [f for f, _ in one[0]]
            assert [c for _, c in other[0]] + [other[1]] == pytest.approx([c for _, c in one[0]] + [one[1]], rel=1e-9)
