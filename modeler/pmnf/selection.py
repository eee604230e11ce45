"""Choosing one hypothesis for extrapolation, by its expected prediction error.

With five noisy values per parameter many hypotheses are nearly the same curve on the measured
points and very different beyond them. Picking the single best-scoring one (in-sample or
cross-validated) bets everything on the noise. Here every hypothesis gets a weight: a Gaussian
likelihood of its relative residuals given the noise the repetitions show, a penalty per
coefficient (BIC's, 4 times: measured) and a prior that gives every class of hypotheses (how
many parameters have a term, which ones, in which structure) its equal share. The structure
with the most weight is kept; inside it, the chosen exponents are those whose predictions
beyond the measured range have the least expected relative error against all the others under
those weights: the Bayes decision for the error users see when they extrapolate (with one
parameter the heaviest hypothesis is taken instead: the expected-error choice was level there).
Noise-free data put all the weight on the exact fit, so nothing changes there.
"""

from __future__ import annotations

import numpy as np

from .quantiles import t_quantiles

#: relative noise variance below which two fits are equally exact (rounding error of the fits)
NOISE_FLOOR = 1e-18
#: weight of the per-coefficient penalty, in units of BIC's ln(n)/2; 4 recovered more forms
#: and extrapolated better than 1, 2 (too many spurious terms) or 6 and 10 (level) on the
#: benchmark with 2 and 3 parameters
PENALTY = 4.0
#: hypotheses with the highest weights that take part in the decision (keeps it k x k small)
TOP = 48
_CHUNK = 2_000_000
#: the least share of the value that a term of a measured series must reach at some measured point
#: (`tiny_terms`)
TERM_SHARE = 0.02


