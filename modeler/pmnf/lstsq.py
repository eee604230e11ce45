"""Batched least squares: many small problems solved at once with numpy, never one at a time.

Two solvers: `pinv_solve` reproduces `numpy.linalg.lstsq` (SVD, minimum norm, same cut-off) for
the Extra-P-compatible mode; `wls` solves weighted problems through scaled normal equations and
also returns the exact leave-one-out residuals from the hat matrix, so cross-validation costs one
fit instead of n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EPS = np.finfo(float).eps


def pinv(A: np.ndarray) -> np.ndarray:
    """Pseudo-inverses of a stack of (n, k) matrices with lstsq's default cut-off (eps * max(n, k))."""
    n, k = A.shape[-2:]
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    cutoff = _EPS * max(n, k) * s[..., :1]
    inv_s = np.where(s > cutoff, 1.0 / np.where(s > cutoff, s, 1.0), 0.0)
    return np.einsum("...ji,...j,...kj->...ik", vt, inv_s, u)


def pinv_solve(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Minimum-norm least-squares coefficients of A[b] @ c = y[b] for every b: shape (..., k)."""
    return np.einsum("...kn,...n->...k", pinv(A), y)


@dataclass(frozen=True)
class WLSResult:
    coef: np.ndarray  # (..., k)
    fitted: np.ndarray  # (..., n)
    loo: np.ndarray  # (..., n): leave-one-out residual y_i - prediction without point i (inf if undefined)


def wls(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> WLSResult:
    """Weighted least squares min sum w_i (y_i - X_i c)^2 for a stack of problems.

    Columns that are all zero (padding, so that problems with fewer terms stack with the others)
    get coefficient 0. Columns are scaled to unit norm before the normal equations are formed,
    which keeps them well conditioned for the small, strongly scaled designs of PMNF models.
    """
    sw = np.sqrt(w)
    Xw = X * sw[..., :, None]
    yw = y * sw
    norms = np.sqrt(np.einsum("...nk,...nk->...k", Xw, Xw))
    unused = norms == 0
    norms = np.where(unused, 1.0, norms)
    Xs = Xw / norms[..., None, :]
    k = X.shape[-1]
    G = np.einsum("...nk,...nl->...kl", Xs, Xs) + unused[..., :, None] * np.eye(k)
    with np.errstate(all="ignore"):
        try:
            Ginv = np.linalg.inv(G)
        except np.linalg.LinAlgError:
            Ginv = np.linalg.pinv(G)
        beta = np.einsum("...kl,...nl,...n->...k", Ginv, Xs, yw)
        coef = beta / norms
        fitted = np.einsum("...nk,...k->...n", X, coef)
        h = np.einsum("...nk,...kl,...nl->...n", Xs, Ginv, Xs)
        resid = y - fitted
        denom = 1.0 - h
        loo = np.where(denom > 1e-10, resid / np.where(denom > 1e-10, denom, 1.0), np.inf)
    return WLSResult(coef, fitted, loo)
