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
    # values that print alike are one value (0.3 and 0.30000000000000004 from two inputs)
    measured = {tuple(float(f"{v:.12g}") for v in row) for pts in points for row in np.asarray(pts, dtype=float)}
    values = [sorted({pt[j] for pt in measured}) for j in range(len(parameters))]
    size = int(np.prod([len(v) for v in values]))
    # a design that measures much less than the grid on purpose is not a sweep with holes, nor
    # Extra-P's lines through one point (a 3 x 3 cross measures 5 of 9)
    if len(measured) >= size or len(measured) < GRID_SHARE * size or _lines_through_one_point(measured):
        return None
    missing = [", ".join(f"{p}={v:g}" for p, v in zip(parameters, combo))
               for combo in itertools.product(*values) if combo not in measured]
    shape = " x ".join(f"{p} ({len(v)} values)" for p, v in zip(parameters, values))
    return (f"the measurements are not a full grid: {len(measured)} of the {size} combinations of {shape}; "
            f"not measured: {listing(['(' + m + ')' for m in missing], 5)}")


def _lines_through_one_point(measured: set[tuple[float, ...]]) -> bool:
    """Whether every point differs from one of them in at most one coordinate."""
    if len(measured) > 2_000:
        return False
    pts = np.array(sorted(measured))
    differ = (pts[:, None, :] != pts[None, :, :]).sum(-1)  # (n, n): coordinates in which two points differ
    return bool((differ <= 1).all(axis=1).any())
