"""Work split over the ranks: models that fall as 1/ranks.

PMNF terms x^i * log2(x)^j with positive exponents cannot fall as 1/x, yet that is how the time
of a strong-scaling run falls with ranks: T = c + W / ranks + C * log2(ranks). Its ranks x T (the
cost, rank-seconds) is PMNF: c * ranks + W + C * ranks * log2(ranks). Extra-P models strong
scaling the same way, on the sum over ranks, when told to; here the default modeler fits every
series also as values x ranks, and keeps that form, divided by ranks, where it explains the
values better (`choose`): a higher weight of evidence (the relative residuals against the noise
the repetitions show, with the engine's per-coefficient penalty), a cross-validated SMAPE below
`MARGIN` times the plain form's (relative errors compare, since the two differ by the factor ranks
at every point), and a plain model that is not a constant. The result is a model with exponents
shifted by -1 in ranks: `0.01 + 1.28 * ranks^(-1) * batch^(1)`. Where both forms are in play, the
prediction range draws from both families, weighed by their evidence (`family_weight`).

On the synthetic strong-scaling call paths of `benchmarks/derived_speedup.py` the time
predicted at 4x the measured ranks went from a median error of 600% to 8%; on call paths drawn
from the PMNF space it was never taken there, for 0-0.3% of 1-parameter ones, and never for
noisy constants (docs/modeling.md).

Nothing here is particular to ranks but the name: the estimator fits the values x any other
parameter too, for the series whose values fall along it (`falls_along`), and the same rules choose
(a time per epoch falls as 1/batch: review 61 F7).

A plain constant is split as c + W/ranks, or as a U shape W/ranks + c * ranks, and only where the
data say so beyond their noise (`choose`, `lack_of_fit_per_group`, `admits_rise`, `_u_shape`):
values falling as 1/ranks beside a parameter held constant for its 2 values get a constant from
PMNF (review 49 F3), and so does a U shape (review 104 H2), while flat series with one slow first
run, falls that level off and U shapes whose rise the values do not show must stay constants
(review 53).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .model import Alternative, Factor, Model, Term
from .pmnf.fit import GroupFit
from .pmnf.hypotheses import EXPONENTS
from .pmnf.quality import quality
from .pmnf.quantiles import f_quantiles
from .pmnf.selection import NOISE_FLOOR, PENALTY
from .pmnf.single import ZERO_FLOOR

#: the split form is kept only where its cross-validated SMAPE is below this times the plain
#: form's; 1.0 (without the evidence test) took it for 4-7% of call paths drawn from the PMNF
#: space and moved their errors; 0.6 kept it for fewer strong-scaling call paths
MARGIN = 0.8


#: the divided form must be this much more likely (log odds; e^3, about 20 to 1: "strong" on
#: Jeffreys' scale): with five noisy values a PMNF series sometimes fits a little better divided
EVIDENCE = 3.0


def evidence(g: GroupFit, noise: np.ndarray, fallback: np.ndarray | None = None) -> np.ndarray:
    """Per row of `g` (values fitted, plain or `time_view`), the log weight of its chosen model:
    -0.5 x its relative residual sum of squares over the noise variance of one value, minus the
    engine's penalty per coefficient. `noise` (S,): relative variance from the repetitions (nan:
    unknown, then `fallback` (S,) is used)."""
    y = g.y
    fitted = np.einsum("snk,sk->sn", g.X, g.coef)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(y != 0, (y - fitted) / y, 0.0)
    rss = (rel**2).sum(-1)
    n = y.shape[1]
    n_coef = np.array([1 + len(t) for t in g.terms])
    s2 = noise if fallback is None else np.where(np.isnan(noise), fallback, noise)
    s2 = np.maximum(np.nan_to_num(s2, nan=0.0), 1e-18)
    return -0.5 * rss / s2 - PENALTY * 0.5 * np.log(n) * n_coef


def residual_variance(g: GroupFit) -> np.ndarray:
    """Per row, the relative residual variance of its chosen model (the noise where the
    repetitions give none)."""
    fitted = np.einsum("snk,sk->sn", g.X, g.coef)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(g.y != 0, (g.y - fitted) / g.y, 0.0)
    dof = np.maximum(g.y.shape[1] - np.array([1 + len(t) for t in g.terms]), 1)
    return (rel**2).sum(-1) / dof


#: one-sided 99% quantiles of Student's t for 1 to 30 degrees of freedom (beyond: the normal's)
_T99 = (31.821, 6.965, 4.541, 3.747, 3.365, 3.143, 2.998, 2.896, 2.821, 2.764, 2.718, 2.681, 2.650, 2.624, 2.602,
        2.583, 2.567, 2.552, 2.539, 2.528, 2.518, 2.508, 2.500, 2.492, 2.485, 2.479, 2.473, 2.467, 2.462, 2.457)
_Z99 = 2.3263478740408408

#: the plain constant's least weight in the prediction range of a constant split as c + W/ranks:
#: the range spans both readings, flat and falling (review 53 F5, F6)
CONSTANT_FLOOR = 0.2

#: the lack-of-fit tests' levels: the constant must miss its values beyond the 99% quantile of F;
#: c + W/ranks must stay within the 95% quantile (a stricter bar for the form that is taken than
#: for the one that is left)
MISS_LEVEL, FIT_LEVEL = 0.99, 0.95

#: a form of the engine's cost-form search that rises again in ranks and has at least this share
#: of the heaviest form's weight keeps a constant from being split (`admits_rise`)
RISE_SHARE = 0.1

#: ... and only where those rising forms hold together at least this share of the weight of all the
#: forms: one rising form at 10-20% of the heaviest's weight, 5-9% of the whole, kept Amdahl's
#: 10 + 100/ranks over ranks 1..64 (5 runs, 10% noise) a constant 60% off at 16x the ranks in 5 of
#: 40 draws, and over ranks 2..64 in 11 of 40 (2 and 4 now; research 117, review 104 L1)
RISE_TOTAL = 0.25


#: a parameter other than `ranks` gets the values x it fitted only for the series whose values fall
#: along it by this many standard errors of the slope of log(value) on log(parameter) (`falls_along`)
FALL_T = 3.0


def cv_better(a: GroupFit, b: GroupFit, cv_a: np.ndarray, cv_b: np.ndarray, margin: float = MARGIN) -> np.ndarray:
    """Per row: whether form `a` cross-validates better than form `b` by `margin` (its SMAPE below
    `margin` times `b`'s). Where either SMAPE is undefined (nan: a value near 0 among larger ones
    carries nearly all the weight of the relative fit, and the hat matrix's leverage there is 1 to
    rounding), their `floored_cv` compare instead. Before (research 124), no form passed against an
    undefined one: `0.004 + 110 (p-1)/p` over ranks 1..32 (a collective's call overhead on one
    rank), 5 runs at 5% noise, kept the plain `0.004 + 28 * log2(ranks)` or `-33 + 33 *
    ranks^(1/2)` in 22 of 40 draws, 76-217% high at 4x the ranks, against `c - W/ranks` with nearly
    all the weight of evidence."""
    with np.errstate(invalid="ignore"):
        out = cv_a < margin * cv_b
        undefined = np.isnan(cv_a) | np.isnan(cv_b)
        if undefined.any():
            out = np.where(undefined, floored_cv(a) < margin * floored_cv(b), out)
    return out


def falls_along(points: np.ndarray, Y: np.ndarray, col: int, t: float = FALL_T) -> np.ndarray:
    """Per row of Y (S, n): whether its values fall along the parameter in column `col` of `points`:
    the slope of log(value) on log(parameter), the other parameters' combinations each with a level
    of its own, is below 0 by more than `t` of its standard errors (any fall where it has none: exact
    data). Rows with a value not above 0 do not fall. A time per epoch with the batch size swept (the
    steps per epoch fall as 1/batch) falls so; the PMNF forms with positive coefficients never do,
    and only the series that fall get the values x the parameter fitted (review 61 F7)."""
    S, n = Y.shape
    x = np.log(points[:, col])
    _, level = np.unique(np.delete(points, col, axis=1), axis=0, return_inverse=True)
    level = level.ravel()
    k = int(level.max()) + 1
    counts = np.bincount(level, minlength=k)
    xc = x - (np.bincount(level, x, minlength=k) / counts)[level]
    sxx = float(xc @ xc)
    positive = (Y > 0).all(axis=1)
    dof = n - k - 1
    if sxx <= 0 or dof < 1 or not positive.any():
        return np.zeros(S, dtype=bool)
    ly = np.log(np.where(positive[:, None], Y, 1.0))
    member = np.zeros((n, k))
    member[np.arange(n), level] = 1.0
    yc = ly - ((ly @ member) / counts)[:, level]
    slope = yc @ xc / sxx
    resid = yc - slope[:, None] * xc
    se = np.sqrt((resid * resid).sum(axis=1) / dof / sxx)
    return positive & (slope < 0) & (slope < -t * se)


def _ranks_of(divided: GroupFit) -> np.ndarray | None:
    """The ranks of the points, read off `divided` (the `time_view`: its constant column is 1/ranks)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ranks = 1.0 / divided.X[0, :, 0]
    return ranks if np.isfinite(ranks).all() and (ranks > 0).all() else None


