"""Parameters measured at two values only ("levels"), whose effect a series shows anyway.

A parameter needs `estimator.MIN_POINTS` (3) values for a term; with two (`--sweep ranks=1,2`) the
model holds it constant. A series that does not depend on it loses nothing: both levels' points
inform the form in the other parameters. A series whose values differ between the two levels was
modeled between them, at neither (review 128 MED-1: `sync_ranks` measured 0.040 s at ranks=1 and
0.083 s at ranks=2 in all 150 runs, modeled as 0.0477, its range and run spread excluding every run,
the row unmarked). `level_effects` finds such series: at the points measured at both levels with
the same values of the other parameters, the ratios of the two levels' values (their logs) differ
from 1 beyond what their scatter over those points allows (a t test at `LEVEL_P`), or each of them
lies beyond `NOISE_Z` times its repetitions' noise, all the same way (an added constant: the ratio
varies over the points); with fewer than `MIN_PAIRS` such points, their mean beyond `NOISE_Z` times
the repetitions' noise. The estimator then models
such a series on the points of the target's level alone, where the target names one of the two, and
otherwise marks its row, holds each level's model in its range and says that the dependence is not
modeled (`estimator.PMNFModeler._by_levels`, docs/modeler.md "Parameters with two values").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .pointtext import param_text, point_text

#: the two-sided chance that a series whose levels do not differ is taken to differ (per series and
#: parameter); small, since such a series is then fitted on half its points (`MIN_PAIRS` or more
#: points measured at both levels)
LEVEL_P = 0.001
#: fewer points measured at both levels than this: no t test, the ratio against the repetitions' noise
MIN_PAIRS = 3
#: ... beyond this many standard errors of that noise
NOISE_Z = 4.0
#: a ratio this close to 1 is no difference, whatever the noise (exact synthetic data)
NEGLIGIBLE = 1e-9
#: how the notes (`FittedModel.warnings`) of rows whose levels differ begin
LEVEL_NOTE_PREFIX = "values differ between "
#: how the miss text (`FittedModel.miss`) of a row whose dependence is not modeled begins
LEVEL_MISS_PREFIX = "does not follow "


@dataclass(frozen=True)
class LevelEffect:
    """How a series' values differ between the two measured values of one parameter.

    `values` are the series' values at the two levels (`levels`, ascending) at `where` (the other
    parameters' values, the largest measured at both levels), `ratios` the smallest and largest
    ratio (second level over first) over the `pairs` points measured at both levels, `ratio` their
    geometric mean. `modeled_at`: the level whose points alone the row's model was fitted on (the
    target's), or None where the row's model is of both levels and does not follow the parameter."""

    parameter: str
    levels: tuple[float, float]
    values: tuple[float, float]
    where: tuple[tuple[str, float], ...]
    ratio: float
    ratios: tuple[float, float]
    pairs: int
    modeled_at: float | None = None

    def values_text(self, digits: int = 4, where: bool = True) -> str:
        """`0.0403 at ranks=1, 0.0829 at ranks=2 (2.06x, 2.01x to 2.2x over 25 points; at batch=128,
        width=128)`; without `where` (said once for several rows) the last part left out."""
        (a, b), (va, vb) = self.levels, self.values
        p = self.parameter
        spread = "" if self.pairs < 2 else f", {_x(self.ratios[0])} to {_x(self.ratios[1])} over {self.pairs} points"
        where = f"; at {point_text(dict(self.where))}" if self.where and where else ""
        return (f"{va:.{digits}g} at {p}={param_text(a)}, {vb:.{digits}g} at {p}={param_text(b)} "
                f"({_x(self.ratio)}{spread}{where})")

    def to_json(self) -> dict:
        return {"parameter": self.parameter, "levels": [float(v) for v in self.levels],
                "values": [float(v) for v in self.values], "at": {k: float(v) for k, v in self.where},
                "ratio": float(self.ratio), "ratios": [float(v) for v in self.ratios], "points": int(self.pairs),
                "modeled_at": None if self.modeled_at is None else float(self.modeled_at)}


def _x(r: float) -> str:
    return f"{r:.3g}x"


def level_columns(points: np.ndarray) -> list[int]:
    """The columns of `points` with exactly two distinct values."""
    return [c for c in range(points.shape[1]) if np.unique(points[:, c]).size == 2]


def level_effect(params: Sequence[str], points: np.ndarray, values: np.ndarray, spread: np.ndarray,
                 counts: np.ndarray, col: int) -> LevelEffect | None:
    """The `LevelEffect` of the parameter in column `col` (two values) on a series with these
    aggregated `values`, relative `spread` of their repetitions and their `counts`, where its two
    levels differ beyond their noise; else None (no difference, or too few points to tell)."""
    levels = np.unique(points[:, col])
    if levels.size != 2:
        return None
    others = [c for c in range(points.shape[1]) if c != col]
    at: dict[tuple[float, ...], list[int | None]] = {}
    for i, point in enumerate(points):
        slot = at.setdefault(tuple(float(point[c]) for c in others), [None, None])
        slot[int(point[col] == levels[1])] = i
    pairs = [(key, a, b) for key, (a, b) in at.items() if a is not None and b is not None
             and values[a] > 0 and values[b] > 0 and np.isfinite(values[a]) and np.isfinite(values[b])]
    if not pairs:
        return None
    a_idx = np.array([a for _, a, _ in pairs])
    b_idx = np.array([b for _, _, b in pairs])
    r = np.log(values[b_idx] / values[a_idx])
    n, mean = r.size, float(np.mean(r))
    if abs(mean) <= NEGLIGIBLE:
        return None
    ca, cb = counts[a_idx], counts[b_idx]
    known = (ca >= 2) & (cb >= 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(known, spread[a_idx] ** 2 / np.maximum(ca, 1) + spread[b_idx] ** 2 / np.maximum(cb, 1), np.nan)
    if n >= MIN_PAIRS:
        # beyond their noise: the mean ratio against its scatter over the points (which holds every
        # noise, the runs' drift between points too), or, where the ratio varies over the points (an
        # added constant), each point's ratio beyond its repetitions' noise, all the same way
        sd = float(np.std(r, ddof=1))
        if sd > 0:
            from scipy.stats import t as student

            if 2 * student.sf(abs(mean) / (sd / math.sqrt(n)), n - 1) >= LEVEL_P and not _each_beyond(r, var):
                return None
    else:
        if not known.any():
            return None
        v = float(np.nanmean(var))
        if v > 0 and abs(mean) <= NOISE_Z * math.sqrt(v / n):
            return None
    # the values shown: at the pair with the largest other values (the default target's, often)
    top = max(range(n), key=lambda k: (sum(math.log(v) if v > 0 else -math.inf for v in pairs[k][0]), pairs[k][0]))
    key, a, b = pairs[top]
    return LevelEffect(params[col], (float(levels[0]), float(levels[1])), (float(values[a]), float(values[b])),
                       tuple((params[c], v) for c, v in zip(others, key)), math.exp(mean),
                       (float(np.exp(r.min())), float(np.exp(r.max()))), n)


def _each_beyond(r: np.ndarray, var: np.ndarray) -> bool:
    """Whether every point's log ratio `r` lies beyond `NOISE_Z` standard errors of its repetitions'
    noise (`var`, NaN where a level has one repetition there), all on the same side of 1."""
    if not np.all(np.isfinite(var)) or not (np.all(r > 0) or np.all(r < 0)):
        return False
    return bool(np.all(np.abs(r) > NOISE_Z * np.sqrt(var)))


def level_effects(params: Sequence[str], points: np.ndarray, values: np.ndarray, spread: np.ndarray,
                  counts: np.ndarray) -> tuple[LevelEffect, ...]:
    """`level_effect` of every parameter with two values that the series' levels differ in."""
    found = (level_effect(params, points, values, spread, counts, c) for c in level_columns(points))
    return tuple(e for e in found if e is not None)


