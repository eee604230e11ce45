"""Single-parameter search: `c0 + c1 * x^i * log2(x)^j` over every hypothesis and series at once.

All series given together share the parameter values `x`; arrays are laid out (series, hypothesis,
point) and every step is one numpy operation over all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hypotheses import allowed, basis
from .lstsq import pinv

#: Extra-P's minimum term contribution and its constant-cleaning threshold (both 0.05%)
TERM_CONTRIBUTION = 0.0005
CLEAN_CONSTANT = 0.0005
#: scores this close (relatively) are equal: Extra-P keeps the first of equal scores in its order, and
#: equal scores computed in another order differ in the last digits either way (review 85 F3: with
#: x = 1, 2, 4, x^(1/3) * log2(x)^2 and x^(4/3) * log2(x) fit alike, and the vectorized sums put the
#: later one 1e-14 lower, where Extra-P's loop kept the earlier; they differ 5x at x = 64)
TIE = 1e-12
#: a series with a value of 0 is weighed relatively all the same, each value's error measured against
#: at least this share of the series' median |value| (`relative_weights`)
ZERO_FLOOR = 0.1


def first_lowest(score: np.ndarray) -> np.ndarray:
    """Per row of `score` (S, H; inf: not a candidate), the index of the first score within `TIE` of
    the row's lowest: Extra-P's loop, which replaces its best only by a strictly lower score."""
    low = score.min(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return np.argmax(score <= low + TIE * np.abs(low), axis=1)


def clearly_below(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a < b` where the two are not equal within `TIE`: a later hypothesis must beat an earlier one."""
    with np.errstate(invalid="ignore"):
        return a < b - TIE * np.abs(b)


@dataclass(frozen=True)
class SingleFit:
    """Per series: chosen hypothesis (-1: constant), coefficients (c0, c1), cross-validated SMAPE/RSS."""

    hypothesis: np.ndarray
    coef: np.ndarray
    cv_smape: np.ndarray
    cv_rss: np.ndarray


