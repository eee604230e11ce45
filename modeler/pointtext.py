"""Parameter values and points in text: exactly as measured, never rounded.

Every message, table and chart names a point as `p=v, q=w` with `point_text`, so that two different
values never read alike (review 71 F4: 1024 and 1025 both read `1.02e+03`; `:g` in messages turned
1048576 into `1.04858e+06`).
"""

from __future__ import annotations

import math
import numbers
from typing import Iterable, Mapping


def param_text(v: object) -> str:
    """A parameter value (a measured coordinate, a held value, an `--at` target) exactly as
    measured: an integer as the integer (1024, 16384), any other number as the shortest text that
    reads back as the same float (0.1, 2.5e-05)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, numbers.Integral):
        return str(int(v))
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return repr(f)
    if f.is_integer() and abs(f) < 1e16:
        return str(int(f))
    return repr(f)


def point_text(parameters: Iterable[str] | Mapping[str, object], values: Iterable[object] | None = None) -> str:
    """`p=v, q=w`: a mapping of parameter to value, or the parameters and their values apart."""
    pairs = parameters.items() if values is None else zip(parameters, values)  # type: ignore[union-attr]
    return ", ".join(f"{p}={param_text(v)}" for p, v in pairs)
