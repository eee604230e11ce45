"""Quantiles of the F and Student's t distributions for the modeler's tests, without scipy
(importing scipy.stats would cost more than the whole fit): F from the regularized incomplete beta
function by bisection, t from F(1, nu)."""

from __future__ import annotations

import functools
import math

import numpy as np


def _beta_cf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes
    6.4)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _beta_cdf(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


@functools.lru_cache(maxsize=256)
def f_quantile(d1: float, d2: float, q: float) -> float:
    """The `q` quantile of Fisher's F(d1, d2), from the beta distribution's by bisection (scipy.stats
    would cost more to import than the whole fit)."""
    a, b = 0.5 * d1, 0.5 * d2
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if _beta_cdf(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    x = 0.5 * (lo + hi)
    return d2 * x / (d1 * (1.0 - x)) if x < 1.0 else math.inf


def f_quantiles(d1: float, d2: np.ndarray, q: float) -> np.ndarray:
    """`f_quantile` for each of the denominator degrees of freedom `d2` (S,)."""
    values, inverse = np.unique(d2, return_inverse=True)
    return np.array([f_quantile(d1, float(d), q) for d in values])[inverse.reshape(-1)]


def t_quantiles(p: float, nu: np.ndarray) -> np.ndarray:
    """The `p` (> 0.5) quantile of Student's t for each of the degrees of freedom `nu` (S,):
    t^2 with nu degrees of freedom is F(1, nu)."""
    return np.sqrt(f_quantiles(1.0, np.asarray(nu, dtype=float), 2.0 * p - 1.0))
