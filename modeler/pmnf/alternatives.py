"""The forms that explain a series about as well as the chosen one, kept for the prediction range.

Five noisy values per parameter leave several forms in play, and they part ways beyond the
measured range: that, more than the noise on the coefficients, is why predictions at 4x the
largest measured value miss. The selection (`modeler.pmnf.selection`) already weighs every
hypothesis; the heaviest `N_ALTERNATIVES` of each series are kept here with their coefficients
and the covariance of those coefficients, so that a prediction range at any point can be drawn
from the mixture later (`modeler.uncertainty`). The chosen model is always among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: hypotheses kept per series, heaviest first
N_ALTERNATIVES = 8
#: ... and only those whose weight is at least this share of the heaviest one's
MIN_SHARE = 1e-3


@dataclass
class TopHypotheses:
    """Per series (S rows), the K heaviest hypotheses: index (-1: empty slot), log weight,
    coefficients (S, K, k) and (X^T W X)^-1 (S, K, k, k)."""

    index: np.ndarray
    logw: np.ndarray
    coef: np.ndarray
    xtwx_inv: np.ndarray


def top_hypotheses(logw: np.ndarray, coef: np.ndarray, xtwx_inv: np.ndarray, k: int = N_ALTERNATIVES) -> TopHypotheses:
    """The `k` heaviest of each row of `logw` (R, M), with their rows of `coef` (R, M, kc) and
    `xtwx_inv` (R, M, kc, kc)."""
    R, M = logw.shape
    k = min(k, M)
    top = np.argsort(-logw, axis=1, kind="stable")[:, :k]
    lw = np.take_along_axis(logw, top, axis=1)
    keep = np.isfinite(lw) & (lw >= lw[:, :1] + np.log(MIN_SHARE))
    r = np.arange(R)[:, None]
    return TopHypotheses(np.where(keep, top, -1), np.where(keep, lw, -np.inf), coef[r, top], xtwx_inv[r, top])


def stack(parts: list[TopHypotheses]) -> TopHypotheses:
    if len(parts) == 1:
        return parts[0]
    k = max(p.index.shape[1] for p in parts)

    def pad(a: np.ndarray, fill) -> np.ndarray:
        if a.shape[1] == k:
            return a
        extra = np.full((a.shape[0], k - a.shape[1]) + a.shape[2:], fill, dtype=a.dtype)
        return np.concatenate([a, extra], axis=1)

    return TopHypotheses(
        np.concatenate([pad(p.index, -1) for p in parts]),
        np.concatenate([pad(p.logw, -np.inf) for p in parts]),
        np.concatenate([pad(p.coef, 0.0) for p in parts]),
        np.concatenate([pad(p.xtwx_inv, 0.0) for p in parts]),
    )


#: one alternative of a series: (weight, terms as in GroupFit.terms, coefficients, covariance)
Alternative = tuple[float, list, np.ndarray, np.ndarray]


def normalize(entries: list[tuple[float, list, np.ndarray, np.ndarray]]) -> list[Alternative]:
    """(log weight, terms, coef, covariance) entries -> weights summing to 1, heaviest first.
    The same terms twice (the same fit, solved twice) keep the first entry's fit with the larger
    log weight: the engine lists its final model first, so that one is the model it reports."""
    seen: dict[str, tuple[float, list, np.ndarray, np.ndarray]] = {}
    for e in entries:
        key = repr(e[1])
        if key not in seen:
            seen[key] = e
        elif e[0] > seen[key][0]:
            seen[key] = (e[0],) + seen[key][1:]
    kept = sorted(seen.values(), key=lambda e: -e[0])
    if not kept:
        return []
    top = kept[0][0]
    w = np.array([np.exp(e[0] - top) for e in kept])
    w = w / w.sum()
    return [(float(wi), e[1], e[2], e[3]) for wi, e in zip(w, kept)]


def collect(
    top: TopHypotheses,
    terms_of: Callable[[int, int], list],
    s2: np.ndarray,
    final: tuple[np.ndarray, list, np.ndarray, np.ndarray],
    flat: np.ndarray,
) -> list[list[Alternative]]:
    """Per series, its alternatives: the final model first (`final`: log weights (S,), terms per
    series, coefficients (S, k) and (X^T W X)^-1 (S, k, k)), then the `top` hypotheses, whose
    terms `terms_of(series, hypothesis)` gives; covariances scaled by the noise `s2` (S,). A
    series that is `flat` (kept constant by the noise test) keeps only its final model."""
    final_lw, final_terms, final_coef, final_inv = final
    out = []
    for s in range(len(final_terms)):
        k = 1 + len(final_terms[s])
        entries = [(final_lw[s], final_terms[s], final_coef[s, :k], s2[s] * final_inv[s, :k, :k])]
        if not flat[s]:
            for j, m in enumerate(top.index[s]):
                if m < 0:
                    continue
                spec = terms_of(s, int(m))
                k = 1 + len(spec)
                entries.append((top.logw[s, j], spec, top.coef[s, j, :k], s2[s] * top.xtwx_inv[s, j, :k, :k]))
        out.append(normalize(entries))
    return out
