"""`compat="extrap"`: Extra-P 4.2.5's default modeler, reproduced, vectorized over series.

One parameter: the 'Basic' single-parameter modeler (`single.extrap_single`) on the mean of the
repetitions. Several parameters: single-parameter fits along Extra-P's lines (`points.extrap_lines`),
constants dropped, the kept terms combined in Extra-P's structures, refitted on all points and
chosen by in-sample SMAPE, skipping hypotheses with a term under 0.05% of a value; the adjusted R^2
counts the factors of the terms as its predictors, as Extra-P's does (`GroupFit.predictors`).
"""

from __future__ import annotations

import numpy as np

from .fit import GroupFit, TermSpec, term_columns
from .hypotheses import basis
from .lstsq import pinv_solve
from .points import extrap_lines
from .single import TERM_CONTRIBUTION, clearly_below, extrap_single, first_lowest, smape_terms
from .structures import extrap_structures


def fit_group(points: np.ndarray, Y: np.ndarray, index: list[int], allow_log: bool = True) -> GroupFit:
    """Extra-P's models for the series Y (S, n) measured at `points` (n, P)."""
    S, n = Y.shape
    P = points.shape[1]
    if P == 1:
        sp = extrap_single(points[:, 0], Y, allow_log)
        hyp = sp.hypothesis
        has = hyp >= 0
        # a constant's column is 0, not a placeholder hypothesis times 0: log2(0) * 0 is nan, which
        # took a parameter value 0 to "SVD did not converge" (review 45). Like Extra-P, the search
        # had no log term there (`hypotheses.allowed`), and x^i is 0 at 0 for every i it has
        with np.errstate(divide="ignore", invalid="ignore"):
            col = np.where(has[:, None], basis(points[:, 0])[np.where(has, hyp, 0)], 0.0)
        X = np.stack([np.ones((S, n)), col], axis=-1)
        coef = np.where(has[:, None], sp.coef, np.stack([sp.coef[:, 0], np.zeros(S)], axis=1))
        terms = [[((0, int(h)),)] if h >= 0 else [] for h in hyp]
        # Extra-P prints the leave-one-out RSS and SMAPE of a chosen term (in-sample for a constant)
        return GroupFit(index, points, Y, X, coef, np.ones((S, n)), terms, reported=(sp.cv_smape, sp.cv_rss))

    # single-parameter step along lines; -1 where the parameter's model is constant
    hyp = np.empty((S, P), dtype=int)
    sp_coef = np.empty((S, P, 2))
    for p, line in enumerate(extrap_lines(points)):
        if line.x.size < 3:
            # Extra-P would fit two coefficients to two points here; we call the parameter constant
            # (the estimator warns about it), as the default mode does
            hyp[:, p] = -1
            continue
        fit = extrap_single(line.x, Y @ line.weights.T, allow_log)
        hyp[:, p] = fit.hypothesis
        sp_coef[:, p] = fit.coef
    bases = [basis(points[:, p]) for p in range(P)]
    active = hyp >= 0
    patterns: dict[tuple[int, ...], list[int]] = {}
    for s in range(S):
        patterns.setdefault(tuple(np.flatnonzero(active[s])), []).append(s)

    kmax = 1 + max(len(st) for pat in patterns for st in extrap_structures(len(pat)))
    X = np.zeros((S, n, kmax))
    X[:, :, 0] = 1.0
    coef = np.zeros((S, kmax))
    terms: list[list[TermSpec]] = [[] for _ in range(S)]
    for pat, rows in patterns.items():
        rows_a = np.array(rows)
        y = Y[rows_a]
        h = hyp[rows_a]
        if not pat:
            coef[rows_a, 0] = y.mean(axis=1)
            continue
        structures = extrap_structures(len(pat))
        M = len(structures)
        k = 1 + max(len(st) for st in structures)
        A = np.zeros((len(rows), M, n, k))
        A[..., 0] = 1.0
        for m, st in enumerate(structures):
            for j, term in enumerate(st):
                A[:, m, :, 1 + j] = term_columns(bases, h, tuple(pat[i] for i in term))
        c = pinv_solve(A, y[:, None, :])  # (R, M, k)
        pred = np.einsum("rmnk,rmk->rmn", A, c)
        smape = smape_terms(pred, y[:, None, :]).sum(-1) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            contrib = np.abs(A[..., 1:] * c[:, :, None, 1:] / y[:, None, :, None]).max(axis=2)  # (R, M, k-1)
        real = np.array([[j < len(st) for j in range(k - 1)] for st in structures])  # padding is no term
        bad = (((c[..., 1:] == 0) | (contrib < TERM_CONTRIBUTION)) & real[None]).any(-1)
        if len(pat) == 1:
            # Extra-P also tries the single-parameter coefficients and keeps them unless the refit
            # has a strictly smaller SMAPE (beyond rounding: `single.TIE`).
            p = pat[0]
            c_sp = np.stack([sp_coef[rows_a, p, 0], sp_coef[rows_a, p, 1]], axis=1)
            pred_sp = np.einsum("rnk,rk->rn", A[:, 0], c_sp)
            smape_sp = smape_terms(pred_sp, y).sum(-1) / n
            use_refit = clearly_below(smape[:, 0], smape_sp)
            chosen = np.zeros(len(rows), dtype=int)
            cc = np.where(use_refit[:, None], c[:, 0], c_sp)
        else:
            # hypothesis 0 starts as the best without the contribution check; later ones must be
            # valid and strictly better (Extra-P's loop), i.e. the first minimum among valid ones,
            # scores equal within rounding being equal (`single.TIE`)
            score = np.where(bad | np.isnan(smape), np.inf, smape)
            cand = first_lowest(score)
            r = np.arange(len(rows))
            chosen = np.where(clearly_below(score[r, cand], smape[:, 0]), cand, 0)
            cc = c[r, chosen]
        for i, s in enumerate(rows):
            st = structures[chosen[i]]
            X[s, :, : 1 + len(st)] = A[i, chosen[i], :, : 1 + len(st)]
            coef[s, : 1 + len(st)] = cc[i, : 1 + len(st)]
            terms[s] = [tuple((pat[q], int(hyp[s, pat[q]])) for q in term) for term in st]
    # Extra-P's MultiParameterHypothesis counts each factor as a predictor of the adjusted R^2
    factors = np.array([sum(len(term) for term in t) for t in terms], dtype=int)
    return GroupFit(index, points, Y, X, coef, np.ones((S, n)), terms, predictors=factors)
