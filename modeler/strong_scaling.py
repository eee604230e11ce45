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
"""

from __future__ import annotations

import numpy as np

from .model import Alternative, Factor, Model, Term
from .pmnf.fit import GroupFit
from .pmnf.selection import PENALTY

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


def choose(plain: GroupFit, divided: GroupFit, cv_plain: np.ndarray, cv_divided: np.ndarray,
           noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (whether the divided form is kept, the weight of the other family in the
    prediction range). `divided` is the `time_view` of the fit of values x ranks. A plain constant
    (the noise test found the values flat, or nothing grows) is never split, nor mixed."""
    fallback = np.minimum(residual_variance(plain), residual_variance(divided))
    lw_p, lw_d = evidence(plain, noise, fallback), evidence(divided, noise, fallback)
    has_terms = np.array([len(t) > 0 for t in plain.terms])
    with np.errstate(invalid="ignore"):
        keep = has_terms & (lw_d > lw_p + EVIDENCE) & (cv_divided < MARGIN * cv_plain)
    p_divided = 1.0 / (1.0 + np.exp(np.clip(lw_p - lw_d, -700, 700)))
    other = np.where(keep, 1.0 - p_divided, p_divided)
    return keep, np.where(has_terms, other, 0.0)


def mix(own: tuple[Alternative, ...], other: tuple[Alternative, ...], other_weight: float,
        min_share: float = 1e-3) -> tuple[Alternative, ...]:
    """The alternatives of both families, weighed: `own` by 1 - other_weight, `other` by it; those
    below `min_share` of the heaviest are left out."""
    if other_weight < min_share or not other:
        return own
    both = [Alternative(a.weight * (1.0 - other_weight), a.model, a.cov) for a in own]
    both += [Alternative(a.weight * other_weight, a.model, a.cov) for a in other]
    top = max(a.weight for a in both)
    kept = [a for a in both if a.weight >= min_share * top]
    total = sum(a.weight for a in kept)
    return tuple(Alternative(a.weight / total, a.model, a.cov) for a in kept)


def time_view(g: GroupFit, ranks: np.ndarray) -> GroupFit:
    """The fit of values x `ranks` as a fit of the values themselves: every design column and value
    divided by ranks (point-wise), the coefficients unchanged. The relative weights become
    1/(y/r)^2 = r^2/y^2, so the weighted design and the hat matrix stay the same."""
    r = np.asarray(ranks, dtype=float)
    return GroupFit(g.index, g.points, g.y / r[None, :], g.X / r[None, :, None], g.coef, g.w * r[None, :] ** 2,
                    g.terms, g.alternatives, None)


def split(model: Model, name: str) -> tuple[Model, np.ndarray]:
    """`model` (of values x ranks) divided by the parameter `name`, and the matrix A that maps its
    coefficients (constant, then terms) to the new model's: new = A @ old, cov_new = A cov A^T.
    A term whose only factor was `name`^1 becomes (part of) the constant."""
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
    out = Model(model.parameters, float(new[0]),
                tuple(Term(float(c), factors) for c, (factors, _) in zip(new[1:], terms)))
    return out, A


def split_alternative(a: Alternative, name: str) -> Alternative:
    model, A = split(a.model, name)
    with np.errstate(all="ignore"):  # covariances of values near the float range may be inf
        return Alternative(a.weight, model, A @ a.cov @ A.T)
