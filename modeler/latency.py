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
from .pmnf.selection import NOISE_FLOOR
from .pmnf.single import ZERO_FLOOR
from .strong_scaling import (EVIDENCE, EXACT_VAR, MARGIN, _LINEAR, _ranks_column, _take_row, _times_beyond, evidence,
                             floored_cv, residual_variance)

#: the latency terms of collective communication, as hypotheses of the cost form (values x ranks):
#: ranks^2 (a time linear in ranks: a ring or a pairwise exchange, 2 (p - 1) alpha) and
#: ranks * log2(ranks) (a time in log2(ranks): a tree, recursive doubling)
COMM_TERMS = (EXPONENTS.index((2, 0)), EXPONENTS.index((1, 1)))

#: `latency` needs at least this many rank counts: c + W/ranks + a * h(ranks) has 3 coefficients
COMM_MIN_RANKS = 5


def cost_comm(plain: GroupFit, ranks: np.ndarray, col: int, h: int, other: int | None = None,
              u: np.ndarray | None = None) -> GroupFit:
    """Per row, the weighted least-squares fit of c + W/ranks + a * t(ranks)/ranks to the values (t:
    the cost-form hypothesis `h`, ranks^2 or ranks * log2(ranks)), as a `time_view` of the cost form
    W + c * ranks + a * t(ranks); beside another parameter (column `other`, hypothesis `u` (S,) per
    row), c + W/ranks + (c' + W'/ranks) * u(other) + a * t(ranks)/ranks, the cost form W + c * ranks
    + W' * u + c' * ranks * u + a * t(ranks): the work and the message scale with `other`, the
    latency does not. The weights are those of `plain` (relative, outliers down-weighted, zeros
    floored); one alternative each, its covariance scaled by the relative residual variance."""
    y = plain.y
    S, n = y.shape
    e, j = EXPONENTS[h]
    t = ranks ** float(e) * (np.log2(ranks) ** j if j else 1.0)
    cols = [np.broadcast_to(1.0 / ranks, (S, n)), np.ones((S, n))]
    spec_u = None
    if other is not None:
        U = basis(plain.points[:, other])[u]  # (S, n)
        cols += [U / ranks, U]
    cols.append(np.broadcast_to(t / ranks, (S, n)))
    X = np.stack(cols, -1)
    k = X.shape[-1]
    w = np.where(np.isfinite(plain.w), plain.w, 0.0)
    with np.errstate(all="ignore"):
        Xw = X * np.sqrt(w)[..., None]
        Ginv = np.linalg.pinv(np.einsum("snk,snl->skl", Xw, Xw))
        coef = np.einsum("skl,snl,sn->sk", Ginv, Xw, np.sqrt(w) * y)
        rel = (y - np.einsum("snk,sk->sn", X, coef)) * np.sqrt(w)
        s2 = np.maximum((rel**2).sum(-1) / max(n - k, 1), NOISE_FLOOR)
    terms = []
    for s in range(S):
        spec = [((col, _LINEAR),)]
        if other is not None:
            spec_u = (other, int(u[s]))
            spec += [(spec_u,), tuple(sorted(((col, _LINEAR), spec_u)))]
        spec.append(((col, h),))
        terms.append(spec)
    alternatives = [[(1.0, list(terms[s]), coef[s].copy(), s2[s] * Ginv[s])] for s in range(S)]
    return GroupFit(plain.index, plain.points, y, X, coef, w, terms, alternatives, None)


def _other_terms(g: GroupFit, row: int, other: int) -> set:
    """The hypotheses of parameter `other` in row `row`'s chosen terms."""
    return {h for term in g.terms[row] for p, h in term if p == other}


