"""A collective's time over the rank count: c + W/ranks + a * ranks, or + a * log2(ranks), the last
step of `strong_scaling.choose` (research 124).

A ring all-reduce takes 2 (p-1)/p n/B + 2 (p-1) alpha: its bandwidth part saturates and its
latency part grows linearly; a tree takes alpha log2(p) + (p-1)/p n/B; a data-parallel step adds
its compute. PMNF's forms hold one term per parameter, so the latency was left out. `latency` fits
these forms and takes them where the evidence and a leave-one-out error say so.
"""

from __future__ import annotations

import numpy as np

from .pmnf.fit import GroupFit
from .pmnf.hypotheses import EXPONENTS, basis
from .pmnf.selection import NOISE_FLOOR, PENALTY
from .pmnf.single import ZERO_FLOOR
from .strong_scaling import (EVIDENCE, EXACT_VAR, MARGIN, _LINEAR, _ranks_column, _take_row, _times_beyond, evidence,
                             floored_cv, follows, interaction_variance, residual_variance, weighed)

#: the latency terms of collective communication, as hypotheses of the cost form (values x ranks):
#: ranks^2 (a time linear in ranks: a ring or a pairwise exchange, 2 (p - 1) alpha) and
#: ranks * log2(ranks) (a time in log2(ranks): a tree, recursive doubling)
COMM_TERMS = (EXPONENTS.index((2, 0)), EXPONENTS.index((1, 1)))

#: with one run, a form that leaves fewer residual degrees of freedom than this must look like a
#: collective's (`_zero_at_one`): its residual variance stands for the unknown noise, and noise alone
#: passes the evidence test for one more coefficient as F(1, dof) above PENALTY * ln(n) + 2 * EVIDENCE,
#: 7% of the time with 2 degrees of freedom (5 rank counts), 2% with 4, 0.3% with 9, 0.03% with 20
#: (6 rank counts x 5 sizes, where a compute-plus-ring step gained: review 126 MED-1)
FEW_DOF = 10

#: `latency` needs at least this many rank counts: c + W/ranks + a * h(ranks) has 3 coefficients
COMM_MIN_RANKS = 5


def cost_comm(plain: GroupFit, ranks: np.ndarray, col: int, h: int, other: int | None = None,
              u: np.ndarray | None = None, parts: tuple[bool, bool] = (True, True)) -> GroupFit:
    """Per row, the weighted least-squares fit of c + W/ranks + a * t(ranks)/ranks to the values (t:
    the cost-form hypothesis `h`, ranks^2 or ranks * log2(ranks)), as a `time_view` of the cost form
    W + c * ranks + a * t(ranks); beside another parameter (column `other`, hypothesis `u` (S,) per
    row), c + W/ranks + (c' + W'/ranks) * u(other) + a * t(ranks)/ranks, the cost form W + c * ranks
    + W' * u + c' * ranks * u + a * t(ranks): the work and the message scale with `other`, the
    latency does not. `parts`: whether the W' * u / ranks and the c' * u columns are in the form
    (`latency` tries it without either where that does as well: review 126 MED-2). The weights are
    those of `plain` (relative, outliers down-weighted, zeros floored); one alternative each, its
    covariance scaled by the relative residual variance."""
    y = plain.y
    S, n = y.shape
    e, j = EXPONENTS[h]
    t = ranks ** float(e) * (np.log2(ranks) ** j if j else 1.0)
    cols = [np.broadcast_to(1.0 / ranks, (S, n)), np.ones((S, n))]
    spec_u = None
    if other is not None:
        U = basis(plain.points[:, other])[u]  # (S, n)
        cols += [U / ranks] * parts[0] + [U] * parts[1]
    cols.append(np.broadcast_to(t / ranks, (S, n)))
    X = np.stack(cols, -1)
    w, Ginv, coef, s2 = _weighted_fit(plain, X)
    terms = []
    for s in range(S):
        spec = [((col, _LINEAR),)]
        if other is not None:
            spec_u = (other, int(u[s]))
            spec += [(spec_u,)] * parts[0] + [tuple(sorted(((col, _LINEAR), spec_u)))] * parts[1]
        spec.append(((col, h),))
        terms.append(spec)
    alternatives = [[(1.0, list(terms[s]), coef[s].copy(), s2[s] * Ginv[s])] for s in range(S)]
    return GroupFit(plain.index, plain.points, y, X, coef, w, terms, alternatives, None)


