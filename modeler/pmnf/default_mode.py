"""The default (improved) modeler.

What it changes against Extra-P, each for a measured reason (see docs/modeling.md):
- relative errors: least squares weighted by 1/y^2, because run-time noise is multiplicative;
- wider search: the single-parameter step keeps the `candidates` best terms per parameter (not
  only the best one), and every combination of them in every Extra-P structure, and with two
  parameters also a + b + a*b (`structures.default_structures`), is fitted on all points
  (Extra-P keeps one term per parameter and picks by in-sample SMAPE, which favours extra
  terms);
- a choice aimed at extrapolation (`modeler.pmnf.selection`): every hypothesis is weighted by how
  well it explains the values given the noise the repetitions show, the structure with the most
  weight is kept, and inside it the exponents whose predictions beyond the measured range have
  the least expected relative error;
- with one parameter and noisy values, the exponent with the least leave-one-out error rather than
  the best fit (`selection.loo_when_noisy`), as Extra-P chooses;
- with three or more parameters, the chosen structure's exponents are searched again over all
  hypotheses on all points (`modeler.pmnf.refine`): the few candidates per parameter that the
  combined search can afford often miss the true exponent when the data are noisy;
- terms below a measurement's accuracy: where the repetitions vary, no hypothesis with a term under
  2% of the value at every point (`selection.tiny_terms`; Extra-P's 0.05% rule, review 71 F1);
- noise-aware constant test: when the repetitions show that the deviations from a constant are
  within the measurement noise (chi-square test at 1%), the model stays constant;
- the forms in play, with their weights and coefficient covariances, are kept with each model
  (`modeler.pmnf.alternatives`) for the prediction range (`modeler.uncertainty`).
"""

from __future__ import annotations

import itertools
from typing import Collection

import numpy as np

from .alternatives import collect, stack, top_hypotheses
from .fit import GroupFit, TermSpec
from .hypotheses import allowed, basis
from .lstsq import wls, wls_columns
from .points import extrap_lines, line_values, marginal_line
from .refine import refine_exponents, structure_design
from .selection import (
    PENALTY, TERM_SHARE, class_prior, extrapolation_points, log_weights, loo_when_noisy, min_risk, noise_scale,
    noise_variance, outlier_weights, range_noise, tiny_terms,
)
from .single import ranked_single, relative_weights, weight_scale
from .structures import default_structures, extrap_structures

#: the noise test on the constant model works at 1%: z is the standard normal 99% quantile
NOISE_Z = 2.3263478740408408
#: the median of k values varies about pi/2 times more (in variance) than their mean
_MEDIAN_EFFICIENCY = np.pi / 2
_CHUNK = 400_000
#: from this many parameters on, the chosen structure's exponents are refined (`modeler.pmnf.refine`)
REFINE_FROM = 3
#: with one parameter, a series whose aggregated values vary more than this (relative standard
#: deviation from the repetitions) takes its exponent by leave-one-out error (`selection.loo_when_noisy`)
LOO_FROM_NOISE = 0.02
#: a measured series (its repetitions vary) keeps no hypothesis with a term whose share of the value
#: is below this at every point (Extra-P's term-contribution rule, at the accuracy of run-time
#: measurements instead of 0.05%): see `selection.tiny_terms`
MIN_TERM_SHARE = TERM_SHARE
#: the leave-one-out score of `selection.loo_when_noisy` measures each left-out point's error against
#: at least this share of the series' median |value| (`loo_weights`)
LOO_FLOOR = 0.1


def default_candidates(n_parameters: int) -> int:
    """Terms kept per parameter: 5 with two parameters (136 hypotheses), 3 with three (766), 1
    beyond; wider sets cost time and, with three parameters, gained nothing measurable."""
    return {2: 5, 3: 3}.get(n_parameters, 1)


def _hypotheses(n_options: list[int], rich: Collection[tuple[int, int]] = ()
                ) -> list[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]]:
    """(option per parameter (-1: none), terms as tuples of parameters) for every combination of
    candidate terms and every structure (`default_structures`) over the parameters that have a term;
    two parameters get a + b + a*b only where the pair is in `rich` (`rich_pairs`), Extra-P's four
    elsewhere."""
    out = []
    for assign in itertools.product(*[range(-1, k) for k in n_options]):
        active = [p for p, a in enumerate(assign) if a >= 0]
        structures = default_structures(len(active))
        if len(active) == 2 and tuple(active) not in rich:
            structures = extrap_structures(2)
        for st in structures:
            out.append((assign, tuple(tuple(active[i] for i in term) for term in st)))
    return out


