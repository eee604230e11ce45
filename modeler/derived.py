"""Speedup, parallel efficiency and cost at the target point, from a model of the per-rank time.

`speedup`, `parallel_efficiency` and `cost` are measured values like any other and get their own
models. But the speedup of a run that slows with more ranks (1 / (1 + log2(ranks)), say) is not
PMNF at all, even split over the ranks (`modeler.strong_scaling`), and its model comes back as a
constant or as a falling line that crosses zero. They derive from a per-rank time T exactly as
the measurements do (`modeler.aggregate`):

    speedup(target)             = T(r0, rest) / T(target)
    parallel_efficiency(target) = speedup(target) * r0 / ranks
    cost(target)                = ranks * T(target)

with `rest` the target's other parameters and r0 the call path's baseline: as in the
measurements, the fewest ranks at which its time was above 0 with the same other parameters,
here those of the measured combination nearest the target's (`Baselines.at`; the target's own
where it was measured). T comes from one of two models of the call path (`choose_basis`):
- its `time` model: exact where the time grows with ranks (weak scaling, communication), and
  where the work is split over the ranks, the time model is split too (`modeler.strong_scaling`);
- its `cost` model divided by ranks: the same idea where the time model's split was not taken
  but the cost model explains the values better.
Whichever of the two explains the measurements better out of sample (cross-validated SMAPE; cost
is time x ranks at every point, so their relative errors compare) is used
(`benchmarks/derived_speedup.py`, docs/modeling.md). A call path that only some ranks of a run ran
(`aggregate.RunMetrics.partial`, a rank-0 checkpoint) has as its per-rank time the mean over the
ranks that ran it, which its cost is (ranks x) and its `time`, a mean over every rank, is not: its
T comes from its cost model alone (review 88 MED-1).

`from_time` gives the figure; `disagreement_warning` names the models whose own prediction is far
from it. Only where the `time` series is a time per rank (our runs with `--ranks mean` or `max`):
under `sum` or `min`, and in Extra-P files (which may hold sums over ranks), it is not what the
three derive from; nor under `--compat extrap`, which gives Extra-P's output and nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np

from .dataset import RANKS_PARAMETER, Dataset, Series
from .listing import listing
from .model import FittedModel

DERIVED = ("speedup", "parallel_efficiency", "cost")
#: metrics where more is better; for every other metric (times, bytes, imbalance) more is worse
HIGHER_IS_BETTER = frozenset({"speedup", "parallel_efficiency"})
#: the models a per-rank time is taken from
BASES = ("time", "cost")
#: a model predicting more than this factor above or below the time models' figure is named
RATIO = 1.5


@dataclass(frozen=True)
class Baselines:
    """Per call path, the fewest ranks at which its time was above 0, per combination of the other
    parameters (as the measured speedups use them, `modeler.aggregate`)."""

    parameters: tuple[str, ...]
    fewest: Mapping[str, Mapping[tuple[float, ...], float]]

    def at(self, callpath: str, target: Mapping[str, float]) -> float | None:
        """The baseline for a prediction at `target`: that of the measured combination of the other
        parameters nearest the target's (in log scale; its own where measured). None without one."""
        table = self.fewest.get(callpath)
        if not table:
            return None
        others = [p for p in self.parameters if p != RANKS_PARAMETER]
        want = np.array([float(target[p]) for p in others])

        def distance(combo: tuple[float, ...]) -> float:
            c = np.array(combo, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                d = np.abs(np.log(np.where(c > 0, c, np.nan)) - np.log(np.where(want > 0, want, np.nan)))
            # a parameter at or below 0 has no log scale: its plain difference
            return float(np.where(np.isfinite(d), d, np.abs(c - want)).sum())

        return table[min(table, key=lambda c: (distance(c), c))]


def baselines(series: Iterable[Series], parameters: Sequence[str]) -> Baselines:
    """The `Baselines` of the `time` series (none without `ranks`): the fewest ranks where the time
    (the median of the repetitions) is above 0, as the measured speedups take it (`modeler.aggregate`;
    communication is 0 at 1 rank). Ranks of 0 or less are no baseline: a per-rank time at 0 ranks
    means nothing to divide by."""
    parameters = tuple(parameters)
    if RANKS_PARAMETER not in parameters:
        return Baselines(parameters, {})
    r = parameters.index(RANKS_PARAMETER)
    fewest: dict[str, dict[tuple[float, ...], float]] = {}
    for s in series:
        if s.metric != "time":
            continue
        table = fewest.setdefault(s.callpath, {})
        for pt, reps in zip(s.points, s.repetitions):
            if pt[r] <= 0 or not float(np.median(reps)) > 0:
                continue
            key = tuple(float(v) for i, v in enumerate(pt) if i != r)
            table[key] = min(table.get(key, float(pt[r])), float(pt[r]))
    return Baselines(parameters, {cp: t for cp, t in fewest.items() if t})


def basis_series_needed(data: Dataset, measured: Dataset | None, min_points: int = 3) -> list[Series]:
    """The `time` and `cost` series of `measured` (or `data`) that `data` lacks, for the call paths
    whose speedup, efficiency or cost `data` holds: fitted for `from_time` only, not shown."""
    source = measured if measured is not None and tuple(measured.parameters) == tuple(data.parameters) else data
    if RANKS_PARAMETER not in data.parameters:
        return []
    wanted = {s.callpath for s in data.series if s.metric in DERIVED}
    have = {(s.callpath, s.metric) for s in data.series}
    return [s for s in source.series
            if s.metric in BASES and s.callpath in wanted and (s.callpath, s.metric) not in have
            and s.n_points >= min_points]


#: the metric of the series `some_ranks_series` makes: fitted beside the others, never shown
RANKS_TIME = "time_of_ranks_that_ran_it"


def some_ranks_series(data: Dataset, measured: Dataset | None, min_points: int = 3) -> list[Series]:
    """For the call paths whose `time` `data` holds and that only some ranks of a run ran
    (`RunShares.some_ranks`, a rank-0 checkpoint), the time of the ranks that ran them (metric
    `RANKS_TIME`): their cost (of `measured`, or `data`) over ranks, repetition by repetition, since
    their per-rank time is the mean over those ranks (`aggregate.run_metrics`). It ranks their time
    (`ranking.rank_models`), whose mean over every rank falls as 1/ranks where one rank runs it
    (review 88 MED-1); fitted for that only, not shown."""
    source = measured if measured is not None and tuple(measured.parameters) == tuple(data.parameters) else data
    shares = source.run_shares if source.run_shares is not None else data.run_shares
    if RANKS_PARAMETER not in data.parameters or shares is None or not shares.some_ranks:
        return []
    r = list(data.parameters).index(RANKS_PARAMETER)
    wanted = {s.callpath for s in data.series if s.metric == "time" and s.callpath in shares.some_ranks}
    out = []
    for s in source.series:
        if s.metric == "cost" and s.callpath in wanted and s.n_points >= min_points and np.all(s.points[:, r] > 0):
            out.append(Series(s.callpath, RANKS_TIME, s.points, tuple(v / p[r] for v, p in zip(s.repetitions, s.points)),
                              "s", s.passes))
    return out


def choose_basis(time_model: FittedModel | None, cost_model: FittedModel | None) -> FittedModel | None:
    """The model the per-rank time is taken from: of the call path's `time` and `cost` models, the
    one with the smaller cross-validated SMAPE (their relative errors are comparable: cost is time
    x ranks at every point); `time` on a tie or where either lacks a score."""
    if time_model is None or cost_model is None:
        return time_model or cost_model
    t, c = time_model.cv_smape, cost_model.cv_smape
    if t is None or c is None or not (math.isfinite(t) and math.isfinite(c)):
        return time_model
    return cost_model if c < t else time_model


def from_time(metric: str, basis: FittedModel, at: Mapping[str, float], parameters: Sequence[str],
              baseline: float) -> float:
    """`metric` (one of `DERIVED`) at `at` from the per-rank time that `basis` gives (a `time`
    model, or a `cost` model divided by ranks); nan where it is zero or less at the target or at
    the baseline (a falling term run past the measurements)."""
    if metric not in DERIVED:
        raise ValueError(f"{metric!r} is not derived from time (one of {', '.join(DERIVED)})")
    if basis.metric not in BASES:
        raise ValueError(f"the basis must be a time or cost model, got {basis.metric!r}")
    ranks = float(at[RANKS_PARAMETER])
    if not baseline > 0 or not ranks > 0:
        return math.nan
    target = np.array([[float(at[p]) for p in parameters]])
    base = target.copy()
    base[0, list(parameters).index(RANKS_PARAMETER)] = baseline
    with np.errstate(all="ignore"):
        t, t0 = (float(v) for v in basis.model.evaluate(np.concatenate([target, base]))[:2])
    if basis.metric == "cost":
        t, t0 = t / ranks, t0 / baseline
    if not (math.isfinite(t) and math.isfinite(t0)) or t <= 0 or t0 <= 0:
        return math.nan
    if metric == "cost":
        return ranks * t
    speedup = t0 / t
    return speedup if metric == "speedup" else speedup * baseline / ranks


def derived_predictions(
    models: Sequence[FittedModel], companions: Sequence[FittedModel], at: Mapping[str, float],
    parameters: Sequence[str], bases: Baselines | None, some_ranks: Collection[str] = (),
) -> list[tuple[float, str] | None]:
    """Per model: (its metric at `at` from the per-rank time, the metric that time came from:
    `time` or `cost`; see `choose_basis`, `from_time`; the other model where the chosen one gives
    no figure), or None where it is not a derived metric, its call path has no time or cost model
    or no baseline, or neither model gives a figure (review 66 F2: no basis named beside no figure).
    The call paths in `some_ranks`, run by some ranks only, take their cost model alone: their
    `time` is no per-rank time."""
    by_key = {(fm.callpath, fm.metric): fm for fm in [*companions, *models] if fm.metric in BASES}
    out: list[tuple[float, str] | None] = []
    for fm in models:
        time_model, cost_model = by_key.get((fm.callpath, "time")), by_key.get((fm.callpath, "cost"))
        if fm.callpath in some_ranks:
            time_model = None
        basis = choose_basis(time_model, cost_model)
        r0 = None if bases is None or RANKS_PARAMETER not in at else bases.at(fm.callpath, at)
        if fm.metric not in DERIVED or basis is None or r0 is None or RANKS_PARAMETER not in at:
            out.append(None)
            continue
        value = from_time(fm.metric, basis, at, parameters, r0)
        other = cost_model if basis is time_model else time_model
        if not math.isfinite(value) and other is not None:
            # the chosen model falls to zero or below at the target or the baseline: the other one
            # may not (a time model bending down through strong-scaling measurements, say)
            fallback = from_time(fm.metric, other, at, parameters, r0)
            if math.isfinite(fallback):
                value, basis = fallback, other
        out.append((value, basis.metric) if math.isfinite(value) else None)
    return out


def disagreement_warning(rows: Sequence, at_text: str) -> str | None:
    """One warning naming the speedup, efficiency and cost models whose prediction at the target is
    more than `RATIO` times above or below the figure from the per-rank time (rows: `RankedModel`s)."""
    named = []
    for r in rows:
        ft, pred = (None, r.prediction) if r.from_time is None else (r.from_time[0], r.prediction)
        if ft is None or not (math.isfinite(ft) and math.isfinite(pred)) or ft <= 0:
            continue
        if pred <= 0 or not (1.0 / RATIO <= pred / ft <= RATIO):
            named.append(f"{r.fitted.callpath} ({r.fitted.metric}) {pred:.4g} against {ft:.4g} from {r.from_time[1]}")
    if not named:
        return None
    n = len(named)
    return (f"{n} speedup, efficiency or cost model{'s' if n > 1 else ''} predict{'' if n > 1 else 's'} at "
            f"{at_text} far from what the call path's per-rank time gives: {listing(named, 5)}; PMNF terms "
            "cannot fall as 1/x, a ratio of time (or cost) predictions can: read an efficiency, or a speedup that "
            "falls with more ranks, from that figure (`from time` or `from cost` in the table, "
            "`prediction_from_time` in JSON and CSV)")
