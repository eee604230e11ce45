"""How fast a model grows: the dominant term's total exponent and log exponent, the figure the
ranking sorts by first (`modeler.ranking`), and the text the tables show for it.

Growth is taken as every parameter grows alike, so a term's degree is the sum of its exponents;
a dominant term with a negative coefficient means the value eventually falls.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from .model import Model


def growth_text(g: tuple[float, float]) -> str:
    """The dominant term's total degree and log power (`growth`): `deg 1.5, log^1`, `const`, or
    `falling (...)`. A falling growth whose parts are both at or below 0 (a rising term with a
    negative coefficient, or a decaying term without a log) is told by their sizes: `falling (log^1)`
    for `10 - 2 * log2(p)`. Parts of mixed signs are told as they are: a term that decays to 0 as
    `ranks^(-1/3) * log2(ranks)` is `falling (deg -0.333, log^1)` (review 66 F4: it was `falling (deg
    0.333, log^1)`, which reads as a rise of degree 0.333 turned over)."""
    e, l = g
    if e == 0 and l == 0:
        return "const"
    signed = (e < 0 < l) or (l < 0 < e)
    parts = ([f"deg {(e if signed else abs(e)):.3g}"] if e else []) + ([f"log^{(l if signed else abs(l)):.3g}"] if l else [])
    text = ", ".join(parts)
    return f"falling ({text})" if e < 0 or (e == 0 and l < 0) else text


def growth(model: Model) -> tuple[float, float]:
    """(total exponent, total log exponent) of the dominant term, negated when it decreases.

    Growth is taken as every parameter grows alike, so a term's degree is the sum of its exponents.
    A term of positive degree dominates; a negative coefficient on it means the value eventually
    falls. Without one, the model tends to its constant (or to a term of degree 0, such as
    `batch^(1) * ranks^(-1)`, work split over the ranks): level, whatever sign a decaying term in
    `ranks^(-1)` has (`c - a * ranks^(-1)` rises to a plateau). A model with nothing but decaying
    terms falls, as its slowest-decaying term."""
    rising: tuple[tuple[float, float], float] | None = None
    level = model.constant != 0
    decaying: list[tuple[float, float]] = []
    for t in model.terms:
        if t.coefficient == 0:
            continue
        if not any(f.exponent or f.log_exponent for f in t.factors):
            level = True  # a constant-valued term does not grow
            continue
        g = (float(sum(f.exponent for f in t.factors)), float(sum(f.log_exponent for f in t.factors)))
        if g > (0.0, 0.0):
            if rising is None or g > rising[0]:
                rising = (g, 1.0 if t.coefficient > 0 else -1.0)
        elif g == (0.0, 0.0):
            level = True
        else:
            decaying.append(g)
    if rising is not None:
        g, sign = rising
        return (sign * g[0], sign * g[1])
    if level or not decaying:
        return (0.0, 0.0)
    return max(decaying)


def rising_growth(model: Model) -> tuple[float, float] | None:
    """The growth of the fastest term with a positive coefficient and a positive growth, or None."""
    best = None
    for t in model.terms:
        if t.coefficient <= 0:
            continue
        g = (float(sum(f.exponent for f in t.factors)), float(sum(f.log_exponent for f in t.factors)))
        if g > (0.0, 0.0) and (best is None or g > best):
            best = g
    return best


#: the step of `rises_to_target` where the target is not beyond the largest measured point
RISE_STEP = 1.01


def rises_to_target(model: Model, parameters: Sequence[str], at: Mapping[str, float],
                    largest: Mapping[str, float] | None = None) -> bool:
    """Whether the model's value rises up to the target `at`: where `at` lies beyond the largest
    measured point `largest` (at least as large in every parameter), its prediction there is above
    the one at `largest`; else (the default target is that point) it rises as every parameter grows
    alike by 1% at the target, as `growth` takes the parameters to grow."""
    if not parameters:
        return False
    t = np.array([[float(at[p]) for p in parameters]])
    if largest is not None and all(p in largest for p in parameters):
        m = np.array([[float(largest[p]) for p in parameters]])
        if bool(np.all(t >= m)) and bool(np.any(t > m)):
            with np.errstate(all="ignore"):
                a, b = float(model.evaluate(m)[0]), float(model.evaluate(t)[0])
            return math.isfinite(a) and math.isfinite(b) and b > a
    with np.errstate(all="ignore"):
        a, b = float(model.evaluate(t)[0]), float(model.evaluate(t * RISE_STEP)[0])
    return math.isfinite(a) and math.isfinite(b) and b > a


def target_growth(model: Model, parameters: Sequence[str], at: Mapping[str, float],
                  largest: Mapping[str, float] | None = None) -> tuple[tuple[float, float], tuple[float, float] | None]:
    """(the growth to rank by, the falling dominant growth it replaces or None): `growth`, but for a
    model whose dominant term falls while its value rises up to the target (`rises_to_target`), whose
    fastest rising term's growth it takes (review 86 MED-3)."""
    g = growth(model)
    if g < (0.0, 0.0):
        up = rising_growth(model)
        if up is not None and rises_to_target(model, parameters, at, largest):
            return up, g
    return g, None