#: a + b + a*b is fitted for a pair of parameters only where the pair's grid has this many values
#: of each and the points hold this share of it: on smaller or sparse designs its four
#: coefficients follow the noise (review 31: on 3 x 3 grids with one run the 90th percentile of
#: the error at 4x rose from 148% to 204%; on a diagonal band one fit predicted -6428 for a true
#: 560); on 4 x 4 grids it helped (review 32)
RICH_VALUES = 4
RICH_GRID = 0.8


def rich_pairs(points: np.ndarray) -> set[tuple[int, int]]:
    """The pairs of parameters (p < q) measured richly enough for a + b + a*b (`RICH_VALUES`,
    `RICH_GRID`). The grid is that of the values met with two or more values of the other
    parameter, and with at least half of the other parameter's grid values (`_grid`): points
    measured off the grid (checks inside the range) add no rows or columns to it (reviews 32 and 34:
    one such point, then three in an L, turned the structure off on a full 5 x 5 grid)."""
    out = set()
    for p, q in itertools.combinations(range(points.shape[1]), 2):
        pairs = np.unique(points[:, [p, q]], axis=0)
        rows, cols, present = _grid(pairs)
        if min(rows.size, cols.size) < RICH_VALUES:
            continue
        if present.sum() >= RICH_GRID * rows.size * cols.size:
            out.add((p, q))
    return out


