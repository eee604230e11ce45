"""A loop's `step_time` and `epoch_time` checked through the loop's `time` against its parts.

A step (an epoch) is part of its loop's run, and where the loop runs as many steps at every
measured point, its step time is a steady share of the loop's time. The loop's time model is
checked against its parts' (`modeler.parts`, `parts_growth`): where it grows slower than its heavy
parts it is ranked by their growth, `(parts)`, and its 80% range holds their sum where that is
credible (`parts.PartsCheck.range_span`). The step's own model is fitted to the same runs, and
misses the same growth: review 123 MED-1's step was `c + a*batch + b*batch^2`, fitted as
`batch^(3/2)` and 15% low at 2x, the measured value outside its range, while the loop's `time`
row said "deg 2 (parts)" and its parts' sum was right. The loop's verdict carries to the step
(`step_verdicts`): its growth from the parts, its figure from the parts (`loop_ratio` times the
loop's), and the range holding it.

The share comes from the runs (`loop_ratio`): at each measured point the median step over the
median loop time, steady where they stay within `STEADY` of each other (none carries where the
share moves more: a loop whose number of steps follows a parameter, `--ranks sum`'s loop time over
every rank of a sweep over ranks, a loop with a fixed cost of its own that is large at some points),
taken at the measured points nearest the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Collection, Mapping, Sequence

import numpy as np

from .dataset import Dataset, Series
from .growth import growth, growth_text
from .listing import listing
from .model import FittedModel
from .parts import SEPARATOR, PartsCheck

if TYPE_CHECKING:
    from .ranking import RankedModel

#: the metrics of a loop's steps or epochs that its `time` stands for, over their count
LOOP_METRICS = ("step_time", "epoch_time")
#: the step's share of its loop's time is steady where its values at the measured points stay within
#: this factor of each other
STEADY = 1.25


def loop_ratio(measured: Sequence[Series], callpath: str, metric: str, parameters: Sequence[str],
               at: Mapping[str, float]) -> tuple[float, float] | None:
    """The share of the loop's `time` at `callpath` that one of its steps (`metric`: `step_time`,
    `epoch_time`) takes, from the series `measured`: per point measured in both, the median of the
    step's values over the median of the loop's; where these stay within `STEADY` of each other (3
    points or more), (their median at the points nearest `at`, those at the largest measured value
    of each parameter that `at` is beyond, the smallest of one it is below; their median over all
    the points); else None."""
    by_key = {(s.callpath, s.metric): s for s in measured}
    step, loop = by_key.get((callpath, metric)), by_key.get((callpath, "time"))
    if step is None or loop is None or step.points.shape[1] != len(parameters):
        return None
    loops = {tuple(p): v for p, v in zip(loop.points.tolist(), loop.values("median"))}
    pts, ratios = [], []
    for p, v in zip(step.points.tolist(), step.values("median")):
        w = loops.get(tuple(p))
        if w is None:
            continue
        r = v / w if w > 0 else math.nan
        if not (math.isfinite(r) and r > 0):
            return None
        pts.append(p)
        ratios.append(r)
    if len(ratios) < 3 or max(ratios) > STEADY * min(ratios):
        return None
    near = np.arange(len(ratios))
    P = np.array(pts, dtype=float)
    for j, name in enumerate(parameters):
        value, col = float(at[name]), P[near, j]
        edge = col.max() if value > col.max() else col.min() if value < col.min() else None
        if edge is not None:
            near = near[col == edge]
    return float(np.median(np.array(ratios)[near])), float(np.median(ratios))


@dataclass(frozen=True)
class StepVerdict:
    """The loop's verdict on one step or epoch model (`step_verdicts`): the step's share of the
    loop near the target (`ratio`, `loop_ratio`), and, scaled by it, the loop's parts' sum
    (`from_parts`), what its range holds (`held`: `parts.PartsCheck.range_span` scaled by the
    smaller and the larger of the share near the target and over all the points, so that a share
    measured at one point holds the others'; None where nothing) and its time figure
    where that is not its model's (`figure`, `parts.PartsCheck.time_figure`); the growth from the
    parts (`parts_growth`, None where it does not go beyond the step's own as it goes beyond the
    loop's)."""

    ratio: float
    from_parts: float
    held: tuple[float, float] | None
    figure: float | None
    parts_growth: tuple[float, float] | None
    with_exclusive: bool
    unsettled: bool


def step_verdicts(models: Sequence[FittedModel], sums: Mapping[str, PartsCheck], measured: Sequence[Series],
                  parameters: Sequence[str], at: Mapping[str, float],
                  growths: Mapping[str, tuple[float, float]], faster: Collection[str] = (),
                  unsettled: Collection[str] = ()) -> dict[tuple[str, str], StepVerdict]:
    """(call path, metric) -> what the loop's `time` against its parts says of each `step_time` and
    `epoch_time` model in `models` whose loop has a parts' sum (`sums`) and a steady share
    (`loop_ratio`). `growths`: the growth each `time` model's parts give it (`parts_growth.parts_growths`);
    `faster`: the call paths whose `time` model grows faster than every one of its parts; `unsettled`:
    those whose contradiction only a growth the data do not settle makes."""
    fitted = {(fm.callpath, fm.metric): fm for fm in models}
    out = {}
    for (cp, metric), fm in fitted.items():
        check = sums.get(cp)
        loop = fitted.get((cp, "time"))
        if metric not in LOOP_METRICS or check is None or loop is None:
            continue
        ratios = loop_ratio(measured, cp, metric, parameters, at)
        if ratios is None:
            continue
        ratio, lo, hi = ratios[0], min(ratios), max(ratios)
        span = check.range_span(cp in faster, cp in unsettled)
        figure = check.time_figure()
        parts_growth = growths.get(cp)
        own, loops = growth(fm.model), growth(loop.model)
        # the loop's growth from its parts, where it goes beyond the step's own the way it goes
        # beyond the loop's
        if parts_growth is not None and not ((parts_growth > loops and parts_growth > own)
                                             or (parts_growth < loops and parts_growth < own)):
            parts_growth = None
        out[(cp, metric)] = StepVerdict(
            ratio, ratio * check.parts, None if span is None else (lo * span[0], hi * span[1]),
            ratio * figure if math.isfinite(figure) and figure != check.whole else None,
            parts_growth, check.with_exclusive, cp in unsettled)
    return out


def loop_parts_series(data: Dataset, measured: Dataset | None, min_points: int = 3) -> list[Series]:
    """The `time` and `exclusive_time` series of `measured` that `data` (a selection of it) lacks,
    of every loop with a `step_time` or `epoch_time` series in `data` and of the call paths below
    it: fitted beside them, not shown, so that the loop's time is checked against its parts
    (`step_verdicts`) as under `--metric time`."""
    if measured is None or tuple(measured.parameters) != tuple(data.parameters):
        return []
    loops = {s.callpath for s in data.series if s.metric in LOOP_METRICS}
    if not loops:
        return []
    have = {(s.callpath, s.metric) for s in data.series}

    def below(cp: str) -> bool:
        return any(cp == loop or cp.startswith(loop + SEPARATOR) for loop in loops)

    return [s for s in measured.series
            if s.metric in ("time", "exclusive_time") and (s.callpath, s.metric) not in have
            and s.n_points >= min_points and below(s.callpath)]


def step_parts_growth_warning(rows: Sequence["RankedModel"]) -> str | None:
    """One warning naming the step and epoch rows ranked by the growth of their loop's parts
    (`step_verdicts`), or None."""
    named = [f"{r.fitted.callpath} [{r.fitted.metric}] ({growth_text(r.growth)}, parts {growth_text(r.parts_growth)})"
             for r in rows if r.fitted.metric in LOOP_METRICS and r.parts_growth is not None]
    if not named:
        return None
    n = len(named)
    return (f"{n} step or epoch time model{'s' if n > 1 else ''} ranked by the growth of {'their' if n > 1 else 'its'} "
            f"loop's parts, marked (parts): {listing(named, 5)}; {'each takes' if n > 1 else 'it takes'} a steady share "
            "of its loop's time at every measured point, and the loop's time model grows apart from its parts (its "
            "exclusive time and children), so the step's own model likely misses the same growth: its 80% range holds "
            "the loop's parts over that share; compare both with a larger run")
