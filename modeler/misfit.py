"""A model that misses its own measurements: at one of the points it was fitted on, it lies more
than `MISS_FACTOR` away from every repetition measured there (review 25: a training function's
model said 0.517 s at a point whose three runs took 1.41 to 1.72 s, SMAPE 19.7%, and nothing in
the output said so). Such a model does not describe the data it came from, so its growth and its
predictions are not to be acted on (`ranking.doubt`).

The test takes every repetition, not their aggregate: noise that spreads the runs over a factor
of 2 at a point does not mark a model lying among them. It looks only at points measured at least
twice: one run cannot tell a change of regime from a straggler, and with one run per point (the
launcher's default) lone slow runs marked most models (review 31). And the factor grows with the
series' noise: beyond 2x, it must be more than `NOISE_SIGMAS` of the runs' spread (pooled over the
points, in log space), so that heavy noise over many points does not pass for a miss."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: a model further than this factor from every repetition at one of its measured points misses them
MISS_FACTOR = 2.0
#: how `miss_text` starts
MISS_PREFIX = "misses its own measurements: "
#: a point needs this many repetitions to be tested
MIN_REPETITIONS = 2
#: beyond `MISS_FACTOR`, a miss must be this many standard deviations of the series' log spread
NOISE_SIGMAS = 3.0


def threshold(repetitions: Sequence[np.ndarray]) -> float:
    """The factor a miss must exceed: `MISS_FACTOR`, or `NOISE_SIGMAS` standard deviations of the
    runs' log spread where that is more (the median over the points measured at least twice)."""
    return _threshold(_table(repetitions))


def worst_miss(fitted: np.ndarray, repetitions: Sequence[np.ndarray]) -> tuple[float, int] | None:
    """(factor, point index) of the point where the model's values `fitted` lie furthest outside the
    repetitions measured there, when that is more than the `threshold`; else None. A model at or
    below zero where every repetition is above zero misses by an infinite factor; points measured
    fewer than `MIN_REPETITIONS` times, or whose repetitions are not all above zero, are skipped."""
    R = _table(repetitions)
    f = np.asarray(fitted, dtype=float)
    if R.shape[1] < MIN_REPETITIONS:
        return None
    missing = np.isnan(R)
    counts = R.shape[1] - missing.sum(axis=1)
    lo = np.where(missing, np.inf, R).min(axis=1)
    hi = np.where(missing, -np.inf, R).max(axis=1)
    tested = (counts >= MIN_REPETITIONS) & (lo > 0) & np.isfinite(hi) & np.isfinite(f)
    if not tested.any():
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(f <= 0, np.inf, np.where(f < lo, lo / f, f / hi))
    factor = np.where(tested, factor, -np.inf)
    at = int(np.argmax(factor))
    if factor[at] <= MISS_FACTOR:  # the bar is never lower: most models stop here
        return None
    return (float(factor[at]), at) if factor[at] > _threshold(R) else None


def _table(repetitions: Sequence[np.ndarray]) -> np.ndarray:
    """The repetitions as a (points, most repetitions) array, NaN where a point has fewer (one
    array op per series instead of several per point: the test runs on every model)."""
    width = max(r.size for r in repetitions)
    if all(r.size == width for r in repetitions):
        return np.array(repetitions, dtype=float)
    table = np.full((len(repetitions), width), np.nan)
    for i, r in enumerate(repetitions):
        table[i, : r.size] = r
    return table


def _threshold(R: np.ndarray) -> float:
    missing = np.isnan(R)
    counts = R.shape[1] - missing.sum(axis=1)
    with np.errstate(invalid="ignore"):
        usable = (counts >= MIN_REPETITIONS) & np.all(missing | ((R > 0) & np.isfinite(R)), axis=1)
    if not usable.any():
        return MISS_FACTOR
    logs = np.log(np.where(missing, 1.0, R)[usable])  # padding: log 1 = 0, left out below
    present, n = ~missing[usable], counts[usable]
    mean = logs.sum(axis=1) / n
    sds = np.sqrt((((logs - mean[:, None]) * present) ** 2).sum(axis=1) / (n - 1))
    return max(MISS_FACTOR, math.exp(NOISE_SIGMAS * float(np.median(sds))))


def miss_text(factor: float, value: float, point: str, repetitions: np.ndarray) -> str:
    """`misses its measurements: 0.517 at batch=512, width=1024, where its 3 runs measured 1.41 to
    1.72 (2.7x)`."""
    lo, hi = float(np.min(repetitions)), float(np.max(repetitions))
    measured = f"{lo:.4g}" if repetitions.size == 1 else f"{lo:.4g} to {hi:.4g}"
    runs = "its run" if repetitions.size == 1 else f"its {repetitions.size} runs"
    how = "at or below zero" if not math.isfinite(factor) else f"{_factor(factor)}x off"
    return f"{MISS_PREFIX}{value:.4g} at {point}, where {runs} measured {measured} ({how})"


def _factor(x: float) -> str:
    """2.04, 2.004, 12.3, 123: never rounded to the 2 of "more than 2x", never in e-notation."""
    if x >= 100:
        return f"{x:.0f}"
    text = f"{x:.3g}"
    return f"{x:.4g}" if text == "2" else text  # 2.004: not "2" under "more than 2x" (review 32)