def latency(plain: GroupFit, divided: GroupFit, ranks: np.ndarray, noise: np.ndarray, keep: np.ndarray,
             taken: np.ndarray):
    """Per row: whether the model kept (the divided one where `keep`, else the plain one) gives way to
    a collective's time, c + W/ranks + a * ranks or + a * log2(ranks) (`cost_comm`; beside one other
    parameter, the work and message terms scaled by that parameter's term in the kept models), in
    place in `divided` (marked in `taken`); with the log weight of evidence of that form and of the
    plain model (S,). A ring all-reduce takes 2 (p-1)/p n/B + 2 (p-1) alpha: its bandwidth part
    saturates and its latency part grows linearly, and a data-parallel step adds W/p to it; the
    PMNF forms hold one term per parameter, and c + W/ranks (or a cost term such as
    ranks^(2/3) * log2(ranks)) left the latency out, 30-50% low at 16x the ranks even at 1% noise
    (research 124). Taken where:
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
      one run at 10% noise (`benchmarks/comm_shapes.py`).
    Series with more than 2 parameters that vary, or fewer than `COMM_MIN_RANKS` rank counts, are
    left as they are, and so is every series without log terms (`allow_log=False`, `choose`): a
    linear latency alone took a tree's a * log2(ranks) and was 2x high at 16x the ranks."""
    S, n = plain.y.shape
    none = np.zeros(S, dtype=bool)
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
    # candidate forms per row: (u, h), u the other parameter's terms in the kept models (None: ranks alone)
    if other is None:
        us = [{None} if eligible[s] else set() for s in range(S)]
    else:
        us = [(_other_terms(plain, s, other) | _other_terms(divided, s, other)) if eligible[s] else set()
              for s in range(S)]
    best: dict = {}  # row -> (rss, fit, its row in the fit)
    for u in sorted(set().union(*us), key=lambda v: -1 if v is None else v):
        idx = np.array([s for s in range(S) if u in us[s]])
        sub = _subset(plain, idx)
        for h in COMM_TERMS:
            f = cost_comm(sub, ranks, col, h, other, None if u is None else np.full(len(idx), u))
            rss = (((f.y - np.einsum("snk,sk->sn", f.X, f.coef)) ** 2) * f.w).sum(-1)
            for r, s in enumerate(idx):
                if np.isfinite(rss[r]) and (s not in best or rss[r] < best[s][0]):
                    best[s] = (rss[r], f, r)
    out = none.copy()
    lw_c_all, lw_p_all = np.zeros(S), np.zeros(S)
    fits = {}
    for s, (_, f, r) in best.items():
        fits.setdefault(id(f), (f, []))[1].append((s, r))
    for f, pairs in fits.values():
        rows = np.array([s for s, _ in pairs])
        f = _subset(f, np.array([r for _, r in pairs]))
        k = f.X.shape[-1]
        p_sub, d_sub, kept = _subset(plain, rows), _subset(divided, rows), keep[rows]
        with np.errstate(invalid="ignore"):
            # the coefficient of 1/ranks at each point (W, or W + W' * u beside the other parameter)
            slope = f.coef[:, :1] + (f.coef[:, 2:3] * f.X[:, :, 3] if k == 5 else 0.0)
            rv_c = residual_variance(f)
            cand = (f.coef[:, k - 1] > 0) & (~(slope > 0).any(-1) | (rv_c <= EXACT_VAR))
        if not cand.any():
            continue
        fallback = np.fmin(np.where(kept, residual_variance(d_sub), residual_variance(p_sub)), rv_c)
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
            _take_row(divided, s, f, int(r))
            taken[s] = out[s] = True
            lw_c_all[s], lw_p_all[s] = lw_c[r], lw_p[r]
    return out, lw_c_all, lw_p_all


def _subset(g: GroupFit, rows: np.ndarray) -> GroupFit:
    """The fit of some of its rows (no `reported`, `predictors`)."""
    pick = lambda a: None if a is None else [a[r] for r in rows]  # noqa: E731
    return GroupFit([g.index[r] for r in rows], g.points, g.y[rows], g.X[rows], g.coef[rows], g.w[rows],
                    pick(g.terms), pick(g.alternatives))