def not_followed_text(effects: Sequence[LevelEffect]) -> str:
    """The miss text of a row whose model is of both levels (`FittedModel.miss`)."""
    said = "; ".join(f"{e.parameter} (2 values, no term): {e.values_text()}" for e in effects)
    return f"{LEVEL_MISS_PREFIX}{said}"


def modeled_note(e: LevelEffect) -> str:
    """The note of a row modeled on one level's points (the same for every such row: counted once)."""
    return (f"values differ between {e.parameter}={param_text(e.levels[0])} and {e.parameter}={param_text(e.levels[1])} "
            f"beyond their noise, and 2 values of {e.parameter} give no form in it: modeled on the runs at "
            f"{e.parameter}={param_text(e.modeled_at)} only (the target's value); its predictions hold for "
            f"{e.parameter}={param_text(e.modeled_at)} alone")


def unmodeled_note(e: LevelEffect) -> str:
    """The note of a row whose model is of both levels while its values differ between them."""
    return (f"values differ between {e.parameter}={param_text(e.levels[0])} and {e.parameter}={param_text(e.levels[1])} "
            f"beyond their noise, and 2 values of {e.parameter} give no form in it: the dependence on "
            f"{e.parameter} is not modeled (the model lies between the two levels; its 80% range holds each "
            f"level's model); measure a third value of {e.parameter}, or give --at a measured value of it")
