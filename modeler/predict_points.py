"""The points a fitted model is asked to predict at, checked as measured parameter values are.

`PMNFModeler.predict`, `FittedModel.predict` and `FittedModel.prediction_range` take the same
forms and refuse the same values (review 103 MED-3: the per-model methods dropped a third
coordinate, gave NaN at a negative value or at 0 under a log, and raised TypeError on the mapping
of scalars the estimator takes).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .dataset import LARGEST_VALUE
from .errors import InputError
from .pointtext import param_text


def checked_points(points: Any, params: Sequence[str], models: Sequence[Any],
                   forms: Sequence[tuple[str, Any]] = ()) -> np.ndarray:
    """`points` as an (n, len(params)) array in the order of `params`, checked against `models`
    (FittedModels): given as an array or a flat sequence for one point, or as a mapping from
    parameter name to a value or equally many values. Values must be finite, not negative, at most
    `LARGEST_VALUE` (as `--at` takes them), and not 0 for a parameter that one of `models` has a
    log2 factor or a negative exponent of (log2(0) and 1/0 are not defined), nor one of `forms`
    ((what it is, a Model): the forms a prediction range draws on; review 106 LOW-1: the range was
    NaN at a 0 that the model itself takes). A form that is one of `models` (the chosen model is
    among its forms in play, and a pass model may equal it) is counted once, as that model (review
    109 F6: "the model of a [time] and 6 more" counted the model twice)."""
    params = tuple(params)
    pts = _from_mapping(points, params) if isinstance(points, Mapping) else _from_array(points, params)
    bad = ~np.isfinite(pts) | (pts < 0)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(f"predict: {params[j]}={param_text(pts[i, j])} at point {i}: values must be finite and not "
                         f"negative (PMNF models use x^i and log2(x))")
    big = pts > LARGEST_VALUE
    if big.any():  # (review 103 LOW-3: 1e300 gave inf and numpy's overflow warning)
        i, j = np.argwhere(big)[0]
        raise InputError(f"predict: {params[j]}={param_text(pts[i, j])} at point {i}: values above "
                         f"{LARGEST_VALUE:g} are too large to predict at (their powers overflow)")
    for j, name in enumerate(params):
        at_zero = np.flatnonzero(pts[:, j] == 0)
        if not at_zero.size:
            continue
        for what, test in ((f"log2({name})", _has_log), (f"{name}^(-1)", _has_negative_exponent)):
            having = [f"the model of {fm.callpath} [{fm.metric}]" for fm in models if test(fm.model, name)]
            having += [said for said, model in forms if test(model, name) and not _one_of(model, models)]
            if having:
                more = f" and {len(having) - 1} more" if len(having) > 1 else ""
                raise InputError(
                    f"predict: {name}=0 at point {int(at_zero[0])}: {what} is not defined at 0, and "
                    f"{having[0]}{more} has that factor"
                )
    return pts


def _from_mapping(points: Mapping[str, Any], params: tuple[str, ...]) -> np.ndarray:
    missing = [p for p in params if p not in points]
    if missing:
        raise InputError(f"predict: no values for parameter(s) {', '.join(missing)}")
    extra = [str(p) for p in points if p not in params]
    if extra:
        raise InputError(f"predict: unknown parameter(s) {', '.join(extra)}; the models have {', '.join(params)}")
    try:
        cols = [np.atleast_1d(np.asarray(points[p], dtype=float)) for p in params]
    except (TypeError, ValueError) as e:
        raise InputError(f"predict: parameter values must be numbers: {e}") from None
    sizes = {p: c.size for p, c in zip(params, cols)}
    # (no parameters: the one point of a fit without any, as `predict([[]])` gives it; review 106 LOW-4)
    if cols and (any(c.ndim != 1 for c in cols) or len(set(sizes.values())) != 1):
        shown = ", ".join(f"{p}: {n}" for p, n in sizes.items())
        raise InputError(f"predict: every parameter needs as many values (one list each); got {shown}")
    return np.stack(cols, axis=1) if cols else np.empty((1, 0))


def _from_array(points: Any, params: tuple[str, ...]) -> np.ndarray:
    try:
        pts = np.asarray(points, dtype=float)
    except (TypeError, ValueError) as e:  # (review 57 F5)
        raise InputError(f"predict: points must be numbers: {e}") from None
    if pts.ndim == 1:
        pts = pts.reshape(1, -1)
    if pts.ndim != 2:
        raise InputError(f"predict: points must be a 2-D array (n points, {len(params)} parameters), "
                         f"got shape {pts.shape}")
    if pts.shape[1] != len(params):
        raise InputError(
            f"predict: points have {pts.shape[1]} coordinates, the models have "
            f"{len(params)} parameters ({', '.join(params)})"
        )
    return pts


def _one_of(model: Any, models: Sequence[Any]) -> bool:
    """Whether `model` is the model of one of `models` (FittedModels): equal, or written alike (a
    form in play refitted to the same coefficients up to rounding)."""
    return any(model == fm.model or model.formula() == fm.model.formula() for fm in models)


def _has_log(model: Any, name: str) -> bool:
    return any(f.parameter == name and f.log_exponent for t in model.terms for f in t.factors)


def _has_negative_exponent(model: Any, name: str) -> bool:
    """A term falling as 1/ranks (`modeler.strong_scaling`) is not defined at 0 either."""
    return any(f.parameter == name and f.exponent < 0 for t in model.terms for f in t.factors)