def _other_terms(g: GroupFit, row: int, other: int) -> set:
    """The hypotheses of parameter `other` in row `row`'s chosen terms."""
    return {h for term in g.terms[row] for p, h in term if p == other}


def latency(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray, keep: np.ndarray,
             taken: np.ndarray, exact: np.ndarray | None = None):
    """Per row: whether the model kept (the divided one where `keep`, else the plain one) gives way to
    a collective's time, c + W/ranks + a * ranks or + a * log2(ranks) (`cost_comm`; beside one other
    parameter, the work and message terms scaled by that parameter's term in the kept models, or not
    at all), in place in `divided` (marked in `taken`); with the log weight of evidence of that form
    and of the plain model (S,), as the prediction range weighs them. A ring all-reduce takes 2 (p-1)/p
    n/B + 2 (p-1) alpha: its bandwidth part saturates and its latency part grows linearly, and a
    data-parallel step adds W/p to it; the PMNF forms hold one term per parameter, and c + W/ranks (or
    a cost term such as ranks^(2/3) * log2(ranks)) left the latency out, 30-50% low at 16x the ranks
    even at 1% noise (research 124). Beside the other parameter, the forms tried are those with the
    terms u of that parameter in the kept models, each also without its c' * u or W' * u / ranks
    column, and the form without the parameter (a fixed-size all-reduce beside the batch size: review
    126 MED-3); the one chosen is the likeliest, each coefficient costing the engine's penalty, the
    noise that of the repetitions or else the residual variance of the form that leaves the least (a
    column that holds only rounding is dropped: `- 7.8e-15 * n` read `falling (deg 1)`, review 126
    MED-2); with one run, the forms without a column of the other parameter only where the values
    look like a collective's (`_zero_at_one`) or the form follows them exactly (taken where they did
    not, concave rises plus a size term such as c + a * ranks^(2/3) * log2(ranks) + b * size went
    from 3% to 50% high at 16x the ranks in 4 of 25,600 draws). Taken where:
    - a > 0 and the time stays above 0 up to 16x the largest ranks (and is not below
      -`ZERO_FLOOR` x the median value at a measured point: a ring on one rank takes 0);
    - its weight of evidence is `EVIDENCE` above the kept model's (the noise as in `choose`);
    - its leave-one-out error, each value's against at least `ZERO_FLOOR` x the median value
      (`floored_cv`: a value of 0 or near it on one rank is missed alike by every form relative to
      itself), is below `MARGIN` times the kept model's;
    - it does not fall anywhere in the measured range (the coefficient of 1/ranks, W or W + W' * u,
      is not above 0 at any point), unless it follows the values exactly (relative residual
      variance at most `EXACT_VAR`, as in `_exact`): a U shape such as W/ranks + a * ranks is left
      to `_u_shape` and `_unseen_rise`. Taken where the values turned up beyond their noise, it
      overshot U shapes whose rise is log2(ranks) or ranks^(1/2) 2-5x at 16x the ranks with one run
      (`benchmarks/strong_shapes.py`), and with the turn unseen a data-parallel step in strong
      scaling, W/ranks + a ring, went from a 90th percentile of 104% to 589% at 16x the ranks with
      one run at 10% noise (`benchmarks/comm_shapes.py`);
    - with one run (the noise unknown; `exact` (S,) marks repetitions that agree exactly, counts,
      whose noise is nan too but known to be 0), values it does not follow exactly and fewer than `FEW_DOF`
      residual degrees of freedom, the values look like a collective's where there is no other: on
      one rank, at each value of the other parameter, the time is within `ZERO_FLOOR` x the median
      value there of 0 (measured where one rank was run, the form's value there otherwise:
      `_zero_at_one`). The evidence then takes the form's own residual variance for the noise, and
      with 2-5 degrees of freedom left a concave rise such as c + a * log2(ranks) or c + a *
      ranks^(1/2) passed as c - W/ranks + a * ranks 1-7% of the time (46 of 12,800 one-run paths over
      ranks alone, median error at 16x the ranks 8.6% -> 90%; review 126 MED-1). Where the kept model
      was the divided one, its alternatives stay in the prediction range, weighed by its evidence
      against the form (review 126 LOW-4).
    Series with more than 2 parameters that vary, or fewer than `COMM_MIN_RANKS` rank counts, are
    left as they are, and so is every series without log terms (`allow_log=False`, `choose`): a
    linear latency alone took a tree's a * log2(ranks) and was 2x high at 16x the ranks."""
    S, n = plain.y.shape
    none = np.zeros(S, dtype=bool)
    # the noise unknown: one run, and not repetitions that agree exactly (`exact`: counts)
    unknown_noise = np.isnan(noise) & ~(none if exact is None else np.asarray(exact, dtype=bool))
    col = _ranks_column(plain, ranks)
    pts = plain.points
    if col is None or np.unique(ranks).size < COMM_MIN_RANKS:
        return none, None, None
    moving = [c for c in range(pts.shape[1]) if c != col and np.ptp(pts[:, c]) > 0]
    if len(moving) > 1:
        return none, None, None
    other = moving[0] if moving else None
    y = plain.y
    eligible = (y >= 0).all(-1) & (y > 0).any(-1) & np.isfinite(y).all(-1)
    # candidate forms per row: (u, parts), u the other parameter's terms in the kept models, or None
    # (ranks alone, or no dependence on the other parameter)
    if other is None:
        us = [{None} if eligible[s] else set() for s in range(S)]
    else:
        us = [({None} | _other_terms(plain, s, other) | _other_terms(divided, s, other)) if eligible[s] else set()
              for s in range(S)]
    tried = []  # (rows, fit, (u, parts), weighted rss per row)
    for u in sorted(set().union(*us), key=lambda v: -1 if v is None else v):
        idx = np.array([s for s in range(S) if u in us[s]])
        sub = plain.rows(idx)
        for parts in [(False, False)] if u is None else [(True, True), (True, False), (False, True)]:
            for h in COMM_TERMS:
                f = cost_comm(sub, ranks, col, h, None if u is None else other,
                              None if u is None else np.full(len(idx), u), parts)
                rss = (((f.y - np.einsum("snk,sk->sn", f.X, f.coef)) ** 2) * f.w).sum(-1)
                allowed = np.ones(len(idx), dtype=bool)
                if other is not None and (u is None or not all(parts)):
                    # not tried before (review 126 MED-2, MED-3): with one run, only where the values
                    # look like a collective's or the form follows them exactly
                    with np.errstate(invalid="ignore"):
                        allowed = (~unknown_noise[idx] | (residual_variance(f) <= EXACT_VAR)
                                   | _zero_at_one(f, ranks, pts[:, other], _u_values(pts, other, u, f), parts))
                tried.append((idx, f, (u, parts), np.where(allowed, rss, np.nan)))
    # the likeliest form per row: the noise of the repetitions, else the least residual variance of
    # its forms; ranks alone, every form has 3 coefficients and the least RSS wins
    s2 = np.full(S, np.inf)
    for idx, f, _, rss in tried:
        s2[idx] = np.fmin(s2[idx], np.where(np.isnan(rss), np.inf, rss) / max(n - f.X.shape[-1], 1))
    s2 = np.maximum(np.where(np.isnan(noise), s2, noise), NOISE_FLOOR)
    best: dict = {}  # row -> (score, fit, its row in the fit, form)
    for idx, f, form, rss in tried:
        score = rss / s2[idx] + PENALTY * np.log(n) * f.X.shape[-1]
        for r, s in enumerate(idx):
            if np.isfinite(rss[r]) and (s not in best or score[r] < best[s][0]):
                best[s] = (score[r], f, r, form)
    out = none.copy()
    lw_c_all, lw_p_all = np.zeros(S), np.zeros(S)
    fits = {}
    for s, (_, f, r, form) in best.items():
        fits.setdefault(id(f), (f, form, []))[2].append((s, r))
    for f, (u, parts), pairs in fits.values():
        rows = np.array([s for s, _ in pairs])
        f = f.rows(np.array([r for _, r in pairs]))
        k = f.X.shape[-1]
        p_sub, d_sub, kept = plain.rows(rows), divided.rows(rows), keep[rows]
        U = _u_values(pts, other, u, f)
        with np.errstate(invalid="ignore"):
            # the coefficient of 1/ranks at each point (W, or W + W' * u beside the other parameter)
            slope = f.coef[:, :1] + (f.coef[:, 2:3] * U if u is not None and parts[0] else 0.0)
            rv_c = residual_variance(f)
            cand = (f.coef[:, k - 1] > 0) & (~(slope > 0).any(-1) | (rv_c <= EXACT_VAR))
            unknown = unknown_noise[rows] & ~(rv_c <= EXACT_VAR)
            cand &= ~unknown | (n - k >= FEW_DOF) | _zero_at_one(f, ranks, None if other is None else pts[:, other], U,
                                                                 parts)
        if not cand.any():
            continue
        rv_kept = np.where(kept, residual_variance(d_sub), residual_variance(p_sub))
        fallback = np.fmin(rv_kept, rv_c)
        lw_c, lw_p = evidence(f, noise[rows], fallback), evidence(p_sub, noise[rows], fallback)
        lw_cur = np.where(kept, evidence(d_sub, noise[rows], fallback), lw_p)
        cand &= lw_c > lw_cur + EVIDENCE
        if not cand.any():
            continue
        with np.errstate(invalid="ignore"):
            cand &= floored_cv(f) < MARGIN * np.where(kept, floored_cv(d_sub), floored_cv(p_sub))
        fitted = np.einsum("snk,sk->sn", f.X, f.coef)
        typical = np.median(np.abs(f.y), axis=-1)
        for r in np.flatnonzero(cand):
            if not (np.all(fitted[r] > -ZERO_FLOOR * typical[r])
                    and np.all(_times_beyond(pts, ranks, col, f.terms[r], f.coef[r], (4.0, 16.0)) > 0)):
                continue
            s = int(rows[r])
            before = divided.alternatives[s] if (kept[r] and divided.alternatives is not None) else None
            _take_row(divided, s, f, int(r))
            if before:  # the kept divided model stays in the range, weighed by its evidence
                w_k = 1.0 / (1.0 + np.exp(np.clip(lw_c[r] - lw_cur[r], -700, 700)))
                divided.alternatives[s] = weighed(divided.alternatives[s], before, w_k)
            taken[s] = out[s] = True
            lw_c_all[s], lw_p_all[s] = lw_c[r], lw_p[r]
    if other is not None:
        _gather(plain, divided, ranks, noise, keep, taken, out, lw_c_all, lw_p_all, col, other, us, eligible)
    return out, lw_c_all, lw_p_all