def _grid(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The grid of distinct `(a, b)` pairs: its row values, column values and which cells were measured.
    A value stays in it while it is met with two or more, and at least half, of the other side's
    values in it. Values are dropped one at a time, the one met with the smallest share of the other
    side first, so a full grid's rows are never judged against columns about to go (review 35: a 4 x 4
    grid plus a line of 5 larger values was dropped whole)."""
    rv, ri = np.unique(pairs[:, 0], return_inverse=True)
    cv, ci = np.unique(pairs[:, 1], return_inverse=True)
    cells = np.zeros((rv.size, cv.size), dtype=bool)
    cells[ri.ravel(), ci.ravel()] = True
    keep_r = np.ones(rv.size, dtype=bool)
    keep_c = np.ones(cv.size, dtype=bool)
    while True:
        sub = cells & keep_r[:, None] & keep_c[None, :]
        per_r, per_c = sub.sum(axis=1), sub.sum(axis=0)
        n_r, n_c = int(keep_r.sum()), int(keep_c.sum())
        bad_r = keep_r & ((per_r < 2) | (2 * per_r < n_c))
        bad_c = keep_c & ((per_c < 2) | (2 * per_c < n_r))
        if not bad_r.any() and not bad_c.any():
            return rv[keep_r], cv[keep_c], sub
        share_r = np.where(bad_r, per_r / max(n_c, 1), np.inf)
        share_c = np.where(bad_c, per_c / max(n_r, 1), np.inf)
        r, c = int(np.argmin(share_r)), int(np.argmin(share_c))
        if share_r[r] <= share_c[c]:
            keep_r[r] = False
        else:
            keep_c[c] = False


def fit_group(
    points: np.ndarray,
    Y: np.ndarray,
    index: list[int],
    spread: np.ndarray,
    reps: np.ndarray,
    *,
    aggregate: str = "median",
    candidates: int | None = None,
    allow_log: bool = True,
    noise_test: bool = True,
    shape_spread: np.ndarray | None = None,
) -> GroupFit:
    """`shape_spread` (S, n): the spread per point that judges the forms (the weights, the choice, the
    noise test) where it differs from `spread` (runs that name their passes: `modeler.pass_noise`);
    the outlier weights and the prediction range keep `spread`."""
    S, n = Y.shape
    judging = spread if shape_spread is None else shape_spread
    P = points.shape[1]
    w = relative_weights(Y)
    odd = np.ones_like(Y)
    if aggregate not in ("min", "max"):
        odd = outlier_weights(spread, reps, aggregate)
        w = w * odd
    w_loo = loo_weights(Y, odd, LOO_FLOOR) if P == 1 else w
    ext = extrapolation_points(points)
    E = len(ext)
    # the extrapolation points ride along with zero weight: their fitted values are the predictions
    allpts = np.concatenate([points, ext])
    bases = [basis(allpts[:, p]) for p in range(P)]
    Yx = np.concatenate([Y, np.ones((S, E))], axis=1)
    wx = np.concatenate([w, np.zeros((S, E))], axis=1)

    # candidate hypothesis indexes per series and parameter: (S, K_p)
    cands: list[np.ndarray] = []
    if P == 1:
        ok = allowed(points[:, 0], allow_log) if np.unique(points[:, 0]).size >= 3 else np.array([], dtype=int)
        cands.append(np.broadcast_to(ok, (S, ok.size)))
    else:
        k = candidates or default_candidates(P)
        for p, line in enumerate(extrap_lines(points)):
            if line.x.size < 3:
                line = marginal_line(points, p)  # no line of 3 varies p alone
            if line.x.size < 3:
                cands.append(np.zeros((S, 0), dtype=int))
                continue
            cands.append(ranked_single(line.x, line_values(line, points, p, Y, odd), k, allow_log).order)

    hyps = _hypotheses([c.shape[1] for c in cands], rich_pairs(points))
    M = len(hyps)
    J = max(len(t) for _, t in hyps)
    kmax = 1 + J
    # per parameter, which row of its table each (hypothesis, term) multiplies in: a candidate,
    # ones (the parameter is not in the term) or zeros (padding: the hypothesis has fewer terms)
    slot = np.zeros((P, M, J), dtype=int)
    for p in range(P):
        K = cands[p].shape[1]
        for m, (assign, terms) in enumerate(hyps):
            for j in range(J):
                if j >= len(terms):
                    slot[p, m, j] = K + 1 if p == 0 else K
                else:
                    slot[p, m, j] = assign[p] if p in terms[j] else K
    complexity = np.array([len(t) * 100 + sum(len(x) for x in t) for _, t in hyps])

    n_coef = np.array([1 + len(t) for _, t in hyps])
    n_exp = np.array([sum(a >= 0 for a in assign) for assign, _ in hyps])  # exponents searched
    noise = noise_variance(spread, reps, aggregate) if aggregate not in ("min", "max") else np.full(S, np.nan)
    # the noise that judges the forms; `noise` (the repetitions' spread) scales the prediction range
    # (none under min or max, as `noise`: review 137 HIGH-1, `--repetitions min` judged forms by the
    # full spread, slow pass included, and `main`, 30 + 2 n, came out a constant)
    noise_j = noise if judging is spread or aggregate in ("min", "max") else noise_variance(judging, reps, aggregate)
    # values whose repetitions vary are measurements, with systematic errors of about a percent
    # between points that the repetitions do not show: terms below that share are refused there
    measured = ((reps >= 2) & (spread > 0)).any(axis=1)
    # classes: how many parameters have a term, which ones, in which structure
    keys = [(len(a), a, t) for a, t in ((tuple(p for p, x in enumerate(assign) if x >= 0), t) for assign, t in hyps)]
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    prior = class_prior(keys)

    usable = np.empty((S, M), dtype=bool)
    rss = np.empty((S, M))
    rss_j = np.empty((S, M))  # what weighs the forms (`_judged_rss`)
    by_log = np.zeros(S, dtype=bool)
    loo_rss = np.empty((S, M))
    pred = np.empty((S, M, E))
    tops = []
    step = max(1, _CHUNK // (M * (n + E) * kmax))
    for lo in range(0, S, step):
        rows = slice(lo, min(S, lo + step))
        C = _design(bases, cands, slot, rows, n + E, M, J)
        res = wls_columns(C, Yx[rows, None, :], wx[rows, None, :], cov=True)
        # a hypothesis whose fit hinges on a single point (leverage 1) cannot be judged
        usable[rows] = np.isfinite(res.loo[..., :n]).all(-1)
        if MIN_TERM_SHARE:
            tiny = tiny_terms(C[..., 1:, :n], res.coef[..., 1:], Y[rows], n_coef - 1, MIN_TERM_SHARE)
            usable[rows] &= ~(tiny & measured[rows, None])
        rss[rows] = (w[rows, None, :] * (Y[rows, None, :] - res.fitted[..., :n]) ** 2).sum(-1)
        # on the log scale where the repetitions' noise sets the weights' scale (it is above the best
        # fit's residual variance): not where no form fits and the fits' own misses set it
        best = np.min(np.where(usable[rows], rss[rows], np.inf) / np.maximum(n - n_coef, 1)[None, :], axis=1)
        with np.errstate(invalid="ignore"):
            by_log[rows] = np.isfinite(noise_j[rows]) & (noise_j[rows] >= best)
        rss_j[rows] = _judged_rss(Y[rows, None, :], res.fitted[..., :n], w[rows, None, :], rss[rows], by_log[rows, None])
        if P == 1:
            with np.errstate(invalid="ignore", over="ignore"):
                loo_rss[rows] = (w_loo[rows, None, :] * res.loo[..., :n] ** 2).sum(-1)
        pred[rows] = res.fitted[..., n:]
        lw = log_weights(np.where(usable[rows], rss_j[rows], np.inf), n_coef, n, noise_j[rows], prior)
        tops.append(top_hypotheses(lw, res.coef, res.xtwx_inv))

    rss = np.where(usable, rss, np.inf)
    rss_j = np.where(usable, rss_j, np.inf)
    chosen = min_risk(
        rss_j, n_coef, n, noise_j, pred, complexity, prior, np.array([ids[k] for k in keys]), by_risk=P > 1,
    )
    if P == 1 and LOO_FROM_NOISE is not None:
        chosen = loo_when_noisy(chosen, np.where(usable, loo_rss, np.inf), n_coef, noise_j, LOO_FROM_NOISE)

    flat = np.zeros(S, dtype=bool)
    if noise_test:
        const = next(m for m, (_, t) in enumerate(hyps) if not t)
        flat = _within_noise(Y, w, judging, reps, aggregate)
        chosen = np.where(flat, const, chosen)

    # final fits of the chosen hypotheses
    at_points = [b[:, :n] for b in bases]
    structs = [hyps[c][1] for c in chosen]
    hyp = np.zeros((S, P), dtype=int)  # hypothesis per series and parameter (0 where unused)
    for p in range(P):
        a = np.array([hyps[c][0][p] for c in chosen])
        if cands[p].shape[1]:
            hyp[:, p] = np.where(a >= 0, cands[p][np.arange(S), np.maximum(a, 0)], 0)
    if P >= REFINE_FROM:
        opts = [allowed(points[:, p], allow_log) for p in range(P)]
        hyp = refine_exponents(at_points, Y, w, structs, hyp, opts, MIN_TERM_SHARE * measured)
    X = structure_design(at_points, structs, hyp, kmax)
    res = wls(X, Y, w, cov=True)
    terms: list[list[TermSpec]] = [
        [tuple((p, int(hyp[s, p])) for p in term) for term in structs[s]] for s in range(S)
    ]
    # the forms in play for the prediction range: the heaviest hypotheses and the final model
    # (refined exponents may not be among them), weighed alike; a series the noise test found
    # flat keeps only its constant; with one run per point the covariances take the residual
    # variance corrected for the search and for its few degrees of freedom (`selection.range_noise`)
    s2 = noise_scale(rss, n_coef, n, noise)
    final_rss = (w * (Y - res.fitted) ** 2).sum(-1)
    s2_j = s2 if noise_j is noise else noise_scale(rss, n_coef, n, noise_j)
    final_lw = -0.5 * _judged_rss(Y, res.fitted, w, final_rss, by_log) / s2_j - PENALTY * 0.5 * np.log(n) * n_coef[chosen] + prior[chosen]
    alternatives = collect(
        stack(tops), lambda s, m: _terms_of(hyps[m], cands, s), range_noise(rss, n_coef, n_exp, n, noise, s2),
        (final_lw, terms, res.coef, res.xtwx_inv), flat
    )
    return GroupFit(index, points, Y, X, res.coef, w, terms, alternatives)


#: below this ratio of fit to value, a miss is judged on the log scale (`_judged_rss`)
LOG_BELOW = 0.5


def _judged_rss(Y: np.ndarray, fitted: np.ndarray, w: np.ndarray, rss: np.ndarray, use: np.ndarray) -> np.ndarray:
    """The residual sum of squares that weighs a fit against the repetitions' noise: `rss` (relative,
    w (y - f)^2), but for the series `use` (..., whose values must all be above zero) each point where
    the fit is below `LOG_BELOW` x the value counts 0.5 + log(0.5 y / f) instead of its relative miss
    (the same at f = y / 2, and unbounded as f falls to 0; a fit at or below 0 there: inf), weighted
    alike (w y^2: the outlier factors).

    A relative miss (y - f) / y is never above 1 where the fit lies below the value: a constant through
    the smallest values of a 16x rise misses the larger ones by at most 100% each, its relative RSS
    over 5 points is below 4 however steep the rise, and against the noise of a slow repetition pass
    (a relative variance of 0.33) a constant outweighed the exact law (review 133 HIGH-1). Misses
    within a factor 2, and all misses above the value, keep their relative measure: on noise of up to
    10% the weights of fits that miss by more are nil either way (benchmarks/modeler_vs_extrap.py:
    every cell the same)."""
    use = np.asarray(use) & (Y > 0).all(-1)
    if not use.any():
        return rss
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rel = (Y - fitted) / np.where(Y > 0, Y, 1.0)
        low = fitted < LOG_BELOW * Y
        far = 0.5 + np.log(LOG_BELOW * Y / np.where(fitted > 0, fitted, 1.0))
        e = np.where(low, np.where(fitted > 0, far, np.inf), rel)
        out = (w * Y**2 * e**2).sum(-1)
    return np.where(use, out, rss)


def loo_weights(Y: np.ndarray, odd: np.ndarray, floor: float) -> np.ndarray:
    """Weights (S, n) of the squared leave-one-out residuals in the one-parameter score
    (`selection.loo_when_noisy`): relative (`relative_weights`, times the outlier factors `odd`), but
    each point's error measured against at least `floor` times the series' median |value|.

    A value far below the rest (a ring allreduce on one rank, a log term at x = 1: 0.05 beside 8
    to 500) is predicted from the others with an error of the others' size; relative to its own
    value that is 400-600% and outweighs every other point 1000-fold, so the score picks the forms
    that happen to pass near that one value (terms that are 0 at x = 1: log factors) over the law
    the other points follow (review 111: `8 (p-1)/p + 0.05` at 5% noise, 17 of 40 draws taken as
    c/p + a log2(p)^2/p). What matters for extrapolation is an error against the series' scale."""
    scale = weight_scale(Y)
    typical = np.median(np.abs(Y), axis=-1, keepdims=True)
    return odd / np.maximum(scale, floor * typical) ** 2


