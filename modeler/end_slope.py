"""Where the values' growth between the two largest measured values of a parameter parts from the
model's: the model fits its points within a few percent and still predicts far off beyond them.

A sum of two growing terms in one parameter (`1e-6 n^2 + 1e-3 n`, attention's cost) is fitted as
one term (`n^(7/4)`): within 2.4% of every point, 48% low at 16x the largest `n`, with no warning
(review 104 H1; the lack-of-fit test reads a model within `misfit.LACK_MIN` of its points as it
stands). What gives it away is the end of the sweep: there the values grow as `n^1.85`, the model
as `n^1.74`. This module compares the two local exponents (log-log slopes) along each parameter,
on the line of points that reaches its largest value, and says where they differ by more than
`SLOPE_GAP` and by more than `SLOPE_Z` standard errors of the measured slope (from the repetition
spread, pooled over the points, or, with one run a point, from the model's own residuals).
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from .misfit import MEDIAN_SE
from .pointtext import param_text, point_text

#: the least difference of exponents said (x^1.75 against x^1.85 is 5% per doubling)
SLOPE_GAP = 0.1
#: ... and the least number of standard errors of the measured slope it must be
SLOPE_Z = 3.0
#: the floor of a value's relative standard error (exact data: rounding, not noise)
MIN_SE = 0.002


def end_slope_note(params: Sequence[str], points: np.ndarray, values: np.ndarray, spread: np.ndarray,
                   counts: np.ndarray, model, name: str = "") -> str | None:
    """The note for the first parameter along which the measured slope at the largest values parts
    from the model's (`model`: a `Model` of the series' points; `values`, `spread`, `counts`: its
    `repstats.PointStats`; `name`: the series' own, which the note starts with), or None."""
    pts = np.asarray(points, dtype=float)
    vals = np.asarray(values, dtype=float)
    for j, p in enumerate(params):
        line = _top_line(pts, j)
        if line is None:
            continue
        i1, i2 = line
        x1, x2 = pts[i1, j], pts[i2, j]
        with np.errstate(all="ignore"):
            m1, m2 = (float(v) for v in model.evaluate(pts[[i1, i2]]))
        v1, v2 = float(vals[i1]), float(vals[i2])
        if not (v1 > 0 and v2 > 0 and m1 > 0 and m2 > 0 and math.isfinite(m1) and math.isfinite(m2)):
            continue
        step = math.log(x2 / x1)
        measured, fitted = math.log(v2 / v1) / step, math.log(m2 / m1) / step
        gap = measured - fitted
        if abs(gap) < SLOPE_GAP:
            continue
        se = math.hypot(*(_value_se(k, pts, vals, spread, counts, model) for k in (i1, i2))) / step
        if abs(gap) < SLOPE_Z * se:
            continue
        # the values as measured, and the other parameters where the line holds them (review 106
        # LOW-2: `n=1.04858e+06` for 1048576; LOW-6: on an irregular grid not always their largest)
        held = [k for k in range(len(params)) if k != j]
        at = f" ({point_text([params[k] for k in held], [pts[i2, k] for k in held])})" if held else ""
        top = f"{p}={param_text(x2)}"
        where = f"between {p}={param_text(x1)} and {top}{at}"
        said = (f"{name}: {where}" if name else where) + (
            f" the values {_goes(measured)} as {p}^{measured:.2f}, the model as {p}^{fitted:.2f}: ")
        return said + _parting(gap, measured, fitted, p) + (
            f", so its predictions beyond {top} are likely {_direction(pts, i2, j, model, measured, gap)}")
    return None


def _direction(pts: np.ndarray, i2: int, j: int, model, measured: float, gap: float) -> str:
    """'low' or 'high': the model's own growth from the largest value of parameter `j` to 4x it
    against the measured slope carried on (review 113: a model that turns up just beyond the sweep
    was said to be likely low from its slope at the end, where it was 25x too high). Where the
    model cannot be evaluated there, the sign of `gap`."""
    m2, m4 = _here_and_4x(pts, i2, j, model)
    if not (math.isfinite(m4) and m2 > 0):
        return "low" if gap > 0 else "high"
    if m4 <= 0:
        return "low"
    return "low" if math.log(m4 / m2) / math.log(4.0) < measured else "high"


def _here_and_4x(pts: np.ndarray, k: int, j: int, model) -> tuple[float, float]:
    """The model's values at point `k` and there with parameter `j` 4x larger."""
    far = pts[[k]].copy()
    far[0, j] *= 4.0
    with np.errstate(all="ignore"):
        return float(model.evaluate(pts[[k]])[0]), float(model.evaluate(far)[0])


def _goes(slope: float) -> str:
    return "fall" if slope < 0 else "grow"


def _parting(gap: float, measured: float, fitted: float, p: str) -> str:
    """How the values part from the model, in words that hold for rising and falling values alike
    (review 106 LOW-6: "the growth steepens" where both fell, the values the more slowly)."""
    if gap > 0:
        if measured <= 0:
            return "the values fall more slowly than the model"
        if fitted < 0:
            return "the values rise where the model falls"
        return (f"the growth steepens beyond the model's (a sum of terms, such as a*{p} + b*{p}^2 or a/{p} + b*{p}, "
                "is fitted as one term)")
    if fitted <= 0:
        return "the values fall faster than the model"
    if measured < 0:
        return "the values fall where the model rises"
    return "the growth eases off below the model's"


