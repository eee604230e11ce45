"""The single-parameter hypothesis space: Extra-P's 42 terms `x^i * log2(x)^j`, in Extra-P's order.

The order matters for compatibility: Extra-P walks the list and keeps a hypothesis only when it is
strictly better than the best so far, so among equal scores the earliest wins.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

# (numerator, denominator, log exponent), exactly as extrap.modelers.single_parameter.basic lists them
_EXTRAP_ORDER: tuple[tuple[int, int, int], ...] = (
    (0, 1, 1), (0, 1, 2), (1, 4, 0), (1, 3, 0), (1, 4, 1), (1, 3, 1), (1, 4, 2), (1, 3, 2),
    (1, 2, 0), (1, 2, 1), (1, 2, 2), (2, 3, 0), (3, 4, 0), (2, 3, 1), (3, 4, 1), (4, 5, 0),
    (2, 3, 2), (3, 4, 2), (1, 1, 0), (1, 1, 1), (1, 1, 2), (5, 4, 0), (5, 4, 1), (4, 3, 0),
    (4, 3, 1), (3, 2, 0), (3, 2, 1), (3, 2, 2), (5, 3, 0), (7, 4, 0), (2, 1, 0), (2, 1, 1),
    (2, 1, 2), (9, 4, 0), (7, 3, 0), (5, 2, 0), (5, 2, 1), (5, 2, 2), (8, 3, 0), (11, 4, 0),
    (3, 1, 0), (3, 1, 1),
)

#: (polynomial exponent, log exponent) of every hypothesis, in Extra-P's order
EXPONENTS: tuple[tuple[Fraction, int], ...] = tuple((Fraction(a, b), c) for a, b, c in _EXTRAP_ORDER)
N_HYPOTHESES = len(EXPONENTS)
#: indexes of the hypotheses without a log factor (used when a parameter has a value below 1)
POLY_ONLY = np.array([i for i, (_, j) in enumerate(EXPONENTS) if j == 0])
_POLY = np.array([float(e) for e, _ in EXPONENTS])
_LOG = np.array([j for _, j in EXPONENTS])


def allowed(values: np.ndarray, allow_log: bool = True) -> np.ndarray:
    """Indexes of the hypotheses usable for a parameter taking `values`: log terms need every value >= 1."""
    if allow_log and np.all(np.asarray(values) >= 1.0):
        return np.arange(N_HYPOTHESES)
    return POLY_ONLY


def basis(x: np.ndarray) -> np.ndarray:
    """Every hypothesis term evaluated at `x`: shape (N_HYPOTHESES, len(x)).

    Log factors of values below 1 are left as computed (negative or nan); callers exclude those
    hypotheses with `allowed`.
    """
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        poly = np.power(x[None, :], _POLY[:, None])
        lg = np.log2(x)
        logs = np.stack([np.ones_like(x), lg, lg * lg])
        return poly * logs[_LOG]


def exponent_of(h: int) -> tuple[float, int]:
    e, j = EXPONENTS[h]
    return float(e), int(j)
