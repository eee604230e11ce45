"""Work split over the ranks: models that fall as 1/ranks.

PMNF terms x^i * log2(x)^j with positive exponents cannot fall as 1/x, yet that is how the time
of a strong-scaling run falls with ranks: T = c + W / ranks + C * log2(ranks). Its ranks x T (the
cost, rank-seconds) is PMNF: c * ranks + W + C * ranks * log2(ranks). Extra-P models strong
scaling the same way, on the sum over ranks, when told to; here the default modeler fits every
series also as values x ranks, and keeps that form, divided by ranks, where it explains the
values clearly better out of sample (cross-validated SMAPE below `MARGIN` times the plain form's;
relative errors compare, since the two differ by the factor ranks at every point). The result is
a model with exponents shifted by -1 in ranks: `0.01 + 1.28 * ranks^(-1) * batch^(1)`.

On the synthetic strong-scaling call paths of `benchmarks/derived_speedup.py` the time
predicted at 4x the measured ranks went from a median error of 600% to 8%; on call paths
drawn from the PMNF space the split form was never taken (docs/modeling.md).
"""

from __future__ import annotations

import numpy as np

from .model import Alternative, Factor, Model, Term
from .pmnf.fit import GroupFit

#: the split form is kept where its cross-validated SMAPE is below this times the plain form's;
#: 1.0 took it for 4-7% of call paths drawn from the PMNF space (none with 0.8) and moved their
#: errors; 0.6 kept it for fewer strong-scaling call paths
MARGIN = 0.8


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
    return Alternative(a.weight, model, A @ a.cov @ A.T)
