"""How far off can a prediction be? The range drawn from the forms still in play.

Beyond the measured range a prediction is wrong mostly because another form explains the
measurements about as well and grows differently. Every fitted model carries its alternatives
(`FittedModel.alternatives`: the forms with their weights from the selection, the chosen one
among them, each with the covariance of its coefficients). At a point, each alternative's
prediction is taken as normal, centred on its value with the variance its coefficients give
there, and the alternatives are mixed by weight; `mixture_range` returns the central `level` of
that mixture (the 10% and 90% quantiles for 0.8). How often it holds the truth is measured by
`benchmarks/modeler_vs_extrap.py` (docs/modeling.md): the weights come from a selection tuned
to pick forms, so the range is a guide, not a calibrated interval (with one run per point the
covariances take the corrected noise of `modeler.pmnf.selection.range_noise`). The ranges shown with a
prediction are stretched to hold it (`with_prediction`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

_ITERATIONS = 60


def mixture_range(
    alternatives: Sequence, points: np.ndarray | Mapping[str, Sequence[float]], level: float = 0.8
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high), each of shape (n_points,): the (1 - level)/2 and (1 + level)/2 quantiles of the
    weighted mixture of the alternatives' predictions at the points."""
    tail = _tail(level)
    mu = np.array([a.model.evaluate(points) for a in alternatives])  # (A, n)
    var = np.array([np.einsum("nk,kl,nl->n", d, a.cov, d) for a, d in
                    ((a, a.model.design(points)) for a in alternatives)])
    sd = np.sqrt(np.maximum(var, 0.0))
    w = np.array([a.weight for a in alternatives], dtype=float)[:, None]
    w = np.broadcast_to(w / w.sum(), mu.shape)
    return _quantile(mu, sd, w, tail), _quantile(mu, sd, w, 1.0 - tail)


def mixture_ranges(
    models: Sequence[Sequence], point: Mapping[str, float], level: float = 0.8
) -> tuple[np.ndarray, np.ndarray]:
    """The same for many models at one point, in one vectorized pass: `models` lists each model's
    alternatives (an empty list gives nan); returns (low, high) of shape (len(models),)."""
    tail = _tail(level)
    A = max((len(a) for a in models), default=0)
    N = len(models)
    if A == 0:
        return np.full(N, np.nan), np.full(N, np.nan)
    mu, var, w = np.zeros((A, N)), np.zeros((A, N)), np.zeros((A, N))
    columns = {k: [float(v)] for k, v in point.items()}
    for j, alts in enumerate(models):
        for i, a in enumerate(alts):
            d = a.model.design(columns)[0]
            coef = np.array([a.model.constant] + [t.coefficient for t in a.model.terms])
            mu[i, j], var[i, j], w[i, j] = d @ coef, d @ a.cov @ d, a.weight
    total = w.sum(axis=0)
    empty = total == 0
    w = w / np.where(empty, 1.0, total)
    sd = np.sqrt(np.maximum(var, 0.0))
    lo, hi = _quantile(mu, sd, w, tail), _quantile(mu, sd, w, 1.0 - tail)
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)


def with_prediction(lo: np.ndarray, hi: np.ndarray, prediction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The range stretched to hold the model's own prediction. The chosen form can lie outside what
    the others predict (a form the selection weighed lightly, or refined exponents that no weighed
    form had); a range shown beside a prediction that it does not hold would read as a contradiction.
    Where the prediction is not finite, or there is no range (nan), it is left as it is."""
    ok = np.isfinite(prediction) & ~np.isnan(lo) & ~np.isnan(hi)
    return np.where(ok, np.fmin(lo, prediction), lo), np.where(ok, np.fmax(hi, prediction), hi)


def _tail(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    return (1.0 - level) / 2.0


def _quantile(mu: np.ndarray, sd: np.ndarray, w: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile per column of the mixture sum_a w_a N(mu_a, sd_a^2), by bisection on its CDF
    (a component with sd 0 is a step at its mean; one with weight 0 is padding).

    The bisection runs on u = asinh(x / scale), scale being the smallest component's size: one
    diverging form of little weight can stretch the bracket to 1e20 while the quantile is near 1,
    and halving a bracket that wide in x would never get down to it (relative steps in u do)."""
    used = w > 0
    lo = np.where(used, mu - 10.0 * sd, np.inf).min(axis=0)
    hi = np.where(used, mu + 10.0 * sd, -np.inf).max(axis=0)
    ok = np.isfinite(lo) & np.isfinite(hi)
    size = np.where(used, np.abs(mu) + sd, np.inf).min(axis=0)
    scale = np.where(ok & (size > 0) & np.isfinite(size), size, 1.0)
    lo, hi = np.where(ok, np.arcsinh(lo / scale), 0.0), np.where(ok, np.arcsinh(hi / scale), 0.0)
    safe_sd = np.where(sd > 0, sd, 1.0)
    for _ in range(_ITERATIONS):
        mid = 0.5 * (lo + hi)
        x = scale * np.sinh(mid)
        with np.errstate(invalid="ignore", over="ignore"):
            cdf_parts = np.where(sd > 0, normal_cdf((x[None] - mu) / safe_sd), (x[None] >= mu).astype(float))
        below = (w * cdf_parts).sum(axis=0) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return np.where(ok, scale * np.sinh(0.5 * (lo + hi)), np.nan)


_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
         -0.82215223, 0.17087277)


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2), from a Chebyshev fit of erfc (Numerical
    Recipes' erfcc: relative error below 1.2e-7). scipy.special.ndtr would do, but importing it
    costs a quarter of a second on every `modeler fit`."""
    z = -np.asarray(x, dtype=float) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * np.abs(z))
    poly = np.zeros_like(t)
    for c in reversed(_ERFC[1:]):
        poly = (poly + c) * t
    with np.errstate(under="ignore", over="ignore"):
        ans = t * np.exp(-z * z + _ERFC[0] + poly)
    return 0.5 * np.where(z >= 0, ans, 2.0 - ans)
