"""What the engine takes from each series' repetitions: one value per point (the repetitions
reduced as asked) and their relative spread, the noise estimate. With the robust aggregate the
spread, and the count it goes with, are those of the repetitions the value is the mean of: a run
that the aggregate left out is not noise of that value (review 85 F2: one slow run at the largest
point, already left out, still took that point's weight to a few percent: p90 error at 4x 18-28%,
against 4.5% and 1.9% with the run dropped by hand, 3 and 5 runs).

Series measured as often at as many points (the common case: every call path of a sweep) are done
together, in one array pass per such set: done per series, the numpy calls on tiny arrays cost
0.24 s of the 1.2 s that 1000 call paths took end to end (benchmarks/modeler_vs_extrap.py).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .dataset import AXIS_REDUCERS, Series, relative_spread, robust_kept, robust_table_kept


class PointStats(NamedTuple):
    """One series' values per point, and the relative spread and number of the repetitions behind
    each (with the robust aggregate: those it kept)."""

    values: np.ndarray
    spread: np.ndarray
    counts: np.ndarray


def point_stats(series: Sequence[Series], how: str) -> list[PointStats]:
    """Per series, `s.values(how)`, the relative spread of each point's repetitions (their standard
    deviation over their mean, 0 where a point has one or they agree exactly: `s.spread(how)`) and
    their number; with `how="robust"` both of the repetitions the robust aggregate keeps."""
    out: list = [None] * len(series)
    groups, others = by_shape(series)
    for i in others:
        s = series[i]
        counts = (np.array([k.sum() for k in robust_kept(s.repetitions)]) if how == "robust" else
                  np.array([r.size for r in s.repetitions]))
        out[i] = PointStats(s.values(how), s.spread(how), counts)
    for index in groups:
        R = table(series, index)
        if how == "robust":
            values, keep = robust_table_kept(R)
            spread, counts = relative_spread(R, keep), keep.sum(axis=2)
        else:
            values, spread = AXIS_REDUCERS[how](R, axis=2), relative_spread(R)
            counts = np.full(R.shape[:2], R.shape[2])
        for row, i in enumerate(index):
            out[i] = PointStats(values[row], spread[row], counts[row])
    return out


#: a point whose outlier factor (`pmnf.selection.outlier_weights`) is below this is named in a note:
#: its repetitions vary 1000 times more (in variance) than the series' typical point's, 30 times more in
#: spread (one run 3x slow where runs are within 2% of each other: about 80 times more)
ODD_POINT_FACTOR = 0.01


def odd_points(series: Sequence[Series], index: Sequence[int], stats: Sequence[PointStats],
               aggregate: str) -> dict[int, np.ndarray]:
    """Series index -> the indices of its points whose repetitions disagree so much more than at its
    other points (a straggler run) that the engine all but leaves them out (`ODD_POINT_FACTOR`), for
    the series of `index` that have any. Done in one pass per set of series measured alike."""
    from .pmnf.selection import outlier_weights

    if aggregate in ("min", "max"):  # the extremes get no outlier weights
        return {}
    out = {}
    groups, others = by_shape([series[i] for i in index])
    sets = [[index[k] for k in members] for members in groups] + [[index[k]] for k in others]
    for rows in sets:
        spread = np.array([stats[i].spread for i in rows])
        reps = np.array([stats[i].counts for i in rows])
        odd = outlier_weights(spread, reps, aggregate) < ODD_POINT_FACTOR
        for i, flags in zip(rows, odd):
            if flags.any():
                out[i] = np.flatnonzero(flags)
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
