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
    sds = [float(np.std(np.log(r), ddof=1)) for r in repetitions
           if r.size >= MIN_REPETITIONS and np.all(r > 0) and np.all(np.isfinite(r))]
    return max(MISS_FACTOR, math.exp(NOISE_SIGMAS * float(np.median(sds)))) if sds else MISS_FACTOR


def worst_miss(fitted: np.ndarray, repetitions: Sequence[np.ndarray]) -> tuple[float, int] | None:
    """(factor, point index) of the point where the model's values `fitted` lie furthest outside the
    repetitions measured there, when that is more than the `threshold`; else None. A model at or
    below zero where every repetition is above zero misses by an infinite factor; points measured
    fewer than `MIN_REPETITIONS` times, or whose repetitions are not all above zero, are skipped."""
    worst, at = threshold(repetitions), -1
    for i, (f, reps) in enumerate(zip(fitted, repetitions)):
        if reps.size < MIN_REPETITIONS:
            continue
        lo, hi = float(np.min(reps)), float(np.max(reps))
        if not (lo > 0 and math.isfinite(hi)) or not math.isfinite(f):
            continue
        factor = lo / f if 0 < f < lo else (math.inf if f <= 0 else f / hi)
        if factor > worst:
            worst, at = factor, i
    return None if at < 0 else (worst, at)


def miss_text(factor: float, value: float, point: str, repetitions: np.ndarray) -> str:
    """`misses its measurements: 0.517 at batch=512, width=1024, where its 3 runs measured 1.41 to
    1.72 (2.7x)`."""
    lo, hi = float(np.min(repetitions)), float(np.max(repetitions))
    measured = f"{lo:.4g}" if repetitions.size == 1 else f"{lo:.4g} to {hi:.4g}"
    runs = "its run" if repetitions.size == 1 else f"its {repetitions.size} runs"
    how = "at or below zero" if not math.isfinite(factor) else f"{_factor(factor)}x off"
    return f"{MISS_PREFIX}{value:.4g} at {point}, where {runs} measured {measured} ({how})"


def _factor(x: float) -> str:
    """2.04, 12.3, 123: never rounded down to the 2 of "more than 2x", never in e-notation."""
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"
