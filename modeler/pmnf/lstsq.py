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
    #: (..., k, k) inverse of the weighted normal matrix (X^T W X)^-1, when asked for: the
    #: coefficients' covariance in units of the noise variance of a weight-1 value
    xtwx_inv: np.ndarray | None = None


def wls(X: np.ndarray, y: np.ndarray, w: np.ndarray, *, cov: bool = False) -> WLSResult:
    """Weighted least squares min sum w_i (y_i - X_i c)^2 for a stack of (n, k) designs X."""
    return wls_columns(np.swapaxes(X, -1, -2), y, w, cov=cov)


def wls_columns(C: np.ndarray, y: np.ndarray, w: np.ndarray, *, cov: bool = False) -> WLSResult:
    """`wls` with the design given as columns, C of shape (..., k, n): the layout the engine builds.

    Columns that are all zero (padding, so that problems with fewer terms stack with the others)
    get coefficient 0. Columns are scaled to unit norm before the normal equations are formed,
    which keeps them well conditioned for the small, strongly scaled designs of PMNF models.
    """
    k = C.shape[-2]
    sw = np.sqrt(w)[..., None, :]
    Cw = C * sw
    norms = np.sqrt(np.einsum("...kn,...kn->...k", Cw, Cw))
    unused = norms == 0
    norms = np.where(unused, 1.0, norms)
    Cs = Cw / norms[..., :, None]
    G = Cs @ np.swapaxes(Cs, -1, -2) + unused[..., :, None] * np.eye(k)
    with np.errstate(all="ignore"):
        try:
            Ginv = np.linalg.inv(G)
        except np.linalg.LinAlgError:
            Ginv = np.linalg.pinv(G)
        yw = (y * np.sqrt(w))[..., None]  # (..., n, 1)
        beta = (Ginv @ (Cs @ yw))[..., 0]
        coef = beta / norms
        fitted = np.einsum("...kn,...k->...n", C, coef)
        h = np.einsum("...kn,...kn->...n", Ginv @ Cs, Cs)
        resid = y - fitted
        denom = 1.0 - h
        loo = np.where(denom > 1e-10, resid / np.where(denom > 1e-10, denom, 1.0), np.inf)
        # unused (all-zero) columns keep their placeholder 1 on the diagonal; their design values are 0
        xtwx_inv = Ginv / (norms[..., :, None] * norms[..., None, :]) if cov else None
    return WLSResult(coef, fitted, loo, xtwx_inv)
