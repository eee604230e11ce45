"""How far beyond the measured range a prediction reaches, against how wide that range is.

Forms that agree on a narrow range part ways quickly beyond it: values of n from 100 to 140 span
a factor of 1.4, and at 4x their largest value (560) the prediction reaches four times that span
further, on a log scale, where the measured points tell the forms apart by little (review 61 F6:
up to 7.3x off, and nothing said so). A sweep of ranks 1 to 16 predicted at 1024 reaches 1.5 times
its span; that is what the measurements are for, and is not warned of.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from .listing import listing
from .pointtext import param_text

#: a target that lies further beyond the measured values, on a log scale, than this many times
#: their own span is named in a warning
FAR_REACH = 2.0


def reach(low: float, high: float, value: float) -> float:
    """How far `value` lies outside [low, high] on a log scale, in units of log(high / low): 0
    inside, and where the values are not all positive (no log scale); inf for one value."""
    if not (0 < low <= high and value > 0):
        return 0.0
    out = max(math.log(value / high), math.log(low / value), 0.0)
    if out == 0.0:
        return 0.0
    return out / math.log(high / low) if high > low else math.inf


def far_target_warning(parameters: Sequence[str], points: Sequence[np.ndarray], target: Mapping[str, float]
                       ) -> str | None:
    """A warning naming the parameters whose target value (`--at`) lies more than `FAR_REACH` times
    their measured span beyond it, on a log scale, or None."""
    if not points or not parameters:
        return None
    union = np.concatenate([np.asarray(p, dtype=float).reshape(-1, len(parameters)) for p in points])
    if not union.size:
        return None
    named = []
    for j, name in enumerate(parameters):
        if name not in target:
            continue
        low, high, at = float(union[:, j].min()), float(union[:, j].max()), float(target[name])
        if low == high or (far := reach(low, high, at)) <= FAR_REACH:
            continue
        named.append(f"{name}={param_text(at)} lies {far:.1f} times the span of its measured values ({param_text(low)} to {param_text(high)}) "
                     f"beyond them")
    if not named:
        return None
    return (f"the target lies far beyond the measured range, on a log scale: {listing(named, 5)}; forms that fit "
            f"the measurements alike part ways there, so the predictions are rough: measure over a wider range")