def tiny_terms(cols: np.ndarray, coef: np.ndarray, y: np.ndarray, n_terms: np.ndarray, share: float | np.ndarray
               ) -> np.ndarray:
    """Per series and hypothesis (..., M): whether one of its terms stays below `share` of the
    value at every measured point. `cols` (..., M, J, n): the terms' design columns, `coef`
    (..., M, J) their coefficients, `y` (..., n) the values, `n_terms` (M,) how many of the J are
    terms (the rest is padding); `share` a number or per series (...,).

    This is Extra-P's term-contribution rule (a hypothesis is ignored where one of its terms
    contributes less than 0.05%) at the accuracy of run-time measurements: runs at different points
    differ systematically by a percent or so (timer and wake-up jitter, contention, caches), which the
    repetitions at one point do not show, so the likelihood takes such a deviation for a law. Fitted
    as a term that grows faster than the rest, it then rules the extrapolation and the ranking (review
    71 F1: a region that was 1e-3 * work / ranks within 0.1-1.5% got a ranks^(3/2) * work term of 1%,
    was ranked the worst scaling, and was predicted 2.8x too slow at 64 ranks)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        part = np.abs(coef[..., None] * cols) / np.abs(y)[..., None, None, :]
        part = np.where(np.isnan(part), 0.0, part)  # 0 / 0: a zero term at a zero value
        peak = part.max(-1)  # (..., M, J)
    is_term = np.arange(cols.shape[-2])[None, :] < np.asarray(n_terms)[:, None]  # (M, J)
    share = np.asarray(share, dtype=float)[..., None, None]
    return ((peak < share) & is_term).any(-1)


def extrapolation_points(points: np.ndarray) -> np.ndarray:
    """Points beyond the measured range where the choice is judged: all parameters at 2x and 4x
    their largest values, and with several parameters each one alone at 4x."""
    top = points.max(axis=0)
    out = [2.0 * top, 4.0 * top]
    if points.shape[1] > 1:
        for p in range(points.shape[1]):
            e = top.copy()
            e[p] *= 4.0
            out.append(e)
    return np.array(out)


def noise_variance(spread: np.ndarray, reps: np.ndarray, aggregate: str) -> np.ndarray:
    """Per series, the relative variance of one aggregated value: the repetitions' relative
    variance over their count, pooled over the points (the median varies pi/2 times more).
    nan where no point has 2 repetitions or they are all equal: then it is estimated from the fits."""
    var = spread**2 / np.maximum(reps, 1)
    if aggregate == "median":
        var = var * (np.pi / 2)
    ok = reps >= 2
    n_ok = ok.sum(-1)
    # Pooled by the median, not the mean: one point whose few repetitions disagree wildly (a
    # straggler, a cold cache) must not make a clearly growing series look like pure noise. Each
    # per-point estimate is a scaled chi-square with k = reps - 1 degrees of freedom, whose median
    # is k * (1 - 2/(9k))^3 (Wilson-Hilferty): divide by it so that homogeneous noise stays unbiased.
    # series without any repeated point get nan here (and no all-NaN warning: that is expected)
    has = n_ok > 0
    pooled = np.full(var.shape[:-1], np.nan)
    k = np.ones(var.shape[:-1])
    if has.any():
        pooled[has] = np.nanmedian(np.where(ok, var, np.nan)[has], axis=-1)
        k[has] = np.maximum(np.nanmedian(np.where(ok, reps, np.nan)[has], axis=-1) - 1.0, 1.0)
    pooled = pooled / (1.0 - 2.0 / (9.0 * k)) ** 3
    return np.where((n_ok > 0) & (pooled > 0), pooled, np.nan)


#: a point whose repetitions vary this many times more than the series' typical point is an outlier
OUTLIER_RATIO = 10.0


def outlier_weights(spread: np.ndarray, reps: np.ndarray, aggregate: str) -> np.ndarray:
    """Per point (S, n), a factor <= 1 on its fit weight: 1 for ordinary points, less for a point whose
    repetitions disagree far more than the series' typical point (a straggler run), so that one bad
    measurement cannot bend the model or pass a growing series off as noise. The threshold is well
    beyond what sampling alone gives (chi-square, even with 2 repetitions: ~3% of points)."""
    var = spread**2 / np.maximum(reps, 1)
    if aggregate == "median":
        var = var * (np.pi / 2)
    typical = noise_variance(spread, reps, aggregate)
    limit = OUTLIER_RATIO * np.where(np.isnan(typical), np.inf, typical)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where((reps >= 2) & (var > limit), limit / var, 1.0)
    return np.where(np.isfinite(factor), factor, 1.0)


def class_prior(classes: list[tuple]) -> np.ndarray:
    """Log prior per hypothesis from its class path, e.g. (number of parameters with a term,
    which ones, which structure): each level splits its mass equally among the branches below
    it, and a class's hypotheses share its mass. Without it, the many variants of a richer
    structure (5 x 5 exponent pairs per structure with two parameters, 23 structures with
    three) outvote the few simple hypotheses just by their number, and spurious terms win."""
    children: dict[tuple, set] = {}
    size: dict[tuple, int] = {}
    for c in classes:
        size[c] = size.get(c, 0) + 1
        for d in range(len(c)):
            children.setdefault(c[:d], set()).add(c[d])
    out = []
    for c in classes:
        lp = -np.log(size[c])
        for d in range(len(c)):
            lp -= np.log(len(children[c[:d]]))
        out.append(lp)
    return np.array(out)


def noise_scale(rss: np.ndarray, n_coef: np.ndarray, n: int, noise: np.ndarray) -> np.ndarray:
    """Per series (S,), the relative noise variance of one value that the weights use: the
    repetitions' (`noise`), or the best hypothesis's residual variance where that is larger or
    the repetitions give none; never below `NOISE_FLOOR`."""
    dof = np.maximum(n - n_coef, 1)
    fallback = np.min(np.where(np.isfinite(rss), rss / dof[None, :], np.inf), axis=1)
    fallback = np.where(np.isfinite(fallback), fallback, 0.0)
    return np.maximum(np.where(np.isnan(noise), fallback, np.maximum(noise, fallback)), NOISE_FLOOR)


#: the standard normal's 90% quantile: the upper end of the 80% prediction range (`ranking.RANGE_LEVEL`)
RANGE_Z = 1.2815515655446004


def range_noise(rss: np.ndarray, n_coef: np.ndarray, n_exp: np.ndarray, n: int, noise: np.ndarray,
                s2: np.ndarray) -> np.ndarray:
    """Per series (S,), the noise variance that scales the covariances of the forms in play (the
    prediction range, `modeler.pmnf.alternatives`): `s2` (`noise_scale`) where the repetitions give
    a noise (`noise` not nan), unchanged. Where they give none (one run per point), `s2` is the best
    fit's residual variance, which is low for two reasons that the range must not inherit:
    - the best of the hypotheses is the one that fitted the noise best: counting each searched
      exponent (`n_exp` (M,): the parameters with a term) as a fitted coefficient, RSS / (n - k - q)
      is about unbiased on the benchmark's functions (mean over 900 draws 1.03-1.25 x the true
      variance with one parameter, 1.00-1.04 with two; RSS / (n - k): 0.68-0.83 and 0.91-0.94);
    - it is an estimate from nu = n - k - q residuals (2 with five points and one parameter): a form's
      prediction is then Student-t, not normal; its covariance is scaled by (t_nu / z)^2 at the 80%
      range's quantile, so that the normal's 80% range is the t's (other levels are not matched).
    The weights are left alone: they decide the strong-scaling form (`strong_scaling.admits_rise`)
    and the level-growth flags (`modeler.level_growth`), which must not move (research 116)."""
    dof = np.maximum(n - n_coef - n_exp, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        per = np.where(np.isfinite(rss), rss / dof[None, :], np.inf)
    best = np.argmin(per, axis=1)
    fallback = per[np.arange(len(per)), best]
    fallback = np.where(np.isfinite(fallback), fallback, 0.0)
    scale = (t_quantiles(0.9, dof[best]) / RANGE_Z) ** 2
    return np.where(np.isnan(noise), np.maximum(fallback * scale, s2), s2)


def log_weights(
    rss: np.ndarray, n_coef: np.ndarray, n: int, noise: np.ndarray, log_prior: np.ndarray | None = None
) -> np.ndarray:
    """Unnormalized log posterior weights (S, M); see `min_risk` for the arguments.

    Where the repetitions give no noise (nan), or the best hypothesis leaves more than they show
    (the function is not exactly in the family, e.g. deterministic counts), the residual variance
    of the best hypothesis is used instead: never a scale under what any model can reach."""
    s2 = noise_scale(rss, n_coef, n, noise)
    logw = -0.5 * rss / s2[:, None] - PENALTY * 0.5 * np.log(n) * n_coef[None, :]
    if log_prior is not None:
        logw = logw + log_prior[None, :]
    return np.where(np.isfinite(rss), logw, -np.inf)


def min_risk(
    rss: np.ndarray,
    n_coef: np.ndarray,
    n: int,
    noise: np.ndarray,
    pred: np.ndarray,
    complexity: np.ndarray,
    log_prior: np.ndarray | None = None,
    classes: np.ndarray | None = None,
    by_risk: bool = True,
) -> np.ndarray:
    """Index of the chosen hypothesis per series (S,).

    `rss` (S, M): relative (1/y^2-weighted) residual sum of squares of every hypothesis on the
    `n` points (inf: unusable); `n_coef` (M,): coefficients per hypothesis; `noise` (S,): relative
    variance of one value (nan: unknown); `pred` (S, M, E): predictions at the extrapolation
    points; `complexity` (M,): tie-break among equal weights, lower first; `log_prior` (M,);
    `classes` (M,): class id per hypothesis (the structure is chosen first, by summed weight);
    `by_risk`: inside the class, the least expected extrapolation error (else the heaviest).
    """
    S, M = rss.shape
    # exact ties (nested models that fit equally well) go to the simplest
    logw = log_weights(rss, n_coef, n, noise, log_prior) - 1e-9 * complexity[None, :]
    if classes is not None:
        m = logw.max(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):
            rel = np.where(np.isfinite(logw), np.exp(logw - np.where(np.isfinite(m), m, 0.0)), 0.0)
        mass = np.zeros((int(classes.max()) + 1, S))
        np.add.at(mass, classes, rel.T)
        best_class = np.argmax(mass, axis=0)
        logw = np.where(classes[None, :] == best_class[:, None], logw, -np.inf)
    if not by_risk:
        return np.argmax(logw, axis=1)
    k = min(TOP, M)
    top = np.argsort(-logw, axis=1, kind="stable")[:, :k]  # (S, k), heaviest first
    lw = np.take_along_axis(logw, top, axis=1)
    with np.errstate(invalid="ignore"):
        wt = np.where(np.isfinite(lw), np.exp(lw - np.where(np.isfinite(lw[:, :1]), lw[:, :1], 0.0)), 0.0)
    wt = wt / np.where(wt.sum(-1, keepdims=True) > 0, wt.sum(-1, keepdims=True), 1.0)
    pr = np.take_along_axis(pred, top[:, :, None], axis=1)  # (S, k, E)
    risk = np.empty((S, k))
    step = max(1, _CHUNK // (k * k * pr.shape[-1]))  # the pairwise losses are S x k x k x E
    for lo in range(0, S, step):
        loss = _pairwise_loss(pr[lo : lo + step])
        risk[lo : lo + step] = np.einsum("sab,sb->sa", loss, wt[lo : lo + step])
    risk = np.where(wt > 0, risk, np.inf)
    # among equal risks (copies of one curve) the heaviest, which comes first
    best = np.argmin(risk, axis=1)
    return top[np.arange(S), best]


def _pairwise_loss(p: np.ndarray) -> np.ndarray:
    """loss[s, a, b] for predictions p (S, k, E): the relative error of predicting with a when b is
    true, mean over the E points (1e300 where not finite). One point at a time into one buffer: the
    (S, k, k, E) temporaries took 2.7 times as long, for the same values bit for bit."""
    S, k, E = p.shape
    by_point = np.ascontiguousarray(np.moveaxis(p, 2, 0))  # (E, S, k)
    loss = np.zeros((S, k, k))
    d = np.empty((S, k, k))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for q in by_point:
            np.subtract(q[:, :, None], q[:, None, :], out=d)
            np.abs(d, out=d)
            np.divide(d, np.abs(q)[:, None, :], out=d)
            loss += d
        loss /= E
    return np.where(np.isfinite(loss), loss, 1e300)


def loo_when_noisy(
    chosen: np.ndarray, loo_rss: np.ndarray, n_coef: np.ndarray, noise: np.ndarray, threshold: float
) -> np.ndarray:
    """With one parameter: where a series' values are noisy (relative standard deviation of one
    value, `sqrt(noise)`, above `threshold`) and a term was chosen, the hypothesis with a term whose
    leave-one-out residuals (`loo_rss` (S, M), relative, inf: unusable) are smallest instead.

    On five noisy points the best in-sample fit leans to curves that bend through the noise and
    extrapolate wildly; leave-one-out scoring (Extra-P's criterion) does not, but at low noise it
    throws away precision the best fit keeps. Measured on the benchmark: at 10% noise 8 more forms
    and median error 5.5% -> 5.2% (seeds 1, 11), p90 37.9% -> 35.9% on four other sets; at 2% and
    5% noise nothing moves (docs/modeling.md)."""
    with np.errstate(invalid="ignore"):
        noisy = np.sqrt(noise) > threshold  # nan (no repetitions): not noisy
    score = np.where((n_coef > 1)[None, :], loo_rss, np.inf)
    alt = np.argmin(score, axis=1)
    ok = noisy & (n_coef[chosen] > 1) & np.isfinite(score[np.arange(len(chosen)), alt])
    return np.where(ok, alt, chosen)