def _outlier_weights(plain: GroupFit) -> np.ndarray:
    """Per point, its outlier weight up to a factor per row (`plain.w` x value^2: the relative weights
    are uniform but for the outliers), scaled to at most 1; 1 where a value is not positive."""
    y = plain.y
    with np.errstate(all="ignore"):
        wt = np.where(y > 0, plain.w * y * y, 1.0)
        wt = np.where(np.isfinite(wt) & (wt > 0), wt, 1.0)
        return wt / wt.max(-1, keepdims=True)


def falls(plain: GroupFit, divided: GroupFit, noise: np.ndarray, keep: np.ndarray | None = None,
          residual: bool = False):
    """Per row of `plain`, whether its values fall with ranks beyond their noise: the slope of
    log(value) over log2(ranks), with one intercept per combination of the other parameters'
    values, is below 0 by more than the one-sided 99% quantile of Student's t times its standard
    error (the noise of one value: the larger of the repetitions' and the fit's residual variance).
    Only the points `keep` (n,) count, all by default. A row with a value <= 0, or without residual
    degrees of freedom, does not fall. With `residual`, also the residual variance of that log fit
    and its slope (S,; nan where it has none): the noise the other parameters' effects, held
    constant in the fits, do not inflate."""
    y, pts = plain.y, plain.points
    S, n = y.shape
    out = np.zeros(S, dtype=bool)
    none = (out, np.full(S, np.nan), np.full(S, np.nan)) if residual else out
    ranks = _ranks_of(divided)
    if S == 0 or ranks is None:
        return none
    keep = np.ones(n, dtype=bool) if keep is None else keep
    others = [c for c in range(pts.shape[1]) if not np.allclose(pts[:, c], ranks)]
    sub = pts[keep][:, others] if others else np.zeros((int(keep.sum()), 1))
    group = np.unique(sub, axis=0, return_inverse=True)[1].reshape(-1)
    k = int(group.max()) + 1 if group.size else 0
    m = int(keep.sum())
    df = m - k - 1
    if df < 1:
        return none
    G = np.eye(k)[group]
    x = np.log2(ranks[keep])
    yk = y[:, keep]
    positive = (y > 0).all(-1) & np.isfinite(y).all(-1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ly = np.log(np.where(positive[:, None], yk, 1.0))
        wt = _outlier_weights(plain)[:, keep]
        sw = wt @ G
        xc = x[None, :] - ((wt * x[None, :]) @ G / sw)[:, group]
        yc = ly - ((wt * ly) @ G / sw)[:, group]
        sxx = (wt * xc * xc).sum(-1)
        slope = (wt * xc * yc).sum(-1) / sxx
        resid = yc - slope[:, None] * xc
        rv = (wt * resid * resid).sum(-1) / df
        s2 = np.maximum(np.fmax(noise, rv), NOISE_FLOOR)
        t = slope / np.sqrt(s2 / sxx)
    quantile = _T99[df - 1] if df <= len(_T99) else _Z99
    out = positive & (sxx > 0) & (t < -quantile)
    return (out, np.where(positive, rv, np.nan), slope) if residual else out


def _groups(plain: GroupFit, ranks: np.ndarray) -> np.ndarray:
    """Per point, the index of its combination of the other parameters' values (0 for all where
    ranks is the only parameter)."""
    pts = plain.points
    others = [c for c in range(pts.shape[1]) if not np.allclose(pts[:, c], ranks)]
    sub = pts[:, others] if others else np.zeros((len(pts), 1))
    return np.unique(sub, axis=0, return_inverse=True)[1].reshape(-1)


def interaction_variance(plain: GroupFit, ranks: np.ndarray) -> tuple[np.ndarray, int]:
    """Per row, the variance of log(value) that one effect per combination of the other parameters
    plus one per rank count (any shape in ranks, the same for every combination) leaves, and its
    degrees of freedom: the noise of one value where there are no repetitions, if the other
    parameters scale the values (their effect is a factor). (nan, 0) without a full grid of at least
    2 combinations, and nan for a row with a value <= 0."""
    y = plain.y
    S, n = y.shape
    group = _groups(plain, ranks)
    G = int(group.max()) + 1 if n else 0
    values, rk = np.unique(ranks, return_inverse=True)
    R = values.size
    if G < 2 or n != G * R or len(set(zip(group.tolist(), rk.tolist()))) != n:
        return np.full(S, np.nan), 0
    positive = (y > 0).all(-1) & np.isfinite(y).all(-1)
    T = np.zeros((S, G, R))
    with np.errstate(all="ignore"):
        T[:, group, rk] = np.log(np.where(positive[:, None], y, 1.0))
    res = T - T.mean(1, keepdims=True) - T.mean(2, keepdims=True) + T.mean((1, 2), keepdims=True)
    dof = (G - 1) * (R - 1)
    return np.where(positive, (res**2).sum((1, 2)) / dof, np.nan), dof


def lack_of_fit_per_group(plain: GroupFit, ranks: np.ndarray, noise: np.ndarray, serial: bool = False) -> tuple:
    """Per row: (whether a constant misses the values beyond their noise, whether c + W/ranks
    follows them within it), both fitted per combination of the other parameters (a parameter the
    fits hold constant adds nothing to their residuals), weighted as the plain fit (relative, outliers
    down-weighted). Each is an F-test of its relative residual variance against the noise of one
    value: the repetitions' (`noise`) or, without repetitions, `interaction_variance` (with its own
    degrees of freedom); neither: (False, False). `choose` is not given the repetitions' count, so
    their degrees of freedom are taken as one per point, as with 2 repetitions (3 or 5 give 2 or 4
    per point: the quantiles used are a little higher than theirs). The constant misses beyond the
    `MISS_LEVEL` quantile; c + W/ranks must stay within the `FIT_LEVEL` one. With `serial`, a third:
    whether W/ranks alone (no serial part), fitted per combination too, misses the values: the
    residual sum of squares that c + W/ranks takes off it, per coefficient added, is above the noise
    beyond the `MISS_LEVEL` quantile of F (`_hidden_serial`)."""
    y = plain.y
    S, n = y.shape
    no = np.zeros(S, dtype=bool)
    group = _groups(plain, ranks)
    wt = _outlier_weights(plain)
    rss0, rss1, rssw = np.zeros(S), np.zeros(S), np.zeros(S)
    k0 = k1 = kw = 0
    with np.errstate(all="ignore"):
        for g in np.unique(group):
            idx = group == g
            yg = y[:, idx]
            w = np.where(yg != 0, wt[:, idx] / (yg * yg), 0.0)
            w = np.where(np.isfinite(w), w, 0.0)
            mean = (w * yg).sum(-1, keepdims=True) / w.sum(-1, keepdims=True)
            rss0 += (w * (yg - mean) ** 2).sum(-1)
            k0 += 1
            r = ranks[idx]
            wr = (w * yg / r).sum(-1, keepdims=True) / (w / (r * r)).sum(-1, keepdims=True)
            rssw += (w * (yg - wr / r) ** 2).sum(-1)
            kw += 1
            if np.unique(r).size < 3:  # c + W/ranks goes through every point: no residual
                k1 += np.unique(r).size
                continue
            X = np.stack([1.0 / r, np.ones_like(r)], -1)
            Xw = X[None] * np.sqrt(w)[..., None]
            coef = np.einsum("skl,snl,sn->sk", np.linalg.pinv(np.einsum("snk,snl->skl", Xw, Xw)), Xw, np.sqrt(w) * yg)
            rss1 += (w * (yg - coef @ X.T) ** 2).sum(-1)
            k1 += 2
    d0, d1 = n - k0, n - k1
    if d0 < 1 or d1 < 1:
        return (no, no, no) if serial else (no, no)
    s2, d2, known = noise_of_one(plain, ranks, noise)
    # no estimate of the noise (one run a point, no other parameter on a full grid): that of
    # c + W/ranks's own residuals, as the F-test of two nested models takes it; it then follows
    # the values by construction
    own = ~known & (d1 >= OWN_NOISE_DOF)
    with np.errstate(all="ignore"):
        s2 = np.where(own, np.maximum(rss1 / d1, NOISE_FLOOR), s2)
    d2 = np.where(own, d1, d2)
    q0, q1 = f_quantiles(d0, d2, MISS_LEVEL), f_quantiles(d1, d2, FIT_LEVEL)
    with np.errstate(all="ignore"):
        out = (known | own) & (rss0 / d0 / s2 > q0), own | (known & (rss1 / d1 / s2 <= q1))
        if serial:  # the nested models' F-test: c per combination explains more than the noise
            dk = max(k1 - kw, 1)
            out += ((known | own) & ((rssw - rss1) / dk / s2 > f_quantiles(dk, d2, MISS_LEVEL)),)
        return out


def noise_of_one(plain: GroupFit, ranks: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the relative noise variance of one value the lack-of-fit tests take (the
    repetitions', `noise`, else `interaction_variance`; at least `NOISE_FLOOR`), its degrees of
    freedom (one per point for the repetitions', see `lack_of_fit_per_group`), and whether it is
    known at all."""
    n = plain.y.shape[1]
    inter, d_inter = interaction_variance(plain, ranks)
    repeated = np.isfinite(noise) & (noise > 0)
    s2 = np.maximum(np.where(repeated, noise, np.nan_to_num(inter, nan=0.0)), NOISE_FLOOR)
    return s2, np.where(repeated, n, max(d_inter, 1)), repeated | np.isfinite(inter)


def admits_rise(divided: GroupFit, ranks: np.ndarray, rows: np.ndarray | None = None,
                share: float = RISE_SHARE, total: float = RISE_TOTAL) -> np.ndarray:
    """Per row of the engine's fit of values x ranks (`time_view`): whether its forms in play (at
    least `share` of the heaviest one's weight) that predict a time at 4x the largest ranks above
    the one at the largest ranks (at any combination of the other parameters measured there) hold
    together at least `total` of the weight of all its forms: a shape that rises again, which the
    values do not rule out. Only the rows where `rows` (S,) is True are looked at (False elsewhere)."""
    S = divided.y.shape[0]
    out = np.zeros(S, dtype=bool)
    col = _ranks_column(divided, ranks)
    if divided.alternatives is None or col is None:
        return out
    with np.errstate(all="ignore"):
        for s in range(S) if rows is None else np.flatnonzero(rows):
            alternatives = divided.alternatives[s]
            if not alternatives:
                continue
            top = max(a[0] for a in alternatives)
            rising = sum(weight for weight, terms, coef, _ in alternatives
                         if weight >= share * top and _rises_beyond(divided.points, ranks, col, terms, coef))
            out[s] = rising > 0 and rising >= total * sum(a[0] for a in alternatives)
    return out


def _times_beyond(points: np.ndarray, ranks: np.ndarray, col: int, terms, coef,
                  factors: tuple[float, ...], cost: bool = True) -> np.ndarray:
    """The times (len(factors) + 1, m) that the model of values x ranks (`terms`, `coef`: constant
    first) predicts at the largest ranks and at `factors` times them, at each of the m combinations
    of the other parameters measured there (without `cost`: a model of the values themselves)."""
    near = points[ranks == ranks.max()].astype(float)
    both = np.concatenate([near] * (len(factors) + 1))
    for k, f in enumerate(factors, 1):
        both[k * len(near):(k + 1) * len(near), col] *= f
    v = np.full(len(both), float(coef[0]))
    with np.errstate(all="ignore"):
        for c, term in zip(coef[1:], terms):
            f = np.ones(len(both))
            for p, h in term:
                e, j = EXPONENTS[h]
                f = f * both[:, p] ** float(e) * (np.log2(both[:, p]) ** j if j else 1.0)
            v = v + c * f
        return (v / both[:, col] if cost else v).reshape(len(factors) + 1, len(near))


def _rises_beyond(points: np.ndarray, ranks: np.ndarray, col: int, terms, coef) -> bool:
    """Whether the model of values x ranks (`terms`, `coef`: constant first) predicts a time at 4x the
    largest ranks above the one at the largest ranks, at any combination of the other parameters
    measured there."""
    near, far = _times_beyond(points, ranks, col, terms, coef, (4.0,))
    return bool(np.any(far > near * (1.0 + 1e-9)))


#: without repetitions (and no other parameter on a full grid) the noise is estimated from the
#: residuals of the model that is taken, only where they have at least this many degrees of freedom:
#: over ranks 1, 2, 4, 8 (2 for c + W/ranks) such an estimate split flat series with a slow first run
OWN_NOISE_DOF = 3

#: a U shape is taken only where, at every combination of the other parameters, the value at the
#: largest ranks lies above the smallest value by this many standard errors of their difference
RISE_T = 3.0

def rises_again(plain: GroupFit, ranks: np.ndarray, s2: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """Per row: whether its values turn up again within the measured ranks: at every combination of
    the other parameters, log(value at the largest ranks / smallest value) is above `RISE_T` times
    the standard error of a difference of two values (`s2`, (S,): the relative noise variance of
    one), or above the one-sided 99% quantile of Student's t with `dof` (S,) degrees of freedom times
    it where that is higher (a noise estimated from few values). False for a row with a value <= 0."""
    y = plain.y
    group = _groups(plain, ranks)
    out = (y > 0).all(-1) & np.isfinite(y).all(-1)
    d = np.clip(np.asarray(dof, dtype=int), 1, None)
    t = np.maximum(RISE_T, np.where(d <= len(_T99), np.array(_T99)[np.minimum(d, len(_T99)) - 1], _Z99))
    with np.errstate(all="ignore"):
        ly = np.log(np.where(out[:, None], y, 1.0))
        for g in np.unique(group):
            idx = np.flatnonzero(group == g)
            last = idx[ranks[idx] == ranks[idx].max()]
            out &= ly[:, last].mean(-1) - ly[:, idx].min(-1) > t * np.sqrt(2.0 * s2)
    return out


def follows(g: GroupFit, s2: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """Per row of `g`: whether its chosen model follows the values within their noise: its relative
    residual variance against `s2` (S,; with `dof` (S,) degrees of freedom) within the `FIT_LEVEL`
    quantile of F (the test `lack_of_fit_per_group` puts c + W/ranks to)."""
    n = g.y.shape[1]
    k = np.array([1 + len(t) for t in g.terms])
    out = np.zeros(len(k), dtype=bool)
    for d in np.unique(n - k):
        if d < 1:
            continue
        rows = (n - k) == d
        rv = residual_variance(g)[rows]
        with np.errstate(invalid="ignore"):
            out[rows] = rv / s2[rows] <= f_quantiles(float(d), dof[rows], FIT_LEVEL)
    return out


def _ranks_column(plain: GroupFit, ranks: np.ndarray) -> int | None:
    cols = [c for c in range(plain.points.shape[1]) if np.allclose(plain.points[:, c], ranks)]
    return cols[0] if cols else None


_LINEAR = EXPONENTS.index((1, 0))  # the hypothesis x^1 (no log factor)


def cost_linear(plain: GroupFit, divided: GroupFit, noise: np.ndarray) -> GroupFit | None:
    """Per row, the weighted least-squares fit of c + W/ranks to the values, as a `time_view` of the
    cost form W + c * ranks (columns 1/ranks and 1; terms: ranks^1), with the relative weights and
    outlier weights of `plain`; one alternative, its covariance scaled by the larger of the noise and
    the relative residual variance. None where the ranks cannot be read."""
    ranks = _ranks_of(divided)
    col = None if ranks is None else _ranks_column(plain, ranks)
    if col is None:
        return None
    y = plain.y
    S, n = y.shape
    X = np.zeros((S, n, 2))
    X[:, :, 0] = 1.0 / ranks
    X[:, :, 1] = 1.0
    with np.errstate(all="ignore"):
        w = np.where(y != 0, _outlier_weights(plain) / (y * y), 0.0)
        w = np.where(np.isfinite(w), w, 0.0)
        Xw = X * np.sqrt(w)[..., None]
        G = np.einsum("snk,snl->skl", Xw, Xw)
        Ginv = np.linalg.pinv(G)
        coef = np.einsum("skl,snl,sn->sk", Ginv, Xw, np.sqrt(w) * y)
        fitted = np.einsum("snk,sk->sn", X, coef)
        rel = np.where(y != 0, (y - fitted) / y, 0.0)
        rv = (rel**2).sum(-1) / max(n - 2, 1)
        s2 = np.maximum(np.fmax(noise, rv), NOISE_FLOOR)
        # c below 0 within its noise (one-sided 99%): c = 0, W/ranks alone; beyond it: left as it
        # is (and refused by `choose`: the values fall faster than 1/ranks)
        se_c = np.sqrt(s2 * Ginv[:, 1, 1])
        zero = (coef[:, 1] < 0) & (coef[:, 1] >= -_Z99 * se_c)
        g00 = G[:, 0, 0]
        w_only = np.where(g00 > 0, np.einsum("sn,sn->s", Xw[:, :, 0], np.sqrt(w) * y) / np.where(g00 > 0, g00, 1),
                          0.0)
        coef = np.where(zero[:, None], np.stack([w_only, np.zeros(S)], -1), coef)
        w_alone = np.array([[1.0, 0.0], [0.0, 0.0]]) / np.where(g00 > 0, g00, 1)[:, None, None]
        Ginv = np.where(zero[:, None, None], w_alone, Ginv)
    spec = [((col, _LINEAR),)]
    terms = [list(spec) for _ in range(S)]
    alternatives = [[(1.0, list(spec), coef[s].copy(), s2[s] * Ginv[s])] for s in range(S)]
    return GroupFit(plain.index, plain.points, y, X, coef, w, terms, alternatives, None)


def _take_row(into: GroupFit, row: int, src: GroupFit, src_row: int | None = None) -> None:
    """Row `row` of `into` replaced by that of `src` (its row `src_row`, `row` by default) in place
    (padding the design where needed)."""
    r = row if src_row is None else src_row
    k = src.X.shape[-1]
    if into.X.shape[-1] < k:
        pad = k - into.X.shape[-1]
        into.X = np.concatenate([into.X, np.zeros(into.X.shape[:2] + (pad,))], axis=-1)
        into.coef = np.concatenate([into.coef, np.zeros((into.coef.shape[0], pad))], axis=-1)
    into.X[row] = 0.0
    into.X[row, :, :k] = src.X[r]
    into.coef[row] = 0.0
    into.coef[row, :k] = src.coef[r]
    into.w[row] = src.w[r]
    into.terms[row] = src.terms[r]
    if into.alternatives is not None:
        into.alternatives[row] = src.alternatives[r]
    if src.predictors is not None or into.predictors is not None:  # what the adjusted R^2 counts
        if into.predictors is None:
            into.predictors = np.array([len(t) for t in into.terms])
        into.predictors[row] = len(src.terms[r]) if src.predictors is None else src.predictors[r]


def choose(plain: GroupFit, divided: GroupFit, cv_plain: np.ndarray, cv_divided: np.ndarray,
           noise: np.ndarray, exact: np.ndarray | None = None, allow_log: bool = True,
           collectives: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (whether the divided form is kept, the weight of the other family in the
    prediction range, whether the row of `divided` was replaced in place: its quality is then no
    longer that of the engine's fit). `divided` is the `time_view` of the fit of values x ranks;
    `exact` (S,) marks the rows whose repetitions agree exactly (counts: their `noise` is nan, as
    with one run, but what the fits leave is no noise).

    A plain model with terms faces the evidence and CV tests against the engine's divided model. A
    plain constant says either that the values are flat or that no PMNF term follows them (PMNF has
    no falling terms: values falling as 1/ranks beside a parameter held constant for its 2 values
    get a constant, review 49 F3). A constant is split only as c + W/ranks (`cost_linear`: nothing
    that rises in ranks, the serial part c kept; review 53 F1-F3), and only where all of these hold:
    - its values fall (`falls`), with the smallest rank count left out too and there at least half
      as steeply (one slow first run or a start-up cost at the smallest ranks is no fall: F1, F4);
    - `lack_of_fit_per_group`: the constant misses the values beyond their noise and c + W/ranks does not
      (a fall that levels off and turns up again within the measured ranks);
    - not `admits_rise`: no form of the engine's cost-form search that rises again in ranks is
      about as likely (a U shape whose rise the noise hides over the measured ranks);
    - c >= 0 and W > 0, and c + W/ranks passes the evidence and CV tests against the constant.
    That row of `divided` (and of `cv_divided`) is then replaced by the c + W/ranks fit in place,
    and the constant keeps at least `CONSTANT_FLOOR` of the prediction range. A constant whose
    values turn up again keeps the engine's divided model where `_u_shape` says so. Any other
    constant is never split, nor mixed. A kept W/ranks alone gives way to c + W/ranks where the
    serial part shows per combination of the other parameters (`_hidden_serial`), and a plain model
    that falls to 0 or below within 16x the largest ranks where c + W/ranks follows the values
    (`_below_zero`). Last, for the rank count (`collectives`; not without log terms, `allow_log`),
    the model kept gives way to a collective's time, c + W/ranks + a * ranks or + a * log2(ranks),
    where the evidence and a leave-one-out error say so (`modeler.latency`). Where a form's cross-validated
    SMAPE is undefined (a value near 0 among larger ones: leverage 1), the CV tests compare refitted
    leave-one-out errors (`cv_better`)."""
    exact_reps = np.zeros(len(plain.terms), dtype=bool) if exact is None else exact  # `exact` is reused below
    fallback = np.minimum(residual_variance(plain), residual_variance(divided))
    lw_p, lw_d = evidence(plain, noise, fallback), evidence(divided, noise, fallback)
    has_terms = np.array([len(t) > 0 for t in plain.terms])
    with np.errstate(invalid="ignore"):
        keep = has_terms & (lw_d > lw_p + EVIDENCE) & cv_better(divided, plain, cv_divided, cv_plain)
    p_divided = 1.0 / (1.0 + np.exp(np.clip(lw_p - lw_d, -700, 700)))
    other = np.where(has_terms, np.where(keep, 1.0 - p_divided, p_divided), 0.0)
    candidates = ~has_terms
    ranks = _ranks_of(divided)
    taken = np.zeros_like(keep)
    if keep.any() and ranks is not None:
        _unseen_rise(plain, divided, ranks, noise, keep, cv_plain, cv_divided, taken)
        _unclear_form(plain, divided, ranks, noise, keep & ~taken, cv_plain, cv_divided, taken,
                      np.zeros_like(keep) if exact is None else exact)
    if ranks is not None:
        _hidden_serial(plain, divided, ranks, noise, keep & ~taken, cv_plain, cv_divided, taken)
        below = _below_zero(plain, divided, ranks, noise, has_terms & ~keep, cv_plain, cv_divided, taken)
        if below.any():
            lw_b = evidence(divided, noise, fallback)
            keep = keep | below
            other = np.where(below, 1.0 / (1.0 + np.exp(np.clip(lw_b - lw_p, -700, 700))), other)
    u_shape = _u_shape(plain, divided, ranks, noise, ~has_terms, lw_p, lw_d, cv_plain, cv_divided)
    keep |= u_shape
    other = np.where(u_shape, 1.0 - p_divided, other)
    candidates &= ~u_shape
    if candidates.any() and ranks is not None:
        fall, within, slope = falls(plain, divided, noise, residual=True)
        fall_out, _, slope_out = falls(plain, divided, noise, ranks > ranks.min(), residual=True)
        with np.errstate(invalid="ignore"):  # and not by half less: the first point drives it
            candidates &= fall & fall_out & (slope_out <= 0.5 * slope)
        if candidates.any():
            constant_misses, linear_fits = lack_of_fit_per_group(plain, ranks, noise)
            candidates &= constant_misses & linear_fits
        if candidates.any():
            candidates &= ~admits_rise(divided, ranks, candidates)
    lin = cost_linear(plain, divided, noise) if candidates.any() else None
    if lin is not None:
        # noise unknown (one repetition): what the log fit of `falls` leaves, not what a parameter
        # held constant in both fits adds to their residuals
        fallback_l = np.fmin(fallback, within)
        lw_p = evidence(plain, noise, fallback_l)
        lw_l = evidence(lin, noise, fallback_l)
        cv_l = quality(lin).cv_smape
        W, c = lin.coef[:, 0], lin.coef[:, 1]
        with np.errstate(invalid="ignore"):
            split_constant = (candidates & (c >= 0) & (W > 0) & (lw_l > lw_p + EVIDENCE)
                              & cv_better(lin, plain, cv_l, cv_plain))
        for row in np.flatnonzero(split_constant):
            _take_row(divided, int(row), lin)
            cv_divided[row] = cv_l[row]
            taken[row] = True
            p_l = 1.0 / (1.0 + np.exp(np.clip(lw_p[row] - lw_l[row], -700, 700)))
            other[row] = max(1.0 - p_l, CONSTANT_FLOOR)
        keep = keep | split_constant
    if ranks is not None:
        exact = _exact(plain, divided, ranks, ~has_terms & ~keep, cv_plain, cv_divided)
        keep |= exact
        other = np.where(exact, 1.0 - p_divided, other)
    if ranks is not None and collectives and allow_log:
        from .latency import latency  # it builds on this module's tests

        took, lw_c, lw_plain = latency(plain, divided, ranks, noise, keep, taken, exact_reps)
        if took.any():
            keep = keep | took
            with np.errstate(invalid="ignore"):
                other = np.where(took, 1.0 / (1.0 + np.exp(np.clip(lw_c - lw_plain, -700, 700))), other)
    return keep, other, taken


#: a relative residual variance at or below this (0.001% rms) is rounding, not noise: no measured
#: time follows a model with some degrees of freedom to spare that closely (review 114)
EXACT_VAR = 1e-10


def _exact(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, rows: np.ndarray, cv_plain: np.ndarray,
           cv_divided: np.ndarray) -> np.ndarray:
    """Per row: whether a plain constant (`rows`) that misses its values gives way to the engine's
    model of values x ranks because that follows them exactly (relative residual variance at most
    `EXACT_VAR`, with 2 degrees of freedom or more left), cross-validates better by `MARGIN` and
    stays above 0 up to 16x the largest ranks. The tests above guard against noise, and without
    repetitions take c + W/ranks's residuals for it, so noise-free values that c + W/ranks does not
    follow passed none of them (review 114: `100/x + 0.5 * log2(x)` over x = 2..128, exact in the
    divided form, was the constant 5.655, 66% off its own values; noise-free U shapes W/r + c r
    were constants)."""
    col = _ranks_column(plain, ranks)
    out = rows.copy()
    if col is None or not out.any():
        return np.zeros_like(out)
    k = np.array([1 + len(t) for t in divided.terms])
    with np.errstate(invalid="ignore"):
        out &= ((residual_variance(divided) <= EXACT_VAR) & (residual_variance(plain) > EXACT_VAR)
                & (plain.y.shape[1] - k >= 2) & cv_better(divided, plain, cv_divided, cv_plain))
    for s in np.flatnonzero(out):
        out[s] = bool(np.all(_times_beyond(divided.points, ranks, col, divided.terms[s], divided.coef[s],
                                           (4.0, 16.0)) > 0))
    return out


def _noise_or_own(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`noise_of_one`, and where it knows none, the divided model's own residual variance with its
    degrees of freedom (it then follows its values by construction), as for c + W/ranks in
    `lack_of_fit_per_group`."""
    s2, dof, known = noise_of_one(plain, ranks, noise)
    k = np.array([1 + len(t) for t in divided.terms])
    s2 = np.where(known, s2, np.maximum(residual_variance(divided), NOISE_FLOOR))
    return s2, np.where(known, dof, np.maximum(plain.y.shape[1] - k, 1)), known


def _unseen_rise(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray, keep: np.ndarray,
                 cv_plain: np.ndarray, cv_divided: np.ndarray, taken: np.ndarray) -> None:
    """The kept divided models (`keep`) that rise again beyond the largest ranks where the values
    do not turn up within the measured ranks (`rises_again`, the noise as in `_u_shape`), and that
    c + W/ranks follows within their noise (`lack_of_fit_per_group`), are replaced by it in place (`divided` and `cv_divided`; marked in `taken`), where that has c >= 0, W > 0 and
    cross-validates better than the plain model by `MARGIN`: a fall that levels off at the last
    rank counts (a serial part, a communication floor) was taken as W/ranks + c * ranks^2 *
    log2(ranks) with c ~ 5e-4, its rise unseen over ranks 1..16 and 100-170x the truth at 16x the
    ranks (`benchmarks/strong_shapes.py`, `floor`: 90th percentile 12916% -> 95%). A U shape whose
    turn the values do not show is then predicted low, as a constant that would be one is
    (review 53)."""
    col = _ranks_column(plain, ranks)
    if col is None:
        return
    rows = [s for s in np.flatnonzero(keep)
            if _rises_beyond(divided.points, ranks, col, divided.terms[s], divided.coef[s])]
    if not rows:
        return
    s2, dof, _ = _noise_or_own(plain, divided, ranks, noise)
    seen = rises_again(plain, ranks, s2, dof)
    rows = [s for s in rows if not seen[s]]
    if rows:  # and c + W/ranks follows them within their noise (a turn it misses is one: review 53)
        follows_lin = lack_of_fit_per_group(plain, ranks, noise)[1]
        rows = [s for s in rows if follows_lin[s]]
    _take_linear(plain, divided, noise, rows, cv_plain, cv_divided, taken)


def _take_linear(plain: GroupFit, divided: GroupFit, noise: np.ndarray, rows: list, cv_plain: np.ndarray,
                 cv_divided: np.ndarray, taken: np.ndarray, also=None, margin: float = MARGIN) -> None:
    """Replace the `rows` of `divided` (and `cv_divided`; marked in `taken`) by c + W/ranks in place
    where that has c >= 0, W > 0, cross-validates better than the plain model by `MARGIN` and, with
    `also` (a function of the c + W/ranks fit giving a mask (S,)), passes that too (`margin`: in place
    of `MARGIN`)."""
    lin = cost_linear(plain, divided, noise) if rows else None
    if lin is None:
        return
    cv_l = quality(lin).cv_smape
    passes = also(lin) if also is not None else np.ones(len(cv_l), dtype=bool)
    better = cv_better(lin, plain, cv_l, cv_plain, margin)
    for s in rows:
        W, c = lin.coef[s, 0], lin.coef[s, 1]
        if W > 0 and c >= 0 and better[s] and passes[s]:
            _take_row(divided, int(s), lin)
            cv_divided[s] = cv_l[s]
            taken[s] = True


#: a kept divided model whose extra term in ranks is not this much more likely (log odds, as
#: `EVIDENCE`) than c + W/ranks's, and that falls or levels off up to this many times the largest
#: ranks, gives way to c + W/ranks (`_unclear_form`)
UNCLEAR_REACH = 16.0


def _unclear_form(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray, rows: np.ndarray,
                  cv_plain: np.ndarray, cv_divided: np.ndarray, taken: np.ndarray, exact: np.ndarray) -> None:
    """The kept divided models (`rows`) with terms in ranks alone, other than c + W/ranks, that
    predict no time above the one at the largest ranks at 4x and `UNCLEAR_REACH` times them, and
    whose weight of evidence is not `EVIDENCE` above that of c + W/ranks (the same number of
    coefficients: only the form of the cost term differs), are replaced by c + W/ranks in place
    (`divided`, `cv_divided`; marked in `taken`) where that follows the values within their noise
    (`lack_of_fit_per_group`), has c >= 0 and W > 0, and cross-validates better than the plain model
    by `MARGIN`. With a small serial part (1 + 100/ranks over ranks 1..16, or 1..64 with
    non-power-of-two steps) the cost W + c * ranks rises only a few percent over its noise, every
    form of the engine's search follows it about equally well (log odds within 0-2.3 of c + W/ranks),
    and the heaviest or the leave-one-out best was kept in 33-37 of 40 draws: `102.4/ranks + 0.127 *
    ranks^(-1/3) * log2(ranks)^2` and the like, 31-70% off at 16x the ranks (research 120). Forms that
    rise within 16x the ranks are left to `_unseen_rise` (a U shape whose turn lies just beyond
    the sweep keeps its form). Where the repetitions agree exactly (`exact`: counts), no noise makes
    the forms alike, and c + W/ranks must follow the values at least as closely as the kept model
    (`ceil(1000 / batch)` steps: `995/x + 0.89 x^-1 log2(x)^2`, 3% off at 4x the largest x, had given
    way to `0.44 + 1000/x`, 9% off)."""
    col = _ranks_column(plain, ranks)
    if col is None:
        return
    linear = [((col, _LINEAR),)]
    cand = []
    for s in np.flatnonzero(rows):
        terms = divided.terms[s]
        if not terms or list(terms) == linear or any(p != col for t in terms for p, _ in t):
            continue
        near, *far = _times_beyond(divided.points, ranks, col, terms, divided.coef[s], (4.0, UNCLEAR_REACH))
        if not any(np.any(f > near * (1.0 + 1e-9)) for f in far):
            cand.append(s)
    if cand:
        follows_lin = lack_of_fit_per_group(plain, ranks, noise)[1]
        cand = [s for s in cand if follows_lin[s]]

    def alike(lin: GroupFit) -> np.ndarray:
        rv_d, rv_l = residual_variance(divided), residual_variance(lin)
        fallback = np.fmin(rv_d, rv_l)
        return ((evidence(divided, noise, fallback) < evidence(lin, noise, fallback) + EVIDENCE)
                & ((rv_l <= rv_d) | ~exact))

    _take_linear(plain, divided, noise, cand, cv_plain, cv_divided, taken, alike)


#: the CV margin that c + W/ranks must pass in `_hidden_serial` and `_below_zero`: none. Beside a
#: parameter the fits hold constant, its effect rules the cross-validated errors of every form
#: alike (c + W/ranks 40.4% against W/ranks's 34.5% and the plain `a - b * ranks^(1/4)`'s 46.0%
#: over ranks 1, 2, 4, 8 with 5 runs at 1% noise, where c per value of `g` is far beyond the noise),
#: so the tests per combination of the other parameters decide (research 122)
NO_MARGIN = np.inf


def _hidden_serial(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray, rows: np.ndarray,
                   cv_plain: np.ndarray, cv_divided: np.ndarray, taken: np.ndarray) -> None:
    """The kept divided models (`rows`) that are W/ranks alone (the engine's cost fit a constant: no
    serial part) are replaced by c + W/ranks in place (`divided`, `cv_divided`; marked in `taken`)
    where W/ranks misses the values beyond their noise and c + W/ranks follows them, both fitted per
    combination of the other parameters (`lack_of_fit_per_group`), with c > 0 and W > 0 (no CV test:
    `NO_MARGIN`). Beside a parameter the fits hold constant (2 values: `g` scaling the work), that
    parameter's effect stays in the residuals of the engine's fit of values x ranks, its noise scale
    is that effect, and the serial part's term c * ranks is not worth its penalty there:
    `c + W * g / 48 / ranks` came out as W/ranks, 84-95% low at 16x the ranks (research 122)."""
    cand = [s for s in np.flatnonzero(rows) if not divided.terms[s]]
    if cand:
        _, follows_lin, misses_w = lack_of_fit_per_group(plain, ranks, noise, serial=True)
        cand = [s for s in cand if follows_lin[s] and misses_w[s]]
    _take_linear(plain, divided, noise, cand, cv_plain, cv_divided, taken, lambda lin: lin.coef[:, 1] > 0,
                 NO_MARGIN)


def _below_zero(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray, rows: np.ndarray,
                cv_plain: np.ndarray, cv_divided: np.ndarray, taken: np.ndarray) -> np.ndarray:
    """Per row: whether a plain model with terms that is kept (`rows`) but predicts a time at or below
    0 at 4x or 16x the largest ranks (at a combination of the other parameters measured there), of
    values above 0 that fall with ranks (`falls`), gives way to c + W/ranks (in place in `divided`,
    `cv_divided`; marked in `taken`): where that follows the values within their noise
    (`lack_of_fit_per_group`), has c >= 0 and W > 0, and is not `EVIDENCE` less likely than the plain
    model (the noise as in `choose`; no CV test: `NO_MARGIN`). A plain model that follows its values
    exactly keeps its fall below 0 (`10 - 2 * log2(p)`, tests/modeler/test_cli.py). Beside a
    parameter the fits hold constant (2 values), the engine's plain fit of
    `c + W * g / 48 / ranks` was `a - b * log2(ranks)`, below 0 beyond 2^(a/b) ranks, and its model of
    values x ranks (W/ranks) failed the CV margin against it: 600-900% off at 16x the ranks
    (research 122)."""
    out = np.zeros_like(rows)
    col = _ranks_column(plain, ranks)
    if col is None or not rows.any():
        return out
    positive = (plain.y > 0).all(-1)
    cand = [s for s in np.flatnonzero(rows & positive)
            if np.any(_times_beyond(plain.points, ranks, col, plain.terms[s], plain.coef[s], (4.0, 16.0),
                                    cost=False)[1:] <= 0)]
    if cand:
        fall = falls(plain, divided, noise)
        follows_lin = lack_of_fit_per_group(plain, ranks, noise)[1]
        cand = [s for s in cand if fall[s] and follows_lin[s]]

    def likely(lin: GroupFit) -> np.ndarray:  # not `EVIDENCE` less likely than the plain model
        fallback = np.fmin(residual_variance(plain), residual_variance(lin))
        return evidence(lin, noise, fallback) > evidence(plain, noise, fallback) - EVIDENCE

    before = taken.copy()
    _take_linear(plain, divided, noise, cand, cv_plain, cv_divided, taken, likely, NO_MARGIN)
    return taken & ~before


#: a U shape is taken on a noise estimate of its own (repetitions, or `interaction_variance`) only
#: where that has at least this many degrees of freedom: over ranks 1, 2, 4, 8 beside a 2-valued
#: parameter with one run a point, the interaction variance has 3, and one draw 15x below the true
#: noise passed the miss, rise and follow tests together, while no true U shape was found there
#: (review 113). The divided model's own residual variance (the nested models' F-test) keeps
#: `OWN_NOISE_DOF`: at 4 it lost most U shapes over ranks 1, 2, 4, 8, 16 with one run
U_NOISE_DOF = 4


def _u_shape(plain: GroupFit, divided: GroupFit, ranks: np.ndarray | None, noise: np.ndarray, rows: np.ndarray,
             lw_p: np.ndarray, lw_d: np.ndarray, cv_plain: np.ndarray, cv_divided: np.ndarray) -> np.ndarray:
    """Per row: whether a plain constant (`rows`) is a U shape in ranks, such as W/ranks + c * ranks,
    and the engine's model of values x ranks (W + c * ranks^2) is kept: the constant misses the
    values beyond their noise (F-test at `MISS_LEVEL`; without repetitions, the noise is
    `interaction_variance` or else the divided model's residual variance), the values turn up again within the
    measured ranks (`rises_again`), the divided model follows them within their noise (`follows`)
    and rises again beyond the largest ranks too, and it passes the evidence and CV tests against
    the constant (review 104 H2: 96% low at 16x the ranks before)."""
    col = None if ranks is None else _ranks_column(plain, ranks)
    u = rows & np.array([len(t) > 0 for t in divided.terms])
    if col is None or not u.any():
        return np.zeros_like(u)
    with np.errstate(invalid="ignore"):
        u &= (lw_d > lw_p + EVIDENCE) & cv_better(divided, plain, cv_divided, cv_plain)
    s2, dof, known = _noise_or_own(plain, divided, ranks, noise)
    u &= known | (dof >= OWN_NOISE_DOF)
    u &= ~known | (dof >= U_NOISE_DOF)
    n = plain.y.shape[1]
    with np.errstate(invalid="ignore"):
        u &= residual_variance(plain) / s2 > f_quantiles(float(n - 1), dof, MISS_LEVEL)
    if u.any():
        u &= rises_again(plain, ranks, s2, dof) & follows(divided, s2, dof)
    for s in np.flatnonzero(u):
        u[s] = _rises_beyond(divided.points, ranks, col, divided.terms[s], divided.coef[s])
    return u


def mix(own: tuple[Alternative, ...], other: tuple[Alternative, ...], other_weight: float,
        min_share: float = 1e-3) -> tuple[Alternative, ...]:
    """The alternatives of both families, weighed: `own` by 1 - other_weight, `other` by it; those
    below `min_share` of the heaviest are left out."""
    if other_weight < min_share or not other:
        return own
    return tuple(Alternative(*a) for a in weighed([(a.weight, a.model, a.cov) for a in own],
                                                  [(a.weight, a.model, a.cov) for a in other], other_weight, min_share))


def weighed(own: Sequence[tuple], other: Sequence[tuple], other_weight: float, min_share: float = 1e-3) -> list[tuple]:
    """`mix` of tuples whose first item is the weight (a `GroupFit`'s alternatives, an
    `Alternative`'s fields): `own` by 1 - other_weight, `other` by it, those below `min_share` of the
    heaviest left out, the rest summing to 1."""
    both = [(a[0] * (1.0 - other_weight), *a[1:]) for a in own] + [(a[0] * other_weight, *a[1:]) for a in other]
    top = max(a[0] for a in both)
    kept = [a for a in both if a[0] >= min_share * top]
    total = sum(a[0] for a in kept)
    return [(a[0] / total, *a[1:]) for a in kept]


def time_view(g: GroupFit, ranks: np.ndarray) -> GroupFit:
    """The fit of values x `ranks` as a fit of the values themselves: every design column and value
    divided by ranks (point-wise), the coefficients unchanged. The relative weights become
    1/(y/r)^2 = r^2/y^2, so the weighted design and the hat matrix stay the same."""
    r = np.asarray(ranks, dtype=float)
    return GroupFit(g.index, g.points, g.y / r[None, :], g.X / r[None, :, None], g.coef, g.w * r[None, :] ** 2,
                    g.terms, g.alternatives, None)


def split(model: Model, name: str, cov: np.ndarray | None = None) -> tuple[Model, np.ndarray]:
    """`model` (of values x ranks) divided by the parameter `name`, and the matrix A that maps its
    coefficients (constant, then terms) to the new model's: new = A @ old, cov_new = A cov A^T.
    A term whose only factor was `name`^1 becomes (part of) the constant; a term of exactly 0 is
    left out."""
    entries: list[tuple[tuple[Factor, ...], int]] = [((Factor(name, -1.0),), 0)]
    for j, t in enumerate(model.terms, 1):
        factors, found = [], False
        for f in t.factors:
            if f.parameter == name:
                found = True
                if f.exponent - 1.0 != 0.0 or f.log_exponent:
                    factors.append(Factor(name, f.exponent - 1.0, f.log_exponent))
            else:
                factors.append(f)
        if not found:
            factors.append(Factor(name, -1.0))
        entries.append((tuple(factors), j))
    constant_of = [j for factors, j in entries if not factors]
    terms = [(factors, j) for factors, j in entries if factors]
    old = np.array([model.constant] + [t.coefficient for t in model.terms], dtype=float)
    A = np.zeros((1 + len(terms), len(old)))
    A[0, constant_of] = 1.0
    for row, (_, j) in enumerate(terms, 1):
        A[row, j] = 1.0
    new = A @ old
    # a term of exactly 0, without variance where `cov` is given, is no term: the constant of a cost
    # form held at 0 (an all-gather's c * ranks + a * ranks^2 * u - a * ranks * u, `latency.cost_gather`,
    # research 134) or of an exact fit is not `0 * ranks^(-1)` (review 133 LOW-5: printed, and kept in
    # JSON's terms); it leaves the model and A
    with np.errstate(all="ignore"):
        var = np.zeros(len(new)) if cov is None else np.diag(A @ np.asarray(cov, dtype=float) @ A.T)
    keep = [0] + [row for row in range(1, len(new)) if new[row] != 0.0 or var[row] != 0.0]
    A, new = A[keep], new[keep]
    terms = [terms[row - 1] for row in keep[1:]]
    out = Model(model.parameters, float(new[0]),
                tuple(Term(float(c), factors) for c, (factors, _) in zip(new[1:], terms)))
    return out, A


def split_alternative(a: Alternative, name: str) -> Alternative:
    model, A = split(a.model, name, a.cov)
    with np.errstate(all="ignore"):  # covariances of values near the float range may be inf
        return Alternative(a.weight, model, A @ a.cov @ A.T)



def floored_cv(g: GroupFit) -> np.ndarray:
    """Per row, the mean absolute leave-one-out error (percent) of its chosen form (fitted with the
    weights `g.w`), each left-out value's error measured against at least `ZERO_FLOOR` times the
    series' median |value| (as `default_mode.loo_weights`): a value of 0 or near it (a collective on
    one rank) is missed by every form alike relative to itself, and would rule a relative score. The
    left-out residuals are e / (1 - h) from the hat matrix, and refitted without the point where its
    leverage h is 1 to rounding (a value near 0 among larger ones carries nearly all the weight of the
    relative fit: the shortcut gives nothing there, and `quality`'s cross-validated SMAPE is nan)."""
    y, X = g.y, g.X
    S, n = y.shape
    w = np.where(np.isfinite(g.w), g.w, 0.0)
    with np.errstate(all="ignore"):
        sw = np.sqrt(w)
        Xw = X * sw[..., None]
        resid = y - np.einsum("snk,sk->sn", X, g.coef)
        h = np.einsum("snk,skl,snl->sn", Xw, np.linalg.pinv(np.einsum("snk,snl->skl", Xw, Xw)), Xw)
        ok = (1.0 - h) > 1e-6
        loo = np.where(ok, resid / np.where(ok, 1.0 - h, 1.0), 0.0)  # exact for least squares: e / (1 - h)
        for s, i in zip(*np.nonzero(~ok)):  # leverage 1 to rounding: refitted without the point
            rest = np.arange(n) != i
            coef = np.linalg.pinv(Xw[s, rest]) @ (sw[s, rest] * y[s, rest])
            loo[s, i] = y[s, i] - X[s, i] @ coef
        scale = np.maximum(np.abs(y), ZERO_FLOOR * np.median(np.abs(y), axis=-1, keepdims=True))
        return (np.abs(loo) / scale).mean(-1) * 100.0