def smape_terms(pred: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Per-point SMAPE contributions in percent (0 where prediction and value are both 0)."""
    diff = np.abs(pred - actual)
    abssum = np.abs(actual) + np.abs(pred)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(abssum != 0, diff / np.where(abssum != 0, abssum, 1.0) * 2.0, 0.0) * 100.0


def extrap_single(x: np.ndarray, Y: np.ndarray, allow_log: bool = True) -> SingleFit:
    """Extra-P 4.2.5's single-parameter modeler ('Basic') on series Y (S, n) measured at x (n,).

    Leave-one-out SMAPE per hypothesis (constant cleaned to 0 below 0.05% of the training minimum),
    final coefficients from all points, hypotheses with a term under 0.05% of a value rejected, and
    the in-sample SMAPE of the mean as the score to beat.
    """
    x = np.asarray(x, dtype=float)
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    S, n = Y.shape
    hyps = allowed(x, allow_log)
    T = basis(x)[hyps]  # (H, n)
    H = len(hyps)
    A = np.stack([np.ones((H, n)), T], axis=-1)  # (H, n, 2)

    mean = Y.mean(axis=1)
    const_rss = ((Y - mean[:, None]) ** 2).sum(axis=1)
    const_smape = smape_terms(mean[:, None], Y).sum(axis=1) / n

    # leave-one-out: a zero row drops that point from the least-squares problem
    train = ~np.eye(n, dtype=bool)  # (fold, point)
    P_loo = pinv(A[:, None, :, :] * train[None, :, :, None])  # (H, F, 2, n)
    c = np.einsum("hfkn,sn->shfk", P_loo, Y)
    c0, c1 = c[..., 0], c[..., 1]
    train_min = np.where(train[None], Y[:, None, :], np.inf).min(axis=-1)  # (S, F)
    tm = train_min[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        clean = np.where(tm == 0, np.abs(c0) < CLEAN_CONSTANT, np.abs(c0 / tm) < CLEAN_CONSTANT)
    c0 = np.where(clean, 0.0, c0)
    diag = np.arange(n)
    pred = c0 + c1 * T[None, :, diag]  # (S, H, F): prediction at the left-out point
    actual = Y[:, None, :]
    cv_smape = smape_terms(pred, actual).sum(axis=-1) / n
    cv_rss = ((pred - actual) ** 2).sum(axis=-1)

    coef = np.einsum("hkn,sn->shk", pinv(A), Y)  # (S, H, 2) on all points
    with np.errstate(divide="ignore", invalid="ignore"):
        contribution = np.abs(coef[..., 1:2] * T[None] / Y[:, None, :]).max(axis=-1)
    too_small = (coef[..., 1] == 0) | (contribution < TERM_CONTRIBUTION)
    ok = np.isfinite(cv_rss) & ~too_small
    score = np.where(ok & ~np.isnan(cv_smape), cv_smape, np.inf)
    best = first_lowest(score)
    rows = np.arange(S)
    take = clearly_below(score[rows, best], const_smape) & (const_rss != 0)

    hyp = np.where(take, hyps[best], -1)
    out_coef = np.where(take[:, None], coef[rows, best], np.stack([mean, np.zeros(S)], axis=1))
    return SingleFit(
        hyp,
        out_coef,
        np.where(take, cv_smape[rows, best], const_smape),
        np.where(take, cv_rss[rows, best], const_rss),
    )


def relative_weights(Y: np.ndarray) -> np.ndarray:
    """Least-squares weights that make residuals relative (1/y^2); for a series with a 0, with each
    |y| floored at `ZERO_FLOOR` times the series' median |y| (`weight_scale`)."""
    return 1.0 / weight_scale(Y) ** 2


def weight_scale(Y: np.ndarray) -> np.ndarray:
    """What each residual is measured against in `relative_weights`: |y|, floored for a series with
    a 0 (1 where all are 0)."""
    Y = np.asarray(Y, dtype=float)
    absy = np.abs(Y)
    has_zero = (absy == 0).any(axis=-1, keepdims=True)
    # a series with a 0 (a ring allreduce on one rank, a log term at x = 1) was weighed uniformly,
    # so its largest values ruled the fit and the choice (review 111: 8 (p-1)/p at 5% noise taken
    # as c/p + a p^(-1/4) log2(p) in 8 of 40 draws); it keeps relative weights, the 0 and the
    # values near it floored at `ZERO_FLOOR` x the median |value| (the mean where that is 0)
    typical = np.median(absy, axis=-1, keepdims=True)
    typical = np.where(typical == 0, np.mean(absy, axis=-1, keepdims=True), typical)
    scale = np.where(has_zero, np.maximum(absy, ZERO_FLOOR * typical), absy)
    return np.where(scale == 0, 1.0, scale)


@dataclass(frozen=True)
class RankedSingle:
    """Per series: hypotheses sorted by leave-one-out relative error (best first) and the scores."""

    order: np.ndarray  # (S, k) hypothesis indexes
    score: np.ndarray  # (S, k) mean squared relative LOO error
    constant_score: np.ndarray  # (S,)


def ranked_single(x: np.ndarray, Y: np.ndarray, k: int, allow_log: bool = True) -> RankedSingle:
    """The k best hypotheses per series by leave-one-out error of a relative (1/y^2-weighted) fit.

    Closed-form two-coefficient weighted regression, centred for stability; the exact LOO residual
    is e_i / (1 - h_ii), so no refits are needed.
    """
    x = np.asarray(x, dtype=float)
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    S, n = Y.shape
    hyps = allowed(x, allow_log)
    T = basis(x)[hyps][None]  # (1, H, n)
    w = relative_weights(Y)[:, None, :]  # (S, 1, n)
    y = Y[:, None, :]
    sw = w.sum(-1, keepdims=True)
    tbar = (w * T).sum(-1, keepdims=True) / sw
    ybar = (w * y).sum(-1, keepdims=True) / sw
    tc = T - tbar
    stt = (w * tc * tc).sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        c1 = (w * tc * (y - ybar)).sum(-1, keepdims=True) / stt
        resid = y - ybar - c1 * tc
        h = w * (1.0 / sw + tc * tc / stt)
        loo = resid / (1.0 - h)
        score = (w * loo * loo).mean(-1)  # (S, H)
        hc = w[:, 0] / sw[:, 0]
        loo_c = (Y - ybar[:, 0]) / (1.0 - hc)
        constant_score = (w[:, 0] * loo_c * loo_c).mean(-1)
    score = np.where(np.isfinite(score), score, np.inf)
    k = min(k, len(hyps))
    idx = np.argsort(score, axis=1, kind="stable")[:, :k]
    return RankedSingle(hyps[idx], np.take_along_axis(score, idx, axis=1), constant_score)
