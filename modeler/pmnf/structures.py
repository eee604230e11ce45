"""How the terms kept for each parameter are combined into multi-parameter hypotheses.

A structure is a tuple of terms; a term is a tuple of positions in the list of kept
single-parameter terms (so `((0, 1), (0,))` is `a*b + a`). The lists and their order are Extra-P
4.2.5's (`MultiParameterModeler.create_model`), since ties go to the earliest.
"""

from __future__ import annotations

Structure = tuple[tuple[int, ...], ...]

_THREE: tuple[Structure, ...] = (
    ((0, 1, 2),),
    ((0,), (1,), (2,)),
    ((0, 1, 2), (0,)),
    ((0, 1, 2), (1,)),
    ((0, 1, 2), (2,)),
    ((0, 1, 2), (0, 1)),
    ((0, 1, 2), (1, 2)),
    ((0, 1, 2), (0, 2)),
    ((0, 1, 2), (0, 1), (2,)),
    ((0, 1, 2), (1, 2), (0,)),
    ((0, 1, 2), (0, 2), (1,)),
    ((0, 1, 2), (0,), (1,)),
    ((0, 1, 2), (0,), (2,)),
    ((0, 1, 2), (1,), (2,)),
    ((0, 1), (2,)),
    ((0, 1), (2,), (1,)),
    ((0, 1), (2,), (0,)),
    ((0, 2), (1,)),
    ((0, 2), (1,), (0,)),
    ((0, 2), (1,), (2,)),
    ((1, 2), (0,)),
    ((1, 2), (0,), (1,)),
    ((1, 2), (0,), (2,)),
)


def extrap_structures(k: int) -> tuple[Structure, ...]:
    """Extra-P's hypotheses for k kept terms: a*b, a+b, a*b+a, a*b+b for 2; 23 for 3; product and sum for 4+."""
    if k <= 0:
        return ((),)
    if k == 1:
        return (((0,),),)
    if k == 2:
        return (((0, 1),), ((0,), (1,)), ((0,), (0, 1)), ((1,), (0, 1)))
    if k == 3:
        return _THREE
    return ((tuple(range(k)),), tuple((i,) for i in range(k)))


def default_structures(k: int) -> tuple[Structure, ...]:
    """The default mode's hypotheses for k kept terms: Extra-P's, and for 2 also a + b + a*b. That is
    the inclusive time of a training loop (a step that grows with both parameters, an evaluation
    with one, data loading with the other), which none of Extra-P's four follows: its terms come
    back additive, and the loop's growth with both is lost (review 25: a training function -88% at
    4x its sweep; Extra-P's three-parameter list has the like of it). The default mode fits it
    only for a pair of parameters measured richly enough (`default_mode.rich_pairs`)."""
    if k == 2:
        return extrap_structures(2) + (((0,), (1,), (0, 1)),)
    return extrap_structures(k)


def n_factors(s: Structure) -> int:
    return sum(len(t) for t in s)
