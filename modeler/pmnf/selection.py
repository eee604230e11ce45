"""Choosing one hypothesis for extrapolation: the minimum expected prediction error.

With five noisy values per parameter many hypotheses are nearly the same curve on the measured
points and very different beyond them. Picking the single best-scoring one (in-sample or
cross-validated) bets everything on the noise; Extra-P and the previous default did that, and
their large errors at 4x the largest value came from those bets. Here every hypothesis gets a
weight from how well it explains the values given the noise the repetitions show (a Gaussian
likelihood of the relative residuals with a BIC-like penalty per coefficient), and the chosen
one is the hypothesis whose predictions beyond the measured range are closest, in expected
relative error under those weights, to all the others: the Bayes decision for the error users
see. Noise-free data give a one-hot weight on the exact fit, so nothing changes there.
"""

from __future__ import annotations

import numpy as np

#: relative noise variance assumed when the repetitions show none (exact data, one repetition);
#: far below any real noise but above the rounding error of the fits
NOISE_FLOOR = 1e-18
#: weight of the per-coefficient penalty, in units of BIC's ln(n)/2
PENALTY = 1.0
#: hypotheses with the highest weights that take part in the decision (keeps it M x M small)
TOP = 48
DECISION = "risk"


def extrapolation_points(points: np.ndarray) -> np.ndarray:
    """Points beyond the measured range where the choice is judged: all parameters at 2x and 4x
    their largest values, and each parameter alone at 4x (the others at their largest)."""
    top = points.max(axis=0)
    out = [2.0 * top, 4.0 * top]
    if points.shape[1] > 1:
        for p in range(points.shape[1]):
            e = top.copy()
            e[p] *= 4.0
            out.append(e)
    return np.array(out)


def noise_variance(spread: np.ndarray, reps: np.ndarray, aggregate: str) -> np.ndarray:
    """Per series, the relative variance of one aggregated value: the pooled relative variance of
    the repetitions over their count (the median varies pi/2 times more). (S,)"""
    var = spread**2 / np.maximum(reps, 1)
    if aggregate == "median":
        var = var * (np.pi / 2)
    ok = reps >= 2
    n_ok = ok.sum(-1)
    pooled = np.where(ok, var, 0.0).sum(-1) / np.maximum(n_ok, 1)
    return np.where(n_ok > 0, np.maximum(pooled, NOISE_FLOOR), np.nan)


def class_prior(classes: list[tuple]) -> np.ndarray:
    """Log prior per hypothesis from its class path, e.g. (number of parameters with a term,
    which ones, which structure): each level splits its mass equally among the branches below
    it, and a class's hypotheses share its mass. Without it, the many variants of a richer
    structure (3 x 3 exponent pairs per structure with two parameters, 23 structures with
    three) outvote the few simple hypotheses just by their number, and spurious terms win."""
    children: dict[tuple, set] = {}
    for c in classes:
        for d in range(len(c)):
            children.setdefault(c[:d], set()).add(c[d])
    size: dict[tuple, int] = {}
    for c in classes:
        size[c] = size.get(c, 0) + 1
    out = []
    for c in classes:
        lp = -np.log(size[c])
        for d in range(len(c)):
            lp -= np.log(len(children[c[:d]]))
        out.append(lp)
    return np.array(out)


def min_risk(
    rss: np.ndarray,
    n_coef: np.ndarray,
    n: int,
    noise: np.ndarray,
    pred: np.ndarray,
    complexity: np.ndarray,
    log_prior: np.ndarray | None = None,
    classes: np.ndarray | None = None,
) -> np.ndarray:
    """Index of the chosen hypothesis per series.

    `rss` (S, M): relative (1/y^2-weighted) residual sum of squares of every hypothesis (inf when
    unusable); `n_coef` (M,): coefficients per hypothesis; `noise` (S,): relative variance of a
    value (nan: unknown, then estimated from the best fit); `pred` (S, M, E): predictions at the
    extrapolation points; `complexity` (M,): tie-break, lower first.
    """
    S, M = rss.shape
    usable = np.isfinite(rss) & np.isfinite(pred).all(-1)
    rss = np.where(usable, rss, np.inf)
    dof = np.maximum(n - n_coef, 1)
    fallback = np.min(np.where(usable, rss / dof[None, :], np.inf), axis=1)
    s2 = np.where(np.isnan(noise), fallback, noise)
    s2 = np.maximum(np.where(np.isfinite(s2), s2, NOISE_FLOOR), NOISE_FLOOR)
    logw = -0.5 * rss / s2[:, None] - PENALTY * 0.5 * np.log(n) * n_coef[None, :]
    if log_prior is not None:
        logw = logw + log_prior[None, :]
    # a tiny tie-break so that exact ties (nested models fitting equally) go to the simplest
    logw = logw - 1e-9 * complexity[None, :]
    if DECISION == "map":
        return np.argmax(logw, axis=1)
    if DECISION == "class" and classes is not None:
        # the class (structure) with the most posterior mass, then exponents by risk inside it
        ncls = int(classes.max()) + 1
        m = logw.max(axis=1, keepdims=True)
        mass = np.zeros((S, ncls))
        np.add.at(mass.T, classes, np.exp(logw - m).T)
        best_cls = np.argmax(mass, axis=1)
        logw = np.where(classes[None, :] == best_cls[:, None], logw, -np.inf)
    k = min(TOP, M)
    top = np.argsort(-logw, axis=1, kind="stable")[:, :k]  # (S, k)
    lw = np.take_along_axis(logw, top, axis=1)
    lw = lw - lw[:, :1]
    wt = np.where(np.isfinite(lw), np.exp(lw), 0.0)
    wt = wt / wt.sum(-1, keepdims=True)
    pr = np.take_along_axis(pred, top[:, :, None], axis=1)  # (S, k, E)
    with np.errstate(divide="ignore", invalid="ignore"):
        # loss[s, a, b]: relative error of choosing a when b is true, averaged over the points
        loss = (np.abs(pr[:, :, None, :] - pr[:, None, :, :]) / np.abs(pr[:, None, :, :])).mean(-1)
    loss = np.where(np.isfinite(loss), loss, 1e300)
    risk = np.einsum("sab,sb->sa", loss, wt)
    # equal risks (exact copies of one curve) go to the heaviest, which is also the simplest
    best = np.argmin(risk - 1e-12 * wt, axis=1)
    return top[np.arange(S), best]