def _weighted_fit(plain: GroupFit, X: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row, the least-squares fit of `plain`'s values on the design `X` (S, n, k) with `plain`'s
    weights: (the weights, (X^T W X)^+, the coefficients, the relative residual variance over n - k
    degrees of freedom, at least `NOISE_FLOOR`)."""
    y = plain.y
    n, k = y.shape[1], X.shape[-1]
    w = np.where(np.isfinite(plain.w), plain.w, 0.0)
    with np.errstate(all="ignore"):
        Xw = X * np.sqrt(w)[..., None]
        Ginv = np.linalg.pinv(np.einsum("snk,snl->skl", Xw, Xw))
        coef = np.einsum("skl,snl,sn->sk", Ginv, Xw, np.sqrt(w) * y)
        rel = (y - np.einsum("snk,sk->sn", X, coef)) * np.sqrt(w)
        s2 = np.maximum((rel**2).sum(-1) / max(n - k, 1), NOISE_FLOOR)
    return w, Ginv, coef, s2


#: the square of ranks (the cost form of a time linear in ranks)
_SQUARE = EXPONENTS.index((2, 0))


def cost_gather(plain: GroupFit, ranks: np.ndarray, col: int, other: int, u: np.ndarray
                ) -> tuple[GroupFit, GroupFit]:
    """Per row, the weighted least-squares fit of c + a * (ranks - 1) * u(other) to the values (`u` (S,):
    the hypothesis of parameter `other` per row; the weights those of `plain`), twice: as fitted, with
    its 2 coefficients (the evidence, residual variance and leave-one-out errors count those), and as
    the `time_view` of its cost form c * ranks + a * ranks^2 * u - a * ranks * u (no constant W: the
    model split over ranks has no ranks^(-1) term, `strong_scaling.split`), one alternative each, its
    covariance scaled by the relative residual variance, to be written into the fit of values x
    ranks. An all-gather of a tensor of u per rank takes (p - 1) u n/B; PMNF needs 3 coefficients for
    it (c + b * u + a * ranks * u), one more than ranks^(2/3) * log2(ranks) * u, which follows (p - 1)
    within 3-4% over ranks 1..32 (research 134)."""
    y = plain.y
    S, n = y.shape
    U = basis(plain.points[:, other])[u]  # (S, n)
    X = np.stack([np.ones((S, n)), (ranks - 1.0)[None, :] * U], -1)
    w, Ginv, coef, s2 = _weighted_fit(plain, X)
    fitted = GroupFit(plain.index, plain.points, y, X, coef, w, [[((col, _LINEAR),)] for _ in range(S)], None, None)
    # the cost form: W (0), c * ranks, a * ranks^2 * u, -a * ranks * u; as a time: / ranks. Its design
    # holds the two fitted columns, c's and (ranks - 1) * u under a's, and zeros (padding) under W and
    # -a: the hat matrix (`quality`'s leave-one-out error, `heavypoint`) is that of the 2-coefficient
    # fit, and `predictors` counts its one term for the adjusted R^2
    A = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    zero = np.zeros((S, n))
    Xc = np.stack([zero, X[..., 0], X[..., 1], zero], -1)
    terms = [[((col, _LINEAR),), tuple(sorted(((col, _SQUARE), (other, int(u[s]))))),
              tuple(sorted(((col, _LINEAR), (other, int(u[s])))))] for s in range(S)]
    alternatives = [[(1.0, list(terms[s]), A @ coef[s], A @ (s2[s] * Ginv[s]) @ A.T)] for s in range(S)]
    cost = GroupFit(plain.index, plain.points, y, Xc, coef @ A.T, w, terms, alternatives, None, np.ones(S, dtype=int))
    return fitted, cost


def _gather(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray, keep: np.ndarray,
            taken: np.ndarray, out: np.ndarray, lw_c_all: np.ndarray, lw_p_all: np.ndarray, col: int, other: int,
            us: list, eligible: np.ndarray) -> None:
    """Beside one other parameter, the rows that `latency` left (not `out`) give way to an all-gather's
    time, c + a * (ranks - 1) * u(other) (`cost_gather`; u one of the other parameter's terms in the
    kept models, the one with the least residual sum of squares), in place in `divided` (marked in
    `taken` and `out`, its log weight of evidence and the plain model's in `lw_c_all`, `lw_p_all`),
    where:
    - the values look like a collective's (`_zero_at_one`'s test, whatever the noise: at each value of
      the other parameter the time on one rank, measured or else the form's c, is at most `ZERO_FLOOR`
      x the median value there) and a > 0;
    - it follows the values within their noise (`follows`: the repetitions', else the interaction
      variance of the values off one rank; neither known: not taken);
    - its weight of evidence is `EVIDENCE` above the kept model's and its leave-one-out error
      (`floored_cv`) below the kept model's, `MARGIN` times it where that is a constant (fewer
      coefficients than the form's 2);
    - it stays above -`ZERO_FLOOR` x the median value at the measured points.
    PMNF's own form of it, c + b * u + a * ranks * u, costs one coefficient more than a single product
    term, and ranks^(2/3) * log2(ranks) * u, 3-4% from (p - 1) over ranks 1..32, won by that
    coefficient's penalty at 5-10% noise: about 33% low at 16x the ranks (review 112 LOW-1, research
    134). Where the kept model was the divided one, its alternatives stay in the range, weighed by its
    evidence against the form."""
    S, n = plain.y.shape
    rows_u: dict = {}
    for s in range(S):
        if out[s] or not eligible[s]:
            continue
        for u in us[s]:
            if u is not None:
                rows_u.setdefault(u, []).append(s)
    best: dict = {}  # row -> (rss, fitted, cost, its row there)
    for u, rows in sorted(rows_u.items()):
        idx = np.array(rows)
        f, c = cost_gather(plain.rows(idx), ranks, col, other, np.full(len(idx), u))
        rss = (((f.y - np.einsum("snk,sk->sn", f.X, f.coef)) ** 2) * f.w).sum(-1)
        for r, s in enumerate(idx):
            if np.isfinite(rss[r]) and (s not in best or rss[r] < best[s][0]):
                best[s] = (rss[r], f, c, r)
    pts = plain.points
    one = ranks == 1.0
    # the noise of one value that the form must follow its values within: the repetitions', else the
    # interaction variance of the values off one rank (a collective's 0 there has no logarithm)
    off = ~one
    sub = GroupFit(plain.index, pts[off], plain.y[:, off], plain.X[:, off], plain.coef, plain.w[:, off], plain.terms)
    inter, d_inter = interaction_variance(sub, ranks[off])
    repeated = np.isfinite(noise) & (noise > 0)
    s2_all = np.where(repeated, noise, inter)
    dof_all = np.where(repeated, n, max(d_inter, 1)).astype(float)
    for s, (_, f, c, r) in sorted(best.items()):
        f, c = f.rows(np.array([r])), c.rows(np.array([r]))
        kept = bool(keep[s])
        p_sub, d_sub = plain.rows(np.array([s])), divided.rows(np.array([s]))
        y, coef = f.y[0], f.coef[0]
        if not coef[1] > 0:
            continue
        at1 = y if one.any() else np.full(n, coef[0])
        zero = True
        for g in np.unique(pts[:, other]):
            here = pts[:, other] == g
            typical = np.median(np.abs(y[here]))
            zero &= bool(np.all(np.abs(at1[here & one] if one.any() else at1[here]) <= ZERO_FLOOR * typical))
        if not zero:
            continue
        # it follows the values within their noise (`follows`, as c + W/ranks in `choose`): a rise that
        # falls again (a * log2(ranks) / ranks) is 0 on one rank too, and the form, though a better
        # fit than the constant kept, was 150-190x the truth at 16x the ranks
        with np.errstate(invalid="ignore"):
            if not (np.isfinite(s2_all[s]) and follows(f, np.array([max(s2_all[s], NOISE_FLOOR)]),
                                                       dof_all[[s]])[0]):
                continue
        with np.errstate(invalid="ignore"):
            rv_kept = residual_variance(d_sub) if kept else residual_variance(p_sub)
            fallback = np.fmin(rv_kept, residual_variance(f))
            lw_c, lw_p = evidence(f, noise[[s]], fallback), evidence(p_sub, noise[[s]], fallback)
            lw_cur = evidence(d_sub, noise[[s]], fallback) if kept else lw_p
            # the CV margin of a form with more coefficients (`MARGIN`) only against a constant: against
            # a model with a term, as many coefficients as the form's, a lower leave-one-out error
            k_cur = 1 + len((d_sub if kept else p_sub).terms[0])
            margin = MARGIN if k_cur < 2 else 1.0
            if not (lw_c[0] > lw_cur[0] + EVIDENCE
                    and floored_cv(f)[0] < margin * (floored_cv(d_sub) if kept else floored_cv(p_sub))[0]):
                continue
        fitted = np.einsum("nk,k->n", f.X[0], coef)
        if not np.all(fitted > -ZERO_FLOOR * np.median(np.abs(y))):
            continue
        before = divided.alternatives[s] if (kept and divided.alternatives is not None) else None
        _take_row(divided, s, c, 0)
        if before:  # the kept divided model stays in the range, weighed by its evidence
            w_k = 1.0 / (1.0 + np.exp(np.clip(lw_c[0] - lw_cur[0], -700, 700)))
            divided.alternatives[s] = weighed(divided.alternatives[s], before, w_k)
        taken[s] = out[s] = True
        lw_c_all[s], lw_p_all[s] = lw_c[0], lw_p[0]


def _u_values(pts: np.ndarray, other: int | None, u: int | None, f: GroupFit) -> np.ndarray | None:
    """The other parameter's term `u` at each point, (rows of `f`, points); None without one."""
    return None if u is None else np.broadcast_to(basis(pts[:, other])[u], f.y.shape)


