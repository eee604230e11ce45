"""The noise that judges a model's form, where the runs name their repetition pass.

The launcher runs the repetitions in passes (`modeler.passes`). Whatever slows a whole pass by one
factor (other work on the machine for as long as it ran, a throttled clock) multiplies every point's
run of that pass alike: the aggregate of each point is then the truth times the same factor, and the
form is as exact as without it. The repetitions' spread at a point takes such a pass for independent
noise around the truth, and the choice of the form, which weighs each form's misses against that
noise, then finds no form better than a constant (review 133 HIGH-1: `2 n` over n = 1..16, one pass of
3 at 4x: a spread of 57% of the value, and a constant "within" it).

So where the runs name their passes, the spread the choice uses is that of the runs with each pass's
common factor taken out: in log space, a run's deviation from its point's mean, less its pass's
typical deviation over the points (the median: a pass slowed at a few points only, as in review 62,
keeps its slow runs as noise there and leaves the others alone). On independent noise this estimates
the same variance as the plain spread (`CORRECTION` makes it unbiased for the usual designs), and it is
used only where the passes make most of the spread (`GATE`), so that series measured without a slow
pass are judged as before: at every point (its largest over the points, so that a pass slow at
most of them but not all, whose median effect leaves the others' residuals large, keeps the plain
spread: review 137 HIGH-2), with 3 runs a point or more (`MIN_RUNS`). The variance of the
aggregate follows from it as the aggregate is made: a mean of runs at different levels varies as its
heavier runs do, a median as one run; where the robust
aggregate keeps a slow pass at some points and not at others, the plain spread stays. The prediction
range keeps the plain spread (the level is as uncertain as the passes disagree), and the refits
without each pass (`modeler.passes`) still show what one pass moves.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from .dataset import Series, robust_kept, robust_table_kept
from . import passes as passes_mod


#: the pass-corrected spread is used only where its variance (the largest over the points, since
#: review 137; the median before) is below the plain spread's (the median over the points) by this
#: factor: where the passes' common factors make most of the spread. On independent noise the median
#: passed by chance in under 1% of series of 5 points and 3 runs (research 135, 4000 draws of ±5%
#: uniform noise: the ratio's 99th percentile 9.4 with 3 runs, 3.5 with 5), the largest in none of
#: 2000 (review 137); one pass 1.2x slow at every point under 2% noise gives about 80. A pass slowed
#: at a few points only (review 62) is left to the outlier weights and
#: the refits without each pass, as before: removing its median effect makes the spread no smaller.
GATE = 10.0

#: the fewest runs a point (the median over the points) for the pass-corrected spread to be used
MIN_RUNS = 3


def _correction(n_points: int, n_runs: int) -> float:
    """The factor that makes the per-point variance of the interaction residuals unbiased for
    independent (log-normal) noise, for `n_points` points of `n_runs` runs each where every pass's
    effect is the median over the points of its runs' deviations (measured by simulation,
    `_calibrate`; between 1.0 and about 1.35)."""
    if n_points < 3:
        return 1.0
    if n_points > 9:
        return 1.0 + 0.6 / n_points
    return CORRECTION[n_points][min(max(n_runs, 2), 6) - 2]


#: `_calibrate(points, runs)` for 3 to 9 points and 2 to 6 runs (beyond 9 points about 1 + 0.6 / points)
CORRECTION: dict[int, tuple[float, ...]] = {
    3: (1.275, 1.326, 1.32, 1.314, 1.311),
    4: (1.243, 1.266, 1.264, 1.264, 1.264),
    5: (1.119, 1.157, 1.149, 1.145, 1.143),
    6: (1.127, 1.15, 1.145, 1.144, 1.143),
    7: (1.073, 1.102, 1.096, 1.094, 1.093),
    8: (1.081, 1.1, 1.097, 1.098, 1.094),
    9: (1.054, 1.075, 1.073, 1.069, 1.067),
}


def shape_spreads(series: Sequence[Series], how: str) -> list[np.ndarray | None]:
    """`shape_spread` of each of `series`; those whose runs are labelled alike at every point (each
    point has one run of each of the same passes: the launcher's sweeps) in one array pass per set of
    such series measured alike (a run at a time cost 2.5x the whole fit of 300 call paths)."""
    out: list[np.ndarray | None] = [None] * len(series)
    if how in ("min", "max"):
        return out
    groups: dict[tuple[int, int], list[tuple[int, np.ndarray]]] = {}
    for i, s in enumerate(series):
        if s.passes is None:
            continue
        sizes = {r.size for r in s.repetitions}
        P = np.stack(s.passes) if len(sizes) == 1 else None
        if P is None or P.shape[1] < 2:
            out[i] = shape_spread(s, how)
            continue
        order = np.argsort(P, axis=1, kind="stable")
        labels = np.take_along_axis(P, order, axis=1)
        if not ((labels == labels[:1]).all() and (labels[0] >= 0).all() and (np.diff(labels[0]) > 0).all()):
            out[i] = shape_spread(s, how)  # passes that differ between points, or runs that name none
            continue
        R = np.take_along_axis(np.stack(s.repetitions).astype(float), order, axis=1)
        groups.setdefault(R.shape, []).append((i, R))
    for items in groups.values():
        R = np.stack([r for _, r in items])  # (S, points, passes)
        ok = (R > 0).all(axis=(1, 2)) & np.isfinite(R).all(axis=(1, 2))
        keep = robust_table_kept(np.where(ok[:, None, None], R, 1.0))[1] if how == "robust" else np.ones(R.shape, bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            logy = np.where(keep & ok[:, None, None], np.log(np.where(ok[:, None, None], R, 1.0)), np.nan)
        spreads = _from_table(logy, np.ones(R.shape[2], dtype=bool), how)
        for (i, _), good, sp in zip(items, ok, spreads):
            out[i] = sp if good else None
    return out


def interaction(logy: np.ndarray, labelled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(..., points, runs) log values (nan: no run) -> (the residuals with each point's mean and each
    labelled run column's median deviation over the points taken out, nan where there is no run; those
    effects (..., 1, runs), 0 for the columns not `labelled` (runs,))."""
    dev = logy - _nanmean(logy)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column without runs: its effect is nan
        effect = np.nanmedian(dev, axis=-2, keepdims=True)
    effect = np.where(labelled & np.isfinite(effect), effect, 0.0)
    r = dev - effect
    return r - _nanmean(r), effect


def _nanmean(a: np.ndarray) -> np.ndarray:
    """Over the last axis, ignoring nan (nan where all are), keeping the axis; no warning."""
    n = np.isfinite(a).sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.nansum(a, axis=-1, keepdims=True) / np.maximum(n, 1), np.nan)


