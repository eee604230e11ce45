"""What the engine takes from each series' repetitions: one value per point (the repetitions
reduced as asked) and their relative spread, the noise estimate.

Series measured as often at as many points (the common case: every call path of a sweep) are done
together, in one array pass per such set: done per series, the numpy calls on tiny arrays cost
0.24 s of the 1.2 s that 1000 call paths took end to end (benchmarks/modeler_vs_extrap.py).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .dataset import AXIS_REDUCERS, Series, relative_spread, robust_table


def point_stats(series: Sequence[Series], how: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per series, (`s.values(how)`, the relative spread of each point's repetitions: their
    standard deviation over their mean, 0 where a point has one)."""
    out: list = [None] * len(series)
    groups, others = by_shape(series)
    for i in others:
        out[i] = (series[i].values(how), series[i].spread())
    for index in groups:
        R = table(series, index)
        values = robust_table(R) if how == "robust" else AXIS_REDUCERS[how](R, axis=2)
        spread = relative_spread(R)
        for row, i in enumerate(index):
            out[i] = (values[row], spread[row])
    return out


def by_shape(series: Sequence[Series]) -> tuple[list[list[int]], list[int]]:
    """The indices of the series in sets measured as often at as many points (each to be done in
    one pass, `table`), and those whose points have different numbers of repetitions."""
    groups: dict[tuple[int, int], list[int]] = {}
    others = []
    for i, s in enumerate(series):
        sizes = {r.size for r in s.repetitions}
        if len(sizes) == 1:
            groups.setdefault((s.n_points, sizes.pop()), []).append(i)
        else:
            others.append(i)
    return list(groups.values()), others


def table(series: Sequence[Series], index: Sequence[int]) -> np.ndarray:
    """The repetitions of the series `index` (one set of `by_shape`) as a (series, points, runs) array."""
    first = series[index[0]]
    n_points, n_runs = first.n_points, first.repetitions[0].size
    return np.concatenate([r for i in index for r in series[i].repetitions]).reshape(len(index), n_points, n_runs)
