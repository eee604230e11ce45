"""What a prediction owes to one repetition pass: fit again with each pass left out, and compare.

The launcher runs the repetitions in passes: every point of repetition 0, then every point of
repetition 1, and so on (`Series.passes` labels each run with its pass). Whatever slows the
machine for a while (other work on it, a throttled clock) then slows the runs of one pass
together, and often only the points that pass ran during it. The repetitions' spread at a point,
from which the noise estimate and the coefficients' uncertainty come, takes such runs for
independent noise around the truth; a pass slow at the largest points bends the exponents, and
more repetitions do not shrink that. In review 62 the 80% range at 4x held the measured time in 4
of 54 cases; leaving out one of the three passes moved the prediction of the training loop from
206 s to 131 s or to 239 s.

So the estimator fits every series again once per pass, without that pass's runs
(`PMNFModeler(pass_range=True)`, the default), and the 80% range is widened to hold these
predictions (`hull`). Where the passes agree, the refits predict much alike and the range is as
before; where one pass differs, the range spans what the runs support with and without it, and
`pass_spread_warning` names the models that move furthest. Two kinds of refit do not widen it: one
that keeps only its constant where the model from every run grows (with fewer runs the noise
test found the growth within the noise: review 63, where such refits set the floor of `main`'s
range at 1.7 s, below what the sweep had measured), and one at or below zero where the
prediction is above it (the warning names those).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .dataset import Series
from .listing import listing

#: a prediction that one pass left out moves by more than this factor is warned of
PASS_SPREAD = 1.5
#: at most this many refits: with more passes, runs of consecutive passes are left out together
MAX_REFITS = 5


def labels(s: Series) -> list[int]:
    """The passes of `s` that are left out in turn, sorted: those with runs at half of its points or
    more (a point run again by hand gets a repetition index of its own, and leaving out its one run
    would cost a refit of every series for nothing), not the runs that name no pass (-1)."""
    if s.passes is None:
        return []
    found, points = np.unique(np.concatenate([np.unique(p) for p in s.passes]), return_counts=True)
    return [int(k) for k, n in zip(found, points) if k >= 0 and 2 * n >= len(s.passes)]


def differ(s: Series) -> bool:
    """Whether leaving out a pass can change anything: `s` has at least 2 passes and, at some point,
    repetitions that are not all equal (a count, bytes, agree exactly in every run)."""
    if s.passes is None:
        return False
    values = np.concatenate(s.repetitions)
    if values.size < 2 or np.ptp(values) == 0 or len(labels(s)) < 2:
        return False
    ends = np.cumsum([r.size for r in s.repetitions])
    starts = np.r_[0, ends[:-1]]
    return bool(np.any(np.maximum.reduceat(values, starts) > np.minimum.reduceat(values, starts)))


def folds(s: Series) -> list[tuple[int, ...]]:
    """The groups of passes left out in turn: each pass alone, or with more than `MAX_REFITS`
    passes, `MAX_REFITS` runs of consecutive passes (a busy spell spans consecutive passes)."""
    have = labels(s)
    if len(have) <= MAX_REFITS:
        return [(k,) for k in have]
    return [tuple(int(k) for k in part) for part in np.array_split(np.array(have), MAX_REFITS)]


def fold_text(fold: Sequence[int]) -> str:
    """`repetition 2`, `repetitions 2 to 3`."""
    return f"repetition {fold[0]}" if len(fold) == 1 else f"repetitions {fold[0]} to {fold[-1]}"


def without(s: Series, fold: Sequence[int]) -> Series:
    """`s` without the runs of the passes in `fold`; a point left with none is dropped."""
    assert s.passes is not None
    sizes = np.array([r.size for r in s.repetitions])
    keep = ~np.isin(np.concatenate(s.passes), fold)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    left = np.add.reduceat(keep.astype(np.int64), starts)
    has = left > 0
    values, labels_left = np.concatenate(s.repetitions)[keep], np.concatenate(s.passes)[keep]
    if np.all(left == left[0]) and left[0] > 0:  # the common case: as many runs left at every point
        return Series(s.callpath, s.metric, s.points, tuple(values.reshape(len(left), -1)), s.unit,
                      tuple(labels_left.reshape(len(left), -1)))
    cuts = np.cumsum(left)[:-1]
    reps = [r for r, h in zip(np.split(values, cuts), has) if h]
    passes = [p for p, h in zip(np.split(labels_left, cuts), has) if h]
    return Series(s.callpath, s.metric, s.points[has], tuple(reps), s.unit, tuple(passes))


def hull(lo: np.ndarray, hi: np.ndarray, predictions: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The range (lo, hi) widened to hold the finite ones among `predictions` (shape (passes, n)),
    but not those at or below zero where the model's own prediction `own` is above it (a time is
    not negative: such a refit extrapolates a negative term, `pass_spread_warning` says so); a range
    that is nan stays nan."""
    if predictions.size == 0:
        return lo, hi
    finite = np.isfinite(predictions) & ~((np.asarray(own) > 0) & (predictions <= 0))
    with np.errstate(all="ignore"):
        low = np.where(finite, predictions, np.inf).min(axis=0)
        high = np.where(finite, predictions, -np.inf).max(axis=0)
    ok = ~np.isnan(lo) & ~np.isnan(hi)
    return np.where(ok, np.fmin(lo, low), lo), np.where(ok, np.fmax(hi, high), hi)


