"""Which combinations of the measured parameter values were measured: a sweep point that is
missing altogether (a configuration that failed in every repetition, or was never run) is named,
since each series is modeled on the points it has and nothing else would say so."""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from .dataset import RANKS_PARAMETER
from .listing import listing
from .pmnf.points import distinct_values, extrap_lines
from .pointtext import point_text

#: the points are taken for a sweep with holes when they cover at least this share of the grid
GRID_SHARE = 0.5


def grid_gaps_warning(parameters: Sequence[str], points: Sequence[np.ndarray]) -> str | None:
    """A warning naming the combinations of the measured values of `parameters` that no series
    was measured at, or None when the points (each an (n, len(parameters)) array) fill the grid or
    cover less than `GRID_SHARE` of it."""
    if len(parameters) < 2 or not points:
        return None
    measured = _rows(_union(parameters, points))
    values = [sorted({pt[j] for pt in measured}) for j in range(len(parameters))]
    size = int(np.prod([len(v) for v in values]))
    # a design that measures much less than the grid on purpose is not a sweep with holes, nor
    # Extra-P's lines through one point (a 3 x 3 cross measures 5 of 9)
    if len(measured) >= size or len(measured) < GRID_SHARE * size or _lines_through_one_point(measured):
        return None
    missing = [point_text(parameters, combo)
               for combo in itertools.product(*values) if combo not in measured]
    shape = " x ".join(f"{p} ({len(v)} values)" for p, v in zip(parameters, values))
    return (f"the measurements are not a full grid: {len(measured)} of the {size} combinations of {shape}; "
            f"not measured: {listing(['(' + m + ')' for m in missing], 5)}")


def _union(parameters: Sequence[str], points: Sequence[np.ndarray]) -> np.ndarray:
    """The points of every series, one (n, len(parameters)) array."""
    return np.concatenate([np.asarray(p, dtype=float).reshape(-1, len(parameters)) for p in points])


def _rows(points: np.ndarray) -> set[tuple[float, ...]]:
    """The distinct points; values that print alike are one value (0.3 and 0.30000000000000004 from
    two inputs)."""
    return {tuple(float(f"{v:.12g}") for v in row) for row in points}


def followers(points: np.ndarray, parameters: Sequence[str], ranks: str = RANKS_PARAMETER) -> dict[int, int]:
    """The parameters (positions) whose values go together with another's at every one of `points`
    (n, len(parameters)): each value of one with a single value of the other, and the other way
    round (`ranks` = `nodes` x 4, a global batch of 32 x ranks), at 2 or more values. Each maps to
    the one it follows: the earlier in `parameters`, or the rank count `ranks`
    (`Dataset.ranks_parameter`), which speedup and strong scaling are about (review 109 F1: a rank
    count named `p` by `--ranks-parameter` followed `n`, and lost its plateau form). Their effects
    cannot be told apart; the engine fits the one followed alone, which follows none (review 112
    LOW-2: with `a`, `b`, `p` together and `p` the rank count, `b` followed `a`, which followed `p`,
    and the warning said the models follow `a`, held)."""
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] < 2:
        return {}
    rows = _rows(pts)
    out: dict[int, int] = {}
    for i, j in itertools.combinations(range(pts.shape[1]), 2):
        if i in out or j in out:
            continue
        pairs = {(row[i], row[j]) for row in rows}
        first, second = {a for a, _ in pairs}, {b for _, b in pairs}
        if len(first) >= 2 and len(pairs) == len(first) == len(second):
            if parameters[j] == ranks:
                out[i] = j
            else:
                out[j] = i
    # a chain is one step (b follows a, which then follows the rank count, which follows none): each
    # maps to the one it ends at
    return {j: out.get(i, i) for j, i in out.items()}


def moving_together_warning(parameters: Sequence[str], points: Sequence[np.ndarray], compat: str | None = None,
                            ranks: str = RANKS_PARAMETER) -> str | None:
    """A warning naming the parameters whose values go together at every point measured
    (`followers`, with `ranks` the rank count), or None (review 59 F8: p = n at every point got a
    doubtful constant and no word why). Under `compat` (Extra-P's rules) the models do not follow
    one of them alone."""
    if len(parameters) < 2 or not points:
        return None
    follow = followers(_union(parameters, points), parameters, ranks)
    if not follow:
        return None
    pairs = ", ".join(f"{parameters[j]} with {parameters[i]}" for j, i in sorted(follow.items()))
    models = ("" if compat is not None else
              f"the models follow {listing(sorted({parameters[i] for i in follow.values()}), 5)} alone, and "
              f"predict well only where the others keep moving with them; ")
    return (f"parameters move together: {pairs}: at every point measured each value of one comes with one "
            f"value of the other, so their effects cannot be told apart; {models}measure points where one "
            f"changes and the other does not")


