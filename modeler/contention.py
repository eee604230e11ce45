"""Repetitions that disagree widely: what a busy or shared machine does to timings.

Contention only ever adds time: on a machine that other work shares, some runs are slow and none
fast, and the slow ones come in passes (the launcher runs every point of one repetition, then the
next). Averaged (the `robust` aggregate is a mean of the runs that are not outliers, and a pass of
slow runs sets a wide outlier scale; with 3 runs two slow ones are the median), the slow runs lift
the largest points most, where runs are longest, and the exponents with them (review 62: the
sample application's predictions 2x to 8x high at held-out points, median +100%, against +19% with
`--repetitions min`; its runs lay 69% of their median apart, and nothing said so). The models and
their ranges take the repetitions' spread for independent noise around the truth, which such runs
are not.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .dataset import Series
from .repstats import by_shape, table

#: the runs of a time, fastest to slowest, this far apart relative to their median (weighted by
#: time) are worth a warning: uniform noise of ±10% puts 5 runs about 13% apart, 3 runs about 10%
WIDE = 0.3
#: the slowest run's distance above the median this many times the fastest run's below it is called
#: one-sided (symmetric noise: about 1)
ONE_SIDED = 2.5
#: points with 2 or more runs, above 0, that the test needs
MIN_POINTS = 10


def run_spread(series: Sequence[Series], metric: str = "time") -> tuple[float, float] | None:
    """(how far the slowest run lies above its point's median, how far the fastest lies below it),
    each summed over the points of the `metric` series measured 2 or more times and divided by the
    sum of their medians: relative, and weighted by time, so that the regions that make up the run
    speak, not the many short ones whose timer noise is wide anyway. None with fewer than
    `MIN_POINTS` such points."""
    up = down = total = 0.0
    points = 0
    times = [s for s in series if s.metric == metric]
    groups, others = by_shape(times)
    tables = [table(times, index) for index in groups if times[index[0]].repetitions[0].size >= 2]
    tables += [r[None, None, :] for i in others for r in times[i].repetitions if r.size >= 2]
    for R in tables:  # (series, points, runs), one array pass per set measured alike
        med = np.median(R, axis=2)
        ok = (med > 0) & np.isfinite(R).all(axis=2)
        up += float(np.where(ok, R.max(axis=2) - med, 0.0).sum())
        down += float(np.where(ok, med - R.min(axis=2), 0.0).sum())
        total += float(np.where(ok, med, 0.0).sum())
        points += int(ok.sum())
    if points < MIN_POINTS or not total > 0:
        return None
    return up / total, down / total


def wide_runs_warning(series: Sequence[Series], aggregate: str | None, compat: str | None = None) -> str | None:
    """A warning where the `time` series' runs lie more than `WIDE` apart (`run_spread`) and the
    aggregate is not `min`, or None. `aggregate` None: the engine's default, the mean under
    `compat="extrap"` (review 78 LOW-3: the warning called it robust there too)."""
    if aggregate == "min":
        return None
    spread = run_spread(series)
    if spread is None or sum(spread) <= WIDE:
        return None
    slow, fast = spread
    side = (", slow on one side, as when other work shares the machine (it adds time to some runs, never "
            "takes it away)" if slow > ONE_SIDED * fast else "")
    how = (f"--repetitions {aggregate}" if aggregate else "the mean of the runs (--compat extrap, as Extra-P)"
           if compat == "extrap" else "the default aggregate (robust: a mean of the runs that are not outliers)")
    return (f"the repetitions of the times disagree widely: a point's slowest run lies {100 * slow:.0f}% above its "
            f"median, its fastest {100 * fast:.0f}% below it (weighted by time){side}; {how} follows slow runs, "
            f"and the models' exponents and ranges take them for noise around the truth, so predictions beyond "
            f"the sweep can be far off: compare --repetitions min, and measure on a quiet machine")