def _terms_of(hypothesis: tuple, cands: list[np.ndarray], s: int) -> list[TermSpec]:
    """Series s's terms under one (assignment, structure) hypothesis of the combined search."""
    assign, st = hypothesis
    return [tuple((p, int(cands[p][s, assign[p]])) for p in term) for term in st]


def _design(bases, cands, slot, rows, n, M, J) -> np.ndarray:
    """Design columns (R, M, 1 + J, n) of every hypothesis for the series `rows`."""
    C = None
    for p, b in enumerate(bases):
        c = cands[p][rows]  # (R, K)
        R, K = c.shape
        table = np.empty((R, K + 2, n))
        table[:, :K] = b[c]
        table[:, K] = 1.0
        table[:, K + 1] = 0.0
        if C is None:
            C = np.empty((R, M, 1 + J, n))
            C[:, :, 0] = 1.0
            C[:, :, 1:] = table[:, slot[p]]
        else:
            C[:, :, 1:] *= table[:, slot[p]]
    return C


def _within_noise(Y, w, spread, reps, aggregate: str) -> np.ndarray:
    """True where a constant explains the values within the noise the repetitions show."""
    S, n = Y.shape
    has_reps = (reps >= 2).all(axis=1) & (spread > 0).all(axis=1)
    var = spread**2 / np.maximum(reps, 1)
    if aggregate == "median":
        var = var * _MEDIAN_EFFICIENCY
    elif aggregate in ("min", "max"):
        return np.zeros(S, dtype=bool)  # extremes of the repetitions: no simple noise law
    mean = (w * Y).sum(-1, keepdims=True) / w.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (Y - mean) / np.abs(Y)
        # multiplicative noise is additive in log space; the relative deviation above is bounded by
        # 1 for values above the mean, so under large noise a clear growth could pass for flat.
        # Positive series use log deviations from their (weighted) log mean instead.
        positive = (Y > 0).all(-1, keepdims=True)
        logy = np.log(np.where(positive, Y, 1.0))
        lw = w * np.where(positive, Y, 1.0) ** 2  # relative weights (1/y^2) become uniform in log space
        logdev = logy - (lw * logy).sum(-1, keepdims=True) / lw.sum(-1, keepdims=True)
        stat = (np.where(positive, logdev, rel) ** 2 / var).sum(-1)
    return has_reps & (stat <= _chi2_quantile(n - 1))


def _chi2_quantile(df: int) -> float:
    """Chi-square 99% quantile by Wilson and Hilferty's cube-root approximation (within 1% for
    df >= 2); importing scipy.stats for it would cost more than the whole fit."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + NOISE_Z * np.sqrt(a)) ** 3
