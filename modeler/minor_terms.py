"""A model's fastest term that carries little of its value where the ranking looks: the row is
ranked by the growth of the terms that carry it.

The ranking sorts by the dominant term's growth. A model of two growing terms can have a fast
term of a tiny coefficient, such as the contention of 4 ranks on 2 cores, about 1 ms over a loader
linear in the batch: `0.000469 + 0.0001563 * ranks^(3/2) + 0.000411 * batch` was ranked "deg 1.5",
above a region growing as the ranks that took more time at every target (review 123 LOW-5: 0.339 s
against 0.221 s at ranks=16, batch=512, where the ranks term carried 4.5% of the loader's value).

The share of such a term at the measured points does not tell it from a real one: this one carried
15% at ranks=4, batch=16, more than a real ranks^2 term of 3% at the largest point. What tells them
apart is the share where the growth matters: at the target (`judging_point`: each parameter it
takes beyond the measurements at least `MINOR_REACH` times their largest value; with the default
target, the largest point, every parameter). There a real
ranks^2 term of 3% at the largest point has grown to 11-33% of the value, a term that only keeps
pace with the rest to a few %. Where the fastest terms carry less than `MINOR_SHARE` of the value
there, and a slower growing term carries at least that much, the row is ranked by that slower
growth (`minor_growth`), shown as its own growth with a '?' and named in a warning; among the rows
of that growth it is placed by its value, as any other (review 130 MED-1: placed after them all, a
loader 11x the size of a linear region came below it). A
model with one growing term is never taken down to level here: that is for the data to settle
(`modeler.level_growth`). How often, and to what effect: `benchmarks/minor_term_rates.py`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from .growth import growth, growth_text
from .model import FittedModel, Model, first_of_each_key
from .pointtext import point_text

if TYPE_CHECKING:
    from .ranking import RankedModel

#: the least share of a model's value at the judging point (`judging_point`) that its fastest terms
#: must carry for their growth to rank it
MINOR_SHARE = 0.05
#: the judging point lies at least this many times the largest measured value of every parameter
#: (`selection.extrapolation_points`' farther point)
MINOR_REACH = 4.0


def judging_point(parameters: Sequence[str], at: Mapping[str, float],
                  largest: Mapping[str, float] | None) -> dict[str, float]:
    """The point where a term's share is judged: the target `at`, where the target lies beyond the
    measurements each parameter it takes beyond them at least `MINOR_REACH` times its largest measured
    value, and the others where the target puts them (the user looks there: a parameter left at its
    largest value is not raised, review 130 MED-2); where the target lies within the measurements (the
    default target, the largest point), every parameter at least `MINOR_REACH` times its largest value."""
    top = {p: float((largest or {}).get(p, 0.0)) for p in parameters}
    beyond = [p for p in parameters if float(at[p]) > top[p]]
    return {p: max(float(at[p]), MINOR_REACH * top[p]) if p in beyond or not beyond else float(at[p])
            for p in parameters}


def minor_growth(model: Model, parameters: Sequence[str], at: Mapping[str, float],
                 largest: Mapping[str, float] | None) -> tuple[float, float] | None:
    """The growth to rank `model` by where its fastest rising terms carry less than `MINOR_SHARE` of
    its value at the judging point (`judging_point`), together: that of the fastest slower rising term
    that carries at least that share; None where the fastest terms carry it, where no slower rising
    term does, or where the value there is not positive."""
    own = growth(model)
    if not own > (0.0, 0.0) or not parameters:
        return None
    point = judging_point(parameters, at, largest)
    columns = {p: np.array([point[p]]) for p in parameters}
    with np.errstate(all="ignore"):
        total = float(model.evaluate(columns)[0])
        carried: dict[tuple[float, float], float] = {}
        for t in model.terms:
            g = (float(sum(f.exponent for f in t.factors)), float(sum(f.log_exponent for f in t.factors)))
            if t.coefficient > 0 and g > (0.0, 0.0):
                carried[g] = carried.get(g, 0.0) + float(t.evaluate(columns)[0])
    if not (math.isfinite(total) and total > 0) or own not in carried:
        return None
    faster = 0.0  # the share of the terms faster than `g`, together (review 130 LOW-4: three of 4% each)
    for g in sorted(carried, reverse=True):
        if carried[g] >= MINOR_SHARE * total:
            return None if g == own else g
        faster += carried[g]
        if faster >= MINOR_SHARE * total:
            return None
    return None


def minor_growths(models: Iterable[FittedModel],
                  minor_of: Mapping[int, tuple[float, float] | None]) -> dict[tuple[str, str], tuple[float, float]]:
    """(call path, metric) -> the `minor_growth` of each of `models` that has one (`minor_of`: by the
    id of each fitted model), the first model of a key only: the growth the parts' rules take for it,
    as its row is ranked."""
    return {(fm.callpath, fm.metric): g for fm in first_of_each_key(models) if (g := minor_of.get(id(fm))) is not None}


def judging_text(parameters: Sequence[str], at: Mapping[str, float], largest: Mapping[str, float] | None) -> str:
    """The judging point (`judging_point`) as the warnings name it."""
    point = judging_point(parameters, at, largest)
    return point_text(parameters, [point[p] for p in parameters])


def minor_term_warning(rows: Sequence["RankedModel"], where: str) -> str | None:
    """One warning naming the rows ranked by a slower growth than their own (`RankedModel.minor_growth`),
    or None; `where`: the judging point (`judging_text`)."""
    named = [f"{r.fitted.callpath} ({r.fitted.metric}) {growth_text(r.growth)}, ranked {growth_text(r.minor_growth)}"
             for r in rows if r.ranked_minor()]
    if not named:
        return None
    n = len(named)
    return (f"{n} model{'s' if n > 1 else ''} whose fastest terms carry under {MINOR_SHARE:.0%} of the value at "
            f"{where} (the target; where it lies within the measurements, at least {MINOR_REACH:g}x the largest "
            f"measured values): {'; '.join(named[:5])}{f'; and {n - 5} more' if n > 5 else ''}. "
            f"{'They are' if n > 1 else 'It is'} ranked by the growth of the terms that carry the value, "
            f"the own growth shown with a '?'. A small term that grows faster (contention, a warm-up) may only be "
            f"the measurements' own: measure further along the parameter to see whether it takes over")