def _top_line(pts: np.ndarray, j: int) -> tuple[int, int] | None:
    """The indices of the two largest values of parameter `j` on the line of points (the others
    held) that reaches its largest value, with at least 3 values above 0 on it; else None. Series
    measured at the same points share it (one search per set of points and parameter: 20% of a
    3-parameter fit's time before)."""
    return _top_line_of(pts.tobytes(), pts.shape, j)


@functools.lru_cache(maxsize=256)
def _top_line_of(raw: bytes, shape: tuple[int, ...], j: int) -> tuple[int, int] | None:
    pts = np.frombuffer(raw, dtype=float).reshape(shape)
    others = np.delete(pts, j, axis=1)
    _, line_of = np.unique(others, axis=0, return_inverse=True)
    line_of = np.asarray(line_of).reshape(-1)
    best = None
    for line in np.unique(line_of):
        on = np.flatnonzero((line_of == line) & (pts[:, j] > 0))
        xs = pts[on, j]
        distinct = len(np.unique(xs))
        if distinct < 3 or distinct < len(xs):
            continue
        rank = (float(xs.max()), len(xs), tuple(others[on[0]]))
        if best is None or rank > best[0]:
            order = on[np.argsort(xs)]
            best = (rank, (int(order[-2]), int(order[-1])))
    return None if best is None else best[1]


def _value_se(k: int, pts: np.ndarray, vals: np.ndarray, spread: np.ndarray, counts: np.ndarray, model) -> float:
    """The relative standard error of point `k`'s value: the runs' spread, pooled over the points
    measured more than once (the root mean square: the spread of 5 runs alone is too noisy a
    measure, and a point whose runs happened to agree said 10% noise was 5%), over the square root
    of its runs; or, with one run there, the model's relative residuals over every point (which hold
    any misfit too, so the test is then the more cautious), on the points less the model's
    coefficients (review 106 LOW-5: a fit of several terms shrinks its own residuals, and two
    neighbours 2.5 sigma apart by chance got a note, in the wrong direction)."""
    if counts[k] >= 2:
        repeated = np.asarray(counts) >= 2
        pooled = float(np.sqrt(np.mean(np.square(np.asarray(spread, dtype=float)[repeated]))))
        return max(MEDIAN_SE * pooled / math.sqrt(counts[k]), MIN_SE)
    with np.errstate(all="ignore"):
        fitted = model.evaluate(pts)
        r = np.log(vals / fitted)
    r = r[np.isfinite(r)]
    free = r.size - 1 - len(model.terms)
    return max(float(np.sqrt(np.sum(r * r) / free)) if free > 0 else math.inf, MIN_SE)


#: the least rise from the largest measured value to 4x it that `unseen_rise_note` says
RISE_SAID = 1.1


def unseen_rise_note(params: Sequence[str], points: np.ndarray, values: np.ndarray, spread: np.ndarray,
                     counts: np.ndarray, model, param: str, name: str = "") -> str | None:
    """The note for a model that turns up again beyond the largest value of `param` (at 4x it, at
    least `RISE_SAID` times its value there) where the measured values, on the line of points that
    reaches that value, do not rise: the value there is within 3 standard errors of a difference
    of the line's smallest (review 113: `max(9.3 / ranks, 0.61)` over ranks 1 to 16 was fitted as
    `9.269 * ranks^(-1) + 2.937e-05 * ranks^2 * log2(ranks)`, 25x the truth at 16x the ranks, and
    the only note said its predictions were likely low). None otherwise."""
    if param not in params:
        return None
    j = list(params).index(param)
    pts = np.asarray(points, dtype=float)
    vals = np.asarray(values, dtype=float)
    line = _top_line(pts, j)
    if line is None:
        return None
    top = line[1]
    on = np.flatnonzero(np.all(np.delete(pts, j, axis=1) == np.delete(pts[top], j), axis=1))
    m_top, m_far = _here_and_4x(pts, top, j, model)
    if not (m_top > 0 and math.isfinite(m_far) and m_far > RISE_SAID * m_top):
        return None
    if not (vals[on] > 0).all():
        return None
    se = _value_se(top, pts, vals, spread, counts, model)
    if math.log(vals[top] / vals[on].min()) > 3.0 * math.sqrt(2.0) * se:
        return None  # the values turn up within the sweep: the rise is measured
    held = [k for k in range(len(params)) if k != j]
    at = f" ({point_text([params[k] for k in held], [pts[top, k] for k in held])})" if held else ""
    x2 = f"{param}={param_text(pts[top, j])}"
    said = (f"the model turns up beyond {x2}{at}: {m_far:.4g} at {param}={param_text(4.0 * pts[top, j])}, "
            f"{m_far / m_top:.1f}x its value at {x2}, but the measured values do not rise: the rise comes from how "
            f"the fall slows, not from the values; measure beyond {x2} before trusting it")
    return f"{name}: {said}" if name else said
