"""A point that the relative fit hinges on: a value near zero among larger ones (review 85 F4).

The default mode weighs each value by 1/y² (`pmnf.single.relative_weights`): run-time noise is
multiplicative. A value near zero but not zero (a region barely entered at the smallest point, a
timer's resolution) then takes nearly all of the weight and pins the fit: `0.1 * x^2` over x = 1..16
with its first value 1e-6 came back as `-0.062 + 0.062 * x^(9/4)`, 76% high at x = 64, with nothing
said but the miss (`modeler.misfit`). A series with a value of exactly 0 has its values floored at a
tenth of its median (`single.relative_weights`). The weighting stays (a floor on it moved the
benchmark); the model names the point instead.

A point is named where it carries more than half of the fit's total weight and the others, fitted
with the same form without it, put it at more than `NEAR_ZERO` times its size. Weight alone does not
tell: in a relative fit the smallest value of a growing series often carries most of it (1/y² of
y = x² over x = 2..32: 94% on the first point; y = 1 + 0.5 x: 60%), and that is how relative errors
work, not a fault.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .pmnf.fit import GroupFit
from .pmnf.lstsq import wls
from .pmnf.single import weight_scale
from .pointtext import point_text

#: a point carrying more than this share of a fit's total weight is looked at
HEAVY_SHARE = 0.5
#: ... and named where the other points put it at more than this many times its size
NEAR_ZERO = 10.0


def heavy_points(g: GroupFit) -> list[tuple[int, float, float] | None]:
    """Per series of the fit, (the point it hinges on, that point's share of the total weight, the
    value the other points put there), or None. The refits without the point are one batched solve
    for the series that have a point over `HEAVY_SHARE`."""
    S, n = g.w.shape
    out: list[tuple[int, float, float] | None] = [None] * S
    total = g.w.sum(axis=1)
    top = np.argmax(g.w, axis=1)
    rows = np.arange(S)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = g.w[rows, top] / total
    used = (np.abs(g.X) > 0).any(axis=1).sum(axis=1)  # the coefficients each model has
    look = np.flatnonzero((share > HEAVY_SHARE) & (n - 1 >= used))
    if not look.size:
        return out
    w = g.w[look].copy()
    w[np.arange(look.size), top[look]] = 0.0
    res = wls(g.X[look], g.y[look], w)
    with np.errstate(invalid="ignore", over="ignore"):
        there = np.einsum("rk,rk->r", g.X[look, top[look]], res.coef)
        # its size as the fit weighs it: |value|, or for a series with a 0 the floor the weights
        # give it (a 0 the others put near 0 was named before: review 111)
        size = weight_scale(g.y[look])[np.arange(look.size), top[look]]
        near = np.isfinite(there) & (np.abs(there) > NEAR_ZERO * size)
    for j in np.flatnonzero(near):
        s = int(look[j])
        out[s] = (int(top[s]), float(share[s]), float(there[j]))
    return out


def heavy_note(params: Sequence[str], point: np.ndarray, value: float, share: float, there: float) -> str:
    """The warning of a model whose fit hinges on one value near zero (`heavy_points`)."""
    return (f"the value at ({point_text(params, point)}) is near zero against the others ({value:.3g}; "
            f"the other points put it at {there:.3g}): it carries {100 * share:.3g}% of the weight of "
            f"the relative fit, and the model hinges on it; check it, or leave that point out")
