"""`--where` and `--exclude`: which measured points the commands use (`modeler fit`, `report`, `export`).

`--where 'batch>=32'` keeps the points where the condition holds, `--exclude ranks=1` leaves out
those where it holds; both are repeatable (every `--where` must hold, no `--exclude` may). A
condition is `NAME OP VALUE` with OP one of `= == != < <= > >=`; `=` and `!=` take several values
(`--where batch=16,32`) and compare numbers as numbers (4 = 4.0), other values as text
(`--where model=cnn` picks the runs of one value of a parameter that is not a number).

Our runs are selected before they are combined, as `--experiment` selects them: a run left out is
not there at all (speedup is taken against the fewest ranks left; a parameter left with one value
is a constant of the experiment). Extra-P inputs, which hold no runs, lose the points themselves,
and a parameter the filter leaves with one value is dropped from them likewise.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .dataset import Dataset, Series
from .errors import InputError
from .pointtext import param_text

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le, ">=": operator.ge, "!=": operator.ne, "==": operator.eq, "=": operator.eq,
    "<": operator.lt, ">": operator.gt,
}
_CONDITION = re.compile(r"\s*([^\s<>=!,]+)\s*(<=|>=|!=|==|=|<|>)\s*(.*?)\s*")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HOW = ("NAME OP VALUE, OP one of = == != < <= > >= (quote it, so that the shell leaves < and > alone: "
        "--where 'batch>=32'; = and != take several values: --exclude batch=48,96)")


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    return None


@dataclass(frozen=True)
class Condition:
    option: str  # "--where" or "--exclude"
    text: str  # as given
    parameter: str
    op: str
    values: tuple[float | str, ...]

    def holds(self, value: Any) -> bool:
        """Whether the condition holds for a point whose parameter has `value`."""
        if self.op in ("=", "==", "!="):
            num = _number(value)
            same = any(num == v if isinstance(v, float) and num is not None else str(value) == str(v)
                       for v in self.values)
            return same if self.op != "!=" else not same
        num = _number(value)
        if num is None:
            raise InputError(f"{self}: {self.parameter} is {value!r} somewhere, not a number; "
                             f"compare it with = or !=")
        return _OPS[self.op](num, self.values[0])

    def __str__(self) -> str:
        return f"{self.option} {_quoted(self.text)}"


def parse_condition(text: str, option: str) -> Condition:
    m = _CONDITION.fullmatch(text)
    if not m or not m.group(3):
        raise InputError(f"{option}: {text!r} is not {_HOW}")
    name, op, rest = m.groups()
    items = [v.strip() for v in rest.split(",")] if op in ("=", "==", "!=") else [rest]
    if any(not v for v in items):
        raise InputError(f"{option}: {text!r} has an empty value")
    if (bad := next((v for v in items if v[0] in "<>=!"), None)) is not None:
        # `batch=>16`: a typo of an operator, not the text value '>16'
        guess = {"=>": ">=", "=<": "<=", "=!": "!="}.get(op + bad[0], "")
        hint = f"; did you mean {name}{guess}{bad[1:].lstrip('<>=!')}?" if guess else ""
        raise InputError(f"{option}: {text!r}: {bad!r} after {op!r} is not a value (the operator is one of "
                         f"= == != < <= > >=){hint}")
    values = tuple(float(v) if _NUMBER.fullmatch(v) else v for v in items)
    if op not in ("=", "==", "!=") and not isinstance(values[0], float):
        raise InputError(f"{option}: {text!r}: {op} needs a number, got {rest!r}")
    return Condition(option, text.strip(), name, op, values)


@dataclass(frozen=True)
class PointFilter:
    """Every `where` condition must hold and no `exclude` condition may."""

    where: tuple[Condition, ...] = ()
    exclude: tuple[Condition, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.where or self.exclude)

    @property
    def conditions(self) -> tuple[Condition, ...]:
        return self.where + self.exclude

    def keeps(self, values: Mapping[str, Any]) -> bool:
        """Whether a point with these parameter values is used; a parameter it lacks fails `--where`
        and is not excluded."""
        if any(c.parameter not in values or not c.holds(values[c.parameter]) for c in self.where):
            return False
        return not any(c.parameter in values and c.holds(values[c.parameter]) for c in self.exclude)

    def unmatched(self, points: Iterable[Mapping[str, Any]]) -> tuple[Condition, ...]:
        """The `--exclude` conditions that hold at none of `points`, each to be warned about with
        `excluded_nothing` (review 26: `--exclude n=7`, a slip for 8, excluded nothing without a word)."""
        points = list(points)
        return tuple(c for c in self.exclude if not any(c.parameter in p and c.holds(p[c.parameter]) for p in points))

    def check_names(self, known: Iterable[str], what: str) -> None:
        """An `InputError` naming the option and the parameters there are, for a parameter not among
        `known`."""
        known = sorted(set(known))
        for c in self.conditions:
            if c.parameter not in known:
                raise InputError(f"{c}: unknown parameter {c.parameter!r}; {what} have: {', '.join(known) or 'none'}")

    def __str__(self) -> str:
        return " ".join(f"{c.option} {_quoted(c.text)}" for c in self.conditions)


#: what the warning of an `--exclude` that matched no run says it matched none of
OF_RUNS = "the runs"


def excluded_nothing(condition: Condition, what: str) -> str:
    return f"{condition.option} {_quoted(condition.text)} matches none of {what}: nothing was excluded by it"


def _quoted(text: str) -> str:
    return f"'{text}'" if any(ch in text for ch in "<>! ") else text


def parse_point_filter(where: Sequence[str] | None = None, exclude: Sequence[str] | None = None) -> PointFilter:
    """The filter of the repeatable `--where` and `--exclude` options."""
    return PointFilter(tuple(parse_condition(t, "--where") for t in where or ()),
                       tuple(parse_condition(t, "--exclude") for t in exclude or ()))


def nothing_left(points: PointFilter, values: Mapping[str, Iterable[Any]], what: str) -> InputError:
    """The error when no point is left: what the parameters the filter names have."""
    have = "; ".join(f"{p} = {', '.join(_text(v) for v in _sorted(values[p]))}"
                     for p in dict.fromkeys(c.parameter for c in points.conditions) if p in values)
    return InputError(f"{points}: no {what} is left; {have}")


def _sorted(vals: Iterable[Any]) -> list[Any]:
    vals = set(vals)
    return sorted(vals, key=lambda v: (_number(v) is None, _number(v) or 0.0, str(v)))


def _text(v: Any) -> str:
    num = _number(v)
    return param_text(num) if num is not None else str(v)


def filter_dataset(dataset: Dataset, points: PointFilter, source: str) -> tuple[Dataset, set[str]]:
    """The points of `dataset` (an Extra-P input, `source`) that `points` keeps, and the parameters
    that had several values before and one after (to be dropped once the inputs are merged)."""
    points.check_names(dataset.parameters, f"the parameters of {source}")
    series: list[Series] = []
    for s in dataset.series:
        keep = np.array([points.keeps(dict(zip(dataset.parameters, map(float, pt)))) for pt in s.points], dtype=bool)
        if keep.any():
            series.append(s.take(keep))
    before, after = _values(dataset.series, dataset.parameters), _values(series, dataset.parameters)
    narrowed = {p for p in dataset.parameters if len(before[p]) > 1 and len(after[p]) == 1}
    return Dataset(dataset.parameters, series, list(dataset.warnings), list(dataset.sources)), narrowed


def point_values(dataset: Dataset) -> set[tuple[tuple[str, float], ...]]:
    """The points of `dataset` as (parameter, value) tuples (for `PointFilter.unmatched`)."""
    return {tuple(zip(dataset.parameters, map(float, pt))) for s in dataset.series for pt in s.points}


def _values(series: Sequence[Series], parameters: Sequence[str]) -> dict[str, set[float]]:
    return {p: {float(v) for s in series for v in s.points[:, i]} for i, p in enumerate(parameters)}


def drop_single_valued(dataset: Dataset, names: Iterable[str]) -> Dataset:
    """`dataset` without the parameters among `names` that have one value at every point."""
    values = _values(dataset.series, dataset.parameters)
    drop = [p for p in dataset.parameters if p in set(names) and len(values[p]) == 1]
    if not drop:
        return dataset
    keep = [i for i, p in enumerate(dataset.parameters) if p not in drop]
    series = [Series(s.callpath, s.metric, s.points[:, keep], s.repetitions, s.unit, s.passes) for s in dataset.series]
    held = {**dataset.held, **{p: next(iter(values[p])) for p in drop}}
    return Dataset(tuple(dataset.parameters[i] for i in keep), series, list(dataset.warnings), list(dataset.sources),
                   dataset.run_shares, held)


def values_of(dataset: Dataset) -> dict[str, list[float]]:
    """Every parameter's measured values (for `nothing_left`)."""
    return {p: sorted(v) for p, v in _values(dataset.series, dataset.parameters).items()}