def _zero_at_one(f: GroupFit, ranks: np.ndarray, v: np.ndarray | None, U: np.ndarray | None,
                 parts: tuple[bool, bool]) -> np.ndarray:
    """Per row of `f` (`cost_comm`): whether its values look like a collective's, whose time on one
    rank is 0 (no communication) or only a call's overhead: at each value of the other parameter
    (`v`, None: ranks alone), the time on one rank is at most `ZERO_FLOOR` x the median |value|
    there; the measured values where one rank was run, else the form's value at ranks = 1 (c + W +
    (c' + W') * u, + a for the linear latency, + 0 for log2(ranks))."""
    y = f.y
    groups = np.zeros(len(ranks)) if v is None else v
    one = ranks == 1.0
    if one.any():
        at1 = y
    else:
        X1 = [np.ones_like(y), np.ones_like(y)]
        if U is not None:
            X1 += [U] * parts[0] + [U] * parts[1]
        h = f.terms[0][-1][0][1]  # the latency term, the same in every row
        X1.append(np.full(y.shape, 0.0 if EXPONENTS[h][1] else 1.0))  # t(1) / 1: 1 for ranks, 0 for log2
        X1 = np.stack(X1, -1)
        at1 = np.einsum("snk,sk->sn", X1, f.coef)
    ok = np.ones(y.shape[0], dtype=bool)
    for g in np.unique(groups):
        here = groups == g
        typical = np.median(np.abs(y[:, here]), axis=-1)
        at = np.abs(at1[:, here & one]) if one.any() else np.abs(at1[:, here])
        ok &= (at <= ZERO_FLOOR * typical[:, None]).all(-1)
    return ok