def _from_table(logy: np.ndarray, labelled: np.ndarray, how: str) -> list[np.ndarray | None]:
    """Per series of the (S, points, runs) log table: the pass-corrected spread per point, or None
    where the gate (`GATE`) keeps the plain one."""
    r, effect = interaction(logy, labelled)
    present = np.isfinite(logy)
    k = present.sum(axis=-1)  # (S, points)
    many = k >= 2
    dof = np.maximum(k - 1, 1)
    n_many = many.sum(axis=-1)
    runs = np.array([int(np.median(row)) for row in k]) if len(set(map(int, k.ravel()))) > 1 else np.full(len(k), int(k.flat[0]))
    c = np.array([_correction(int(a), int(b)) for a, b in zip(n_many, runs)])
    var = np.where(many, c[:, None] * np.nansum(r**2, axis=-1) / dof, 0.0)
    plain_var = np.where(many, np.nansum((logy - _nanmean(logy)) ** 2, axis=-1) / dof, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a series without a repeated point: nan, refused
        # against the corrected spread's largest over the points: a pass slow at most of the points
        # but not all has a median effect that leaves the others' residuals large (review 137 HIGH-2:
        # with the median there, constants under --repetitions mean took a term 18-20 times in 20)
        use = np.nanmedian(np.where(many, plain_var, np.nan), axis=-1) > GATE * np.nanmax(np.where(many, var, np.nan), axis=-1)
    # with 2 runs a point the interaction has too few degrees of freedom: the gate passed by chance
    # for about 9% of series of independent noise (review 137 MED-3)
    use &= runs >= MIN_RUNS
    if how != "median":
        # the mean of runs at different levels varies as much as its heavier runs do: each run's share
        # of the sum, squared and summed, times the variance of one run (1 / runs where they are alike;
        # with one pass 4x slow of 3, 1 / 2), in place of the 1 / runs the engine assumes
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(present, np.exp(logy - np.nanmax(np.where(present, logy, -np.inf), axis=-1, keepdims=True)), 0.0)
            share = y / np.maximum(y.sum(axis=-1, keepdims=True), 1e-300)
        var = var * np.where(many, k * (share**2).sum(axis=-1), 1.0)
        # where the robust aggregate keeps the slow pass at some points and not at others, its values
        # carry the pass's factor at those points only: a step that no noise of the runs explains
        # (research 135: a constant whose last point kept it came out as 48 + 1e-4 x^3 log2(x), 40x
        # high at 4x); the plain spread stays there
        with np.errstate(divide="ignore"):  # a point without runs: -inf, not among `many`
            level = np.log(np.where(present, np.exp(np.broadcast_to(effect, logy.shape)), 0.0).sum(axis=-1)
                           / np.maximum(k, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            step = np.nanmax(np.abs(np.where(many, level - np.nanmedian(np.where(many, level, np.nan), axis=-1,
                                                                         keepdims=True), np.nan)), axis=-1)
            typical = np.sqrt(np.nanmedian(np.where(many, var / np.maximum(k, 1), np.nan), axis=-1))
        use &= ~(step > 2.0 * typical)
    if how == "median":
        # the median of runs whose passes lie apart by more than their noise is (about) the run of one
        # pass: the variance of one run, not the pi/2 / runs of alike runs that the engine assumes for
        # the median (`selection.noise_variance`), so the spread given is scaled to give that (with
        # pi/2 / runs, constants under 2% noise and one pass 2.2x slow took a term 15 times in 300;
        # research 135)
        var = var * k * (2.0 / np.pi)
    sd = np.sqrt(var)
    return [sd[row] if use[row] and n_many[row] > 0 else None for row in range(len(logy))]


def shape_spread(s: Series, how: str) -> np.ndarray | None:
    """Per point of `s`, the relative spread (log standard deviation) of its runs with each pass's
    common factor taken out (module doc); None where that does not apply: no pass labels, fewer than
    2 passes with runs at half of the points or more (`passes.labels`), a value at or below zero, a
    pass with two runs at one point, the extremes (`how` min or max), or where the passes' factors do
    not make most of the spread (`GATE`)."""
    if how in ("min", "max") or s.passes is None:
        return None
    have = passes_mod.labels(s)
    if len(have) < 2:
        return None
    values = np.concatenate(s.repetitions)
    if not np.all(values > 0) or not np.all(np.isfinite(values)):
        return None
    keep = robust_kept(s.repetitions) if how == "robust" else [np.ones(r.size, dtype=bool) for r in s.repetitions]
    cols = {k: j for j, k in enumerate(have)}
    n_other = int(sum((~np.isin(p, have)).sum() for p in s.passes))
    logy = np.full((len(s.repetitions), len(have) + n_other), np.nan)
    other = len(have)
    for i, (r, p, k) in enumerate(zip(s.repetitions, s.passes, keep)):
        seen = set()
        for v, lab, kk in zip(r, p, k):
            if int(lab) in cols:
                if int(lab) in seen:
                    return None
                seen.add(int(lab))
                if kk:
                    logy[i, cols[int(lab)]] = np.log(v)
            else:  # a run that names no pass, or a pass at few points: a column of its own, no effect
                if kk:
                    logy[i, other] = np.log(v)
                other += 1
    return _from_table(logy[None], np.arange(logy.shape[1]) < len(have), how)[0]


def _calibrate(n_points: int, n_runs: int, draws: int = 20000, seed: int = 0) -> float:
    """E[sum r^2 / (runs - 1)] under independent standard normal log noise, inverted: the correction."""
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(draws, n_points, n_runs))
    dev = e - e.mean(axis=2, keepdims=True)
    eff = np.median(dev, axis=1, keepdims=True)
    r = dev - eff
    r = r - r.mean(axis=2, keepdims=True)
    return float(1.0 / ((r**2).sum(axis=2) / (n_runs - 1)).mean())
