"""The point to predict at: `NAME=VALUE,...` options (`--at ranks=1024,batch=256`) read and
checked, and the default target, the largest measured value of every parameter."""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

import numpy as np

from .dataset import LARGEST_VALUE, Dataset
from .errors import InputError
from .pointtext import param_text


def measured_maximum(dataset: Dataset) -> dict[str, float]:
    """The largest measured value of every parameter: the default target point."""
    return largest_point(dataset.series, dataset.parameters)


def largest_point(series: Iterable, parameters: Sequence[str]) -> dict[str, float]:
    """The largest value of every parameter among the points of `series`."""
    points = [s.points for s in series if getattr(s, "points", None) is not None and s.points.ndim == 2
              and s.points.shape[0] and s.points.shape[1] == len(parameters)]
    if not points:
        return {}
    top = np.max(np.vstack(points), axis=0)
    return {p: float(v) for p, v in zip(parameters, top)}


def parse_assignments(text: str | None, option: str, parameters: Sequence[str] | None = None,
                      held: Mapping[str, float] | None = None) -> dict[str, float]:
    """`ranks=1024,batch=256` -> {"ranks": 1024.0, "batch": 256.0}; errors name `option`. Values are
    parameter values, so positive (PMNF models use x^i and log2(x)); with `parameters`, names must be
    among them; `held`: the parameters a point filter left with one value (`Dataset.held`), which
    the error then names as such."""
    out: dict[str, float] = {}
    if text is None:
        return out
    if not text.strip():  # (review 78 LOW-5: `--at "$TARGET"`, TARGET unset, was the largest measured point)
        raise InputError(f"{option} {text!r}: empty (an unset shell variable?); leave {option} out for the largest "
                         f"measured values")
    for item in text.split(","):
        item = item.strip()
        if not item:  # `p=4,` or `,`: a value lost, not nothing asked for
            raise InputError(f"{option} {text!r}: an empty item (a comma too many, or an unset shell variable?); "
                             f"give NAME=VALUE,... (example: {option} ranks=1024,batch=256)")
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise InputError(f"{option}: {item!r} is not NAME=VALUE (example: {option} ranks=1024,batch=256)")
        if parameters is not None and name not in parameters:
            known = ", ".join(parameters) if parameters else "none"
            if held and name in held:  # (review 40 L4)
                raise InputError(f"{option}: {name} has one value ({param_text(held[name])}) in the points used (the runs' "
                                 f"constant, or what --where/--exclude left of it), so it is no parameter of the "
                                 f"models, which have: {known}; leave {name} out of {option}, or measure (or keep) "
                                 f"more of its values")
            raise InputError(f"{option}: unknown parameter {name!r}; the measurements have: {known}")
        if not _NUMBER.fullmatch(value):  # float() would take 1_000, '١٦' and 'nan' as well
            raise InputError(f"{option}: {name}={value!r} is not a number") from None
        v = float(value)
        if v <= 0:
            raise InputError(f"{option}: {name}={value}: values must be positive (PMNF models use x^i and log2(x))")
        if not v <= LARGEST_VALUE:
            raise InputError(f"{option}: {name}={value}: values above {LARGEST_VALUE:g} are too large to predict at "
                             "(their powers overflow); give the parameter in larger units")
        if name in out and out[name] != v:
            raise InputError(f"{option}: {name} is given twice ({name}={param_text(out[name])} and {name}={param_text(v)})")
        out[name] = v
    return out


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?inf(?:inity)?", re.IGNORECASE)


def parse_at(text: str | None, parameters: Sequence[str], defaults: Mapping[str, float],
             held: Mapping[str, float] | None = None) -> dict[str, float]:
    """The target point of `--at`; parameters not named take `defaults` (`held`: as for
    parse_assignments)."""
    at = {p: float(defaults[p]) for p in parameters if p in defaults}
    at.update(parse_assignments(text, "--at", parameters, held))
    missing = [p for p in parameters if p not in at]
    if missing:
        raise InputError(f"--at: no value for parameter(s) {', '.join(missing)} and no measurement to default to")
    return at
