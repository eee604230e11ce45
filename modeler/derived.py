"""Speedup, parallel efficiency and cost at the target point, from the call path's time model.

`speedup`, `parallel_efficiency` and `cost` are measured values like any other and get their own
PMNF models. But PMNF terms (x^i, log2(x)^j with positive exponents) cannot fall as 1/x: the
speedup of a run that slows with more ranks, or the efficiency of any strong-scaling run, comes
back as a constant or a falling line that crosses zero. The call path's `time` model has no such
trouble, and the three derive from it exactly as the measurements do (`modeler.aggregate`):

    speedup(target)             = T(r0, rest) / T(target)
    parallel_efficiency(target) = speedup(target) * r0 / ranks
    cost(target)                = ranks * T(target)

where T is the time model, `rest` the target's other parameters and r0 the fewest ranks at which
the call path's time was measured (its baseline). `from_time` gives that figure; `disagreement_warning`
names the models whose own prediction is far from it. Only where the `time` series is a time per
rank (`--ranks mean` or `max`): under `sum` or `min` it is not what the three derive from.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np

from .dataset import RANKS_PARAMETER, Dataset, Series
from .listing import listing
from .model import FittedModel

DERIVED = ("speedup", "parallel_efficiency", "cost")
#: a model predicting more than this factor above or below the time models' figure is named
RATIO = 1.5


def baselines(series: Iterable[Series], parameters: Sequence[str]) -> dict[str, float]:
    """Call path -> the fewest ranks at which its `time` was measured (empty without `ranks`)."""
    if RANKS_PARAMETER not in parameters:
        return {}
    r = list(parameters).index(RANKS_PARAMETER)
    return {s.callpath: float(np.min(s.points[:, r])) for s in series if s.metric == "time" and s.n_points}


def time_series_needed(data: Dataset, measured: Dataset | None, min_points: int = 3) -> list[Series]:
    """The `time` series of `measured` (or `data`) that `data` lacks, for the call paths whose
    speedup, efficiency or cost `data` holds: fitted for `from_time` only, not shown."""
    source = measured if measured is not None and tuple(measured.parameters) == tuple(data.parameters) else data
    if RANKS_PARAMETER not in data.parameters:
        return []
    wanted = {s.callpath for s in data.series if s.metric in DERIVED}
    have = {s.callpath for s in data.series if s.metric == "time"}
    return [s for s in source.series
            if s.metric == "time" and s.callpath in wanted - have and s.n_points >= min_points]


def from_time(metric: str, time_model: FittedModel, at: Mapping[str, float], parameters: Sequence[str],
              baseline: float) -> float:
    """`metric` (one of `DERIVED`) at `at` from the time model; nan where the time model predicts
    zero or less at the target or the baseline (a falling term run past the measurements)."""
    if metric not in DERIVED:
        raise ValueError(f"{metric!r} is not derived from time (one of {', '.join(DERIVED)})")
    ranks = float(at[RANKS_PARAMETER])
    target = np.array([[float(at[p]) for p in parameters]])
    base = target.copy()
    base[0, list(parameters).index(RANKS_PARAMETER)] = baseline
    with np.errstate(all="ignore"):
        t, t0 = (float(v) for v in time_model.predict(np.concatenate([target, base]))[:2])
    if not (math.isfinite(t) and math.isfinite(t0)) or t <= 0 or t0 <= 0:
        return math.nan
    if metric == "cost":
        return ranks * t
    speedup = t0 / t
    return speedup if metric == "speedup" else speedup * baseline / ranks


def derived_predictions(
    models: Sequence[FittedModel], time_models: Mapping[str, FittedModel], at: Mapping[str, float],
    parameters: Sequence[str], bases: Mapping[str, float],
) -> list[float | None]:
    """Per model: its metric from the time models at `at` (see `from_time`), or None where it is
    not a derived metric or its call path has no time model or baseline."""
    out: list[float | None] = []
    for fm in models:
        tm, r0 = time_models.get(fm.callpath), bases.get(fm.callpath)
        if fm.metric not in DERIVED or tm is None or r0 is None or RANKS_PARAMETER not in at:
            out.append(None)
        else:
            out.append(from_time(fm.metric, tm, at, parameters, r0))
    return out


def disagreement_warning(rows: Sequence, at_text: str) -> str | None:
    """One warning naming the speedup, efficiency and cost models whose prediction at the target is
    more than `RATIO` times above or below what the time models give (rows: `RankedModel`s)."""
    named = []
    for r in rows:
        ft, pred = r.from_time, r.prediction
        if ft is None or not (math.isfinite(ft) and math.isfinite(pred)) or ft <= 0:
            continue
        if pred <= 0 or not (1.0 / RATIO <= pred / ft <= RATIO):
            named.append(f"{r.fitted.callpath} ({r.fitted.metric}) {pred:.4g} against {ft:.4g}")
    if not named:
        return None
    n = len(named)
    return (f"{n} speedup, efficiency or cost model{'s' if n > 1 else ''} predict{'' if n > 1 else 's'} at "
            f"{at_text} far from what the call path's time model gives: {listing(named, 5)}; PMNF terms cannot "
            "fall as 1/x, a ratio of time models can: prefer the figure from time (`from time` in the table, "
            "`prediction_from_time` in JSON and CSV)")
