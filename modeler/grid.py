"""Which combinations of the measured parameter values were measured: a sweep point that is
missing altogether (a configuration that failed in every repetition, or was never run) is named,
since each series is modeled on the points it has and nothing else would say so."""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from .listing import listing

#: the points are taken for a sweep with holes when they cover at least this share of the grid
GRID_SHARE = 0.5


def grid_gaps_warning(parameters: Sequence[str], points: Sequence[np.ndarray]) -> str | None:
    """A warning naming the combinations of the measured values of `parameters` that no series
    was measured at, or None when the points (each an (n, len(parameters)) array) fill the grid or
    cover less than `GRID_SHARE` of it."""
    if len(parameters) < 2 or not points:
        return None
    measured = {tuple(float(v) for v in row) for pts in points for row in np.asarray(pts, dtype=float)}
    values = [sorted({pt[j] for pt in measured}) for j in range(len(parameters))]
    size = int(np.prod([len(v) for v in values]))
    # a design that measures much less than the grid on purpose (Extra-P's lines through one
    # point) is not a sweep with holes
    if len(measured) >= size or len(measured) < GRID_SHARE * size:
        return None
    missing = [", ".join(f"{p}={v:g}" for p, v in zip(parameters, combo))
               for combo in itertools.product(*values) if combo not in measured]
    shape = " x ".join(f"{p} ({len(v)} values)" for p, v in zip(parameters, values))
    return (f"the measurements are not a full grid: {len(measured)} of the {size} combinations of {shape}; "
            f"not measured: {listing(['(' + m + ')' for m in missing], 5)}")