def scattered_warning(parameters: Sequence[str], points: Sequence[np.ndarray], ranks: str = RANKS_PARAMETER
                      ) -> str | None:
    """A warning naming the parameters of 3 or more values that no line of 3 or more points varies
    alone (the others held), or None: a scattered design, a Latin hypercube. The engine ranks their
    terms on all points (`pmnf.points.marginal_line`), where the other parameters blur them (review
    61 F1: such a parameter got no term at all, and exact data came back as a constant). `ranks`:
    the rank count, which the engine keeps where another moves with it (`followers`)."""
    if len(parameters) < 2 or not points:
        return None
    union = _union(parameters, points)
    follow = followers(union, parameters, ranks)
    union[:, list(follow)] = union[0, list(follow)]  # held, as the engine holds them
    distinct = np.array(sorted(_rows(union)))
    # the engine's own test: the lines Extra-P's rule would fit each parameter on (`extrap_lines`)
    named = [name for name, line, values in zip(parameters, extrap_lines(distinct), distinct_values(distinct))
             if line.x.size < 3 <= values]
    if not named:
        return None
    return (f"no line of 3 or more points varies {listing(named, 5)} alone (the other parameters held): "
            f"{'its' if len(named) == 1 else 'their'} terms "
            f"were chosen on all points, where the other parameters' effects blur them, so the models of this "
            f"design are rough; measure a grid, or lines of 5 values through one point (a cross)")


def unchecked_products_warning(parameters: Sequence[str], models: Sequence, points: Sequence[np.ndarray]
                               ) -> str | None:
    """A warning naming the models that multiply two parameters whose measured values lie on lines
    through one point (a cross: no point varies both from where the lines meet), or None. There a
    product and a sum fit alike (`a*b + a` has the coefficients of `a + b` and follows both lines as
    well), so which one a model has is not measured, and the two part ways where both parameters
    grow (review 61 F5: a sum came back as a product in 1 to 3 of 30 seeds; a true product comes
    back as one, as it should, and is just as unchecked). `models`: FittedModels, `points` their
    series' points."""
    named = []
    crosses: dict[tuple[bytes, int, int], bool] = {}  # a sweep's call paths share their points

    def cross(pts: np.ndarray, a: int, b: int) -> bool:
        pair = np.ascontiguousarray(np.asarray(pts, dtype=float)[:, [a, b]])
        key = (pair.tobytes(), a, b)
        if key not in crosses:
            crosses[key] = _lines_through_one_point(_rows(pair))
        return crosses[key]

    for fm, pts in zip(models, points):
        pairs = {pair for term in fm.model.terms
                 for pair in itertools.combinations(sorted({parameters.index(f.parameter) for f in term.factors}), 2)}
        unchecked = [(a, b) for a, b in sorted(pairs) if cross(pts, a, b)]
        if unchecked:
            product = ", ".join(f"{parameters[a]}·{parameters[b]}" for a, b in unchecked)
            named.append(f"{fm.callpath} ({fm.metric}): {product}")
    if not named:
        return None
    n = len(named)
    return (f"{n} model{'s' if n > 1 else ''} multipl{'y' if n > 1 else 'ies'} parameters that no point measured "
            f"varies together (lines through one point, a cross): {listing(named, 5)}; a sum fits such lines "
            f"as well, so the product is not measured, and predictions where both grow are rough: measure a "
            f"few points off the lines (the corners of their grid)")


def _lines_through_one_point(measured: set[tuple[float, ...]]) -> bool:
    """Whether every point differs from one of them in at most one coordinate."""
    if len(measured) > 2_000:
        return False
    pts = np.array(sorted(measured))
    differ = (pts[:, None, :] != pts[None, :, :]).sum(-1)  # (n, n): coordinates in which two points differ
    return bool((differ <= 1).all(axis=1).any())