def spread(prediction: float, left_out: Sequence[tuple[tuple[int, ...], float]]) -> float:
    """How far the predictions with one pass left out lie from each other and from `prediction`:
    the ratio of the largest to the smallest; inf where `prediction` is above 0 and one of them is
    not (a sign flip); nan where there is none or a value is not finite, or `prediction` is not above 0."""
    values = [prediction, *(v for _, v in left_out)]
    if len(values) < 2 or not all(math.isfinite(v) for v in values) or not prediction > 0:
        return math.nan
    if min(values) <= 0:
        return math.inf
    return max(values) / min(values)


def pass_spread_warning(rows: Sequence, at_text: str, repetitions: str | None = None) -> str | None:
    """One warning for the shown rows (`ranking.RankedModel`) whose prediction one pass left out
    moves by more than `PASS_SPREAD`, naming the furthest; None where there is none. Under
    `--repetitions min` (`repetitions`) it does not advise it (review 108 F3)."""
    moved = []
    for r in rows:
        s = spread(r.prediction, r.passes)
        if s > PASS_SPREAD:  # (nan is not)
            moved.append((s, r))
    if not moved:
        return None
    moved.sort(key=lambda t: -t[0])
    s, worst = moved[0]
    unit = f" {worst.unit}" if worst.unit else ""
    low_k, low = min(worst.passes, key=lambda t: t[1])
    high_k, high = max(worst.passes, key=lambda t: t[1])
    others = [f"{r.fitted.callpath} ({r.fitted.metric}, {_ratio(v)})" for v, r in moved[1:]]
    more = f"; also {listing(others, 4)}" if others else ""
    return (f"the predictions depend on which repetition pass is left out: {worst.fitted.callpath} "
            f"({worst.fitted.metric}) predicts {worst.prediction:.4g}{unit} at {at_text} from every run, "
            f"{low:.4g}{unit} without the runs of {fold_text(low_k)} and {high:.4g}{unit} without those of "
            f"{fold_text(high_k)} ({_ratio(s)} from the smallest of these to the largest{more}): the runs of "
            f"one pass differ from the others' (a machine busy while it ran?), which the repetitions' spread "
            f"does not show, or with fewer runs other forms fit; the 80% ranges are widened to hold these "
            f"predictions (not those at or below zero); measure again on a quiet machine"
            + ("" if repetitions == "min" else ", or compare --repetitions min (a check, not a remedy: see "
               "docs/modeler.md)"))


def _ratio(s: float) -> str:
    return "a change of sign" if math.isinf(s) else f"{s:.3g}x"
