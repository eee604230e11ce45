"""Readers for Extra-P's input formats: JSON Lines and the text format.

Both produce a `modeler.dataset.Dataset`. Unlike Extra-P, a (callpath, metric) missing at some
points is kept (modeled on the points it has); a malformed line is reported as `file:line: why`
in `Dataset.warnings` and skipped. Errors that leave nothing sensible to read (no parameters,
DATA lines without POINTS) raise `InputError` naming the file and line.
"""

from __future__ import annotations

import codecs
import difflib
import json
import math
import re
from pathlib import Path
from typing import Iterator

import numpy as np

try:  # several times faster on large files; the standard library does the same job without it
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is optional
    _loads = json.loads

from ..dataset import LARGEST_MEASURED, LARGEST_VALUE, Dataset, Series, parameter_name_problem
from ..errors import InputError
from ..listing import listing
from ..pointtext import param_text, point_text
from .skipped import SHOWN, Skipped

_TEXT_FIELDS = ("PARAMETER", "POINTS", "REGION", "METRIC", "DATA", "EXPERIMENT")
_DEFAULT_CALLPATH = "<root>"
_DEFAULT_METRIC = "<default>"


#: meaningful lines the sniffer reads past a first line that is damaged (cut off, a typo)
_SNIFF_LINES = 8


def sniff_extrap(path: str | Path) -> str | None:
    """"extrap-jsonl", "extrap-text" or None, from the first meaningful lines of the file: the
    first that is an Extra-P JSON object or starts with a text-format field decides, up to
    `_SNIFF_LINES` of them (review 118 MED-1: a first line cut off or with a typo made the whole
    file "not measurements", and in a folder it was dropped without a word: the reader now names
    that line and reads the others). A line that is JSON of another kind decides None."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:  # a BOM (Windows editors) is not content
            seen = 0
            for _, line in zip(range(200), f):
                s = line.strip()
                if not s or s.startswith("#"):
                    continue
                seen += 1
                if seen > _SNIFF_LINES:
                    return None
                if s.startswith("{"):
                    try:
                        obj = json.loads(s)
                    except ValueError:
                        continue  # damaged: the next line decides
                    if isinstance(obj, dict) and isinstance(obj.get("params"), dict) and "value" in obj:
                        return "extrap-jsonl"
                    return None
                if s.split(None, 1)[0] in _TEXT_FIELDS:
                    return "extrap-text"
    except (OSError, UnicodeError):
        return None
    return None


_NUMBER_TYPES = frozenset((int, float))  # exact types: a JSON true/false is not a measurement


def _finite_numbers(values: list) -> bool:
    return _NUMBER_TYPES.issuperset(map(type, values)) and all(map(math.isfinite, values))



#: how the metrics that cannot be below 0 are named (times, counts, byte amounts, and what is
#: derived from them), lower case: the name or its end
_NEVER_NEGATIVE = ("time", "visits", "calls", "bytes", "speedup", "efficiency", "cost", "imbalance", "memory", "rss")


def _never_negative(metric: str) -> bool:
    return metric.lower().endswith(_NEVER_NEGATIVE)


def _negative_warnings(path: Path, negative: list[tuple[int, str, float]]) -> list[str]:
    """`file:line: ...` for the first lines whose values of a metric that cannot be negative are
    (review 118 LOW-1: read without a word; the run files' reader skips such a record), then a count.
    The values are kept: Extra-P takes any number."""
    out = [f"{path}:{ln}: a value of metric {metric!r} is negative ({value:g}), which a time, count or amount "
           f"cannot be: kept as given; check how the file was made" for ln, metric, value in negative[:SHOWN]]
    if len(negative) > SHOWN:
        out.append(f"{path}: {len(negative) - SHOWN} more line(s) with negative values, up to line {negative[-1][0]}")
    return out


def _point_text(coord: tuple[float, ...]) -> str:
    return "(" + ", ".join(param_text(v) for v in coord) + ")"


def _named(parameters: list[str], coord: tuple[float, ...]) -> str:
    """A point as the options write it, `x=1` or `(p=4, n=8)` (review 78 LOW-6: `(1.0,)`)."""
    text = point_text(parameters, coord)
    return f"({text})" if len(coord) > 1 else text


def _to_dataset(
    path: Path,
    parameters: list[str],
    data: dict[tuple[str, str], dict[tuple[float, ...], list[float]]],
    warnings: list[str],
    declared: list[tuple[float, ...]] = (),
) -> Dataset:
    """`declared`: the points a text file's POINTS lines list; a series without DATA for some of
    them (a file cut off, say) is modeled on the points it has, and the warning names the others."""
    if not parameters:
        raise InputError(f"{path}: no parameters found")
    if not data:
        why = f"every measurement line was skipped ({len(warnings)})" if warnings else "no measurements found"
        raise InputError(f"{path}: {why}", warnings=warnings)
    ds = Dataset(tuple(parameters), [], warnings, [str(path)])
    all_points = set(declared) | {c for by_point in data.values() for c in by_point}
    for (callpath, metric), by_point in data.items():
        by_point = {c: v for c, v in by_point.items() if v}
        if not by_point:
            warnings.append(f"{path}: {callpath}/{metric} has no values; left out")
            continue
        missing = [c for c in (declared or sorted(all_points)) if c not in by_point]
        if missing:
            shown = listing([_point_text(c) for c in missing], SHOWN)
            warnings.append(
                f"{path}: {callpath}/{metric} has no value at {len(missing)} of {len(all_points)} points "
                f"({shown}); modeled on the points it has"
            )
        points = np.array(list(by_point), dtype=float).reshape(len(by_point), len(parameters))
        ds.add(Series(callpath, metric, points, tuple(np.array(v, dtype=float) for v in by_point.values())))
    return ds


def read_extrap_jsonl(path: str | Path) -> Dataset:
    """Extra-P JSON Lines: one object a line, `{"params": {...}, "callpath": "a->b", "metric": "m",
    "value": number or list of repetitions}`; lines with the same point add repetitions.

    The file's parameters are those of most of its lines (the first line's where as many lines
    have others): lines with other parameters are named and skipped (review 57 F4: one stray first
    line made the 25 lines after it skipped)."""
    path = Path(path)
    warnings: list[str] = []
    groups: dict[frozenset, _ParamGroup] = {}
    refused: dict[frozenset, tuple[str, list[int]]] = {}  # parameter sets with a name refused: why, lines
    negative: list[tuple[int, str, float]] = []  # (line, metric, value) where a time or count is negative
    skipped = Skipped()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    for ln, line in _text_lines(path, raw, warnings):
        if not line.strip():
            continue
        try:
            obj = _loads(line)
        except ValueError as exc:
            try:  # NaN or Infinity, which Python's json reads: refused below as not finite, its series named
                obj = json.loads(line)
            except ValueError:
                why = getattr(exc, "msg", None) or str(exc).split(":")[0]
                skipped.add(f"not valid JSON ({why})", ln)
                continue
        if not isinstance(obj, dict) or not isinstance(obj.get("params"), dict) or "value" not in obj:
            skipped.add("needs an object with \"params\" and \"value\"", ln, _series(obj))
            continue
        params = obj["params"]
        if not params:
            skipped.add("\"params\" is empty", ln, _series(obj))
            continue
        key = frozenset(params)
        group = groups.get(key)
        if group is None:  # names checked once a parameter set (review 60: per line, the reader took 1.4x)
            if key in refused:
                refused[key][1].append(ln)
                skipped.add(None, ln, _series(obj))
                continue
            why = next((w for w in map(parameter_name_problem, params) if w), None)
            if why:  # said once the file is read: five lines, then a count (review 78 LOW-2)
                refused[key] = (why, [ln])
                skipped.add(None, ln, _series(obj))
                continue
            group = groups[key] = _ParamGroup(list(params))
        group.lines.append(ln)
        coord = [params[p] for p in group.parameters]
        if not _finite_numbers(coord):
            skipped.add("parameter values must be finite numbers", ln, _series(obj))
            continue
        if max(map(abs, coord)) > LARGEST_VALUE:  # (review 57 F7: the whole command stopped, naming no file)
            skipped.add(f"parameter values above {LARGEST_VALUE:g} are too large to model (their powers overflow): "
                        "give them in larger units", ln, _series(obj))
            continue
        value = obj["value"]
        values = value if isinstance(value, list) else [value]
        if not values or not _finite_numbers(values):
            skipped.add("\"value\" must be a finite number or a list of them", ln, _series(obj))
            continue
        if max(map(abs, values)) > LARGEST_MEASURED:  # (review 57 F2)
            skipped.add(f"values above {LARGEST_MEASURED:g} are too large to model (their sums overflow)", ln,
                        _series(obj))
            continue
        key = _series(obj)
        if key is None:
            skipped.add("\"callpath\" and \"metric\" must be strings", ln)
            continue
        if min(values) < 0 and _never_negative(key[1]):
            negative.append((ln, key[1], min(values)))
        group.data.setdefault(key, {}).setdefault(tuple(map(float, coord)), []).extend(map(float, values))
    warnings.extend(skipped.line_warnings(path))
    warnings.extend(_negative_warnings(path, negative))
    for why, lines in refused.values():
        warnings.extend(f"{path}:{ln}: {why}; line skipped" for ln in lines[:SHOWN])
        if len(lines) > SHOWN:
            warnings.append(f"{path}: {len(lines) - SHOWN} more line(s) skipped for the same parameter name, up to "
                            f"line {lines[-1]}")
    if not groups and refused:  # (review 78 LOW-2: "no line has \"params\" with a name", where every line had)
        why, lines = max(refused.values(), key=lambda r: len(r[1]))
        n = sum(len(r[1]) for r in refused.values())
        said = (f"{why} (in all {n} lines that have parameters)" if n == len(lines) > 1 else
                f"{why} (in {len(lines)} line(s); the other {n - len(lines)} with parameters have other names refused)"
                if n > len(lines) else why)
        raise InputError(f"{path}: {said}", warnings=warnings)
    if not groups:
        raise InputError(f"{path}: no parameters found (no line has \"params\" with a name)", warnings=warnings)
    chosen = max(groups.values(), key=lambda g: len(g.lines))  # (the first of equals: max keeps it)
    for group in groups.values():
        if group is chosen:
            continue
        why = (f"parameters {sorted(group.parameters)} differ from the file's {sorted(chosen.parameters)} (those of "
               f"{len(chosen.lines)} of its lines)")
        warnings.extend(f"{path}:{ln}: {why}; line skipped" for ln in group.lines[:SHOWN])
        if len(group.lines) > SHOWN:
            warnings.append(f"{path}: {len(group.lines) - SHOWN} more line(s) whose {why}, up to line "
                            f"{group.lines[-1]}; skipped")
        skipped.add_series(group.data)
    if not chosen.data:
        n = len(chosen.lines)
        raise InputError(f"{path}: every measurement line was skipped ({n} line{'s' if n > 1 else ''} over "
                         f"{', '.join(chosen.parameters)})", warnings=warnings)
    warnings.extend(skipped.lost_warnings(path, chosen.data))
    return _to_dataset(path, chosen.parameters, chosen.data, warnings)


def _series(obj: object) -> tuple[str, str] | None:
    """(callpath, metric) of a line, where it names them as strings (their defaults where it names
    none or "", as in the text format: review 101 L6); None where one is not a string."""
    if not isinstance(obj, dict):
        return None
    callpath, metric = obj.get("callpath", _DEFAULT_CALLPATH), obj.get("metric", _DEFAULT_METRIC)
    if not isinstance(callpath, str) or not isinstance(metric, str):
        return None
    return callpath or _DEFAULT_CALLPATH, metric or _DEFAULT_METRIC


class _ParamGroup:
    """The lines of an Extra-P JSON Lines file that have one set of parameters."""

    __slots__ = ("parameters", "lines", "data")

    def __init__(self, parameters: list[str]) -> None:
        self.parameters = parameters
        self.lines: list[int] = []
        self.data: dict[tuple[str, str], dict[tuple[float, ...], list[float]]] = {}


_COORD = re.compile(r"\(([^()]*)\)")


def _text_lines(path: Path, data: bytes, warnings: list[str]) -> Iterator[tuple[int, str]]:
    """(line number, text) of the bytes of file `path`: a line that is not UTF-8 is said and
    skipped, not the whole file; a byte-order mark at the start is not content."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    if b"\r" in data and b"\n" not in data:
        data = data.replace(b"\r", b"\n")  # old Mac line endings (review 26: read as one line)
    try:
        yield from enumerate(data.decode("utf-8").split("\n"), 1)  # the common case, at C speed
        return
    except UnicodeDecodeError:
        pass
    for ln, raw in enumerate(data.split(b"\n"), 1):
        try:
            yield ln, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            warnings.append(f"{path}:{ln}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                            f"line skipped")


def _skipped_block(path: Path, lines: list[int], field: str, until: str) -> str:
    span = f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}"
    return (f"{path}:{lines[0]}: unknown field {field!r} (expected one of {', '.join(_TEXT_FIELDS)}): {span} "
            f"skipped, up to {until}; the other regions are read")


def read_extrap_text(path: str | Path) -> Dataset:
    """Extra-P text format: PARAMETER lines, POINTS lines, then REGION / METRIC blocks whose DATA
    lines give the repetitions at each point in order."""
    path = Path(path)
    warnings: list[str] = []
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    numbered = _text_lines(path, raw_bytes, warnings)
    parameters: list[str] = []
    # (line, how many values) of the last DATA line, and of the one before it in its block: a last
    # line without a line end and with fewer values may be cut off (review 101 M5)
    last_data: tuple[int, int] | None = None
    before_last: int | None = None
    last_line = 0
    points: list[tuple[float, ...]] = []
    data: dict[tuple[str, str], dict[tuple[float, ...], list[float]]] = {}
    callpath, metric = "", ""
    next_point = 0
    negative: list[tuple[int, str, float]] = []  # (line, metric, value) where a time or count is negative
    skipped: list[int] = []  # the lines of a block skipped from an unknown field on (see below)
    unknown = ""
    in_regions = False  # a REGION line was read
    metric_skipped = False  # a METRIC line among the skipped ones
    # (first skipped line, its field, the REGION line that ended the skip) until a METRIC line: the
    # skipped lines may have held the metric that region's DATA would otherwise inherit
    across: tuple[int, str, int] | None = None
    for ln, raw in numbered:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        last_line = ln
        where = f"{path}:{ln}"
        field, _, rest = line.partition(" ")
        if "\t" in field:  # fields separated by tabs
            field, _, more = field.partition("\t")
            rest = f"{more} {rest}"
        rest = " ".join(rest.split())
        if skipped and field != "REGION":
            skipped.append(ln)
            metric_skipped = metric_skipped or field == "METRIC"
            continue
        if skipped:
            warnings.append(_skipped_block(path, skipped, unknown, "the next REGION"))
            if metric_skipped or difflib.get_close_matches(unknown, _TEXT_FIELDS, 1) != ["REGION"]:
                across = (skipped[0], unknown, ln)
            skipped = []
        if field == "PARAMETER":
            if points:
                raise InputError(f"{where}: PARAMETER after POINTS")
            for name in rest.split():
                why = parameter_name_problem(name)
                if why:
                    raise InputError(f"{where}: {why}")
                if name in parameters:
                    raise InputError(f"{where}: parameter {name!r} given twice")
                parameters.append(name)
        elif field == "POINTS":
            if not parameters:
                raise InputError(f"{where}: POINTS before any PARAMETER")
            stray = _COORD.sub(" ", rest)
            if "(" in stray or ")" in stray:  # review 110 LOW-3: was "mixes ( v ) groups and bare values"
                raise InputError(f"{where}: POINTS has an unbalanced or nested parenthesis near "
                                 f"{stray.strip()[:20]!r}: write each point as ( v1 v2 ... )")
            groups = _COORD.findall(rest) if "(" in rest else rest.split() if len(parameters) == 1 else None
            if groups and "(" in rest and _COORD.sub(" ", rest).strip():  # (review 57 F7: dropped unsaid)
                raise InputError(f"{where}: POINTS mixes ( v ) groups and bare values "
                                 f"({_COORD.sub(' ', rest).split()[0]!r}): write every point the same way")
            if groups is None:
                raise InputError(f"{where}: points of {len(parameters)} parameters must be written as ( v1 v2 ... )")
            if not groups:
                raise InputError(f"{where}: POINTS lists no point")
            for g in groups:
                try:
                    coord = tuple(float(v) for v in g.split())
                except ValueError:
                    raise InputError(f"{where}: point {g!r} is not a list of numbers") from None
                if len(coord) != len(parameters):
                    raise InputError(
                        f"{where}: point ({g.strip()}) has {len(coord)} values for {len(parameters)} parameters"
                    )
                if not all(math.isfinite(v) for v in coord):
                    raise InputError(f"{where}: point ({g.strip()}) is not a list of finite numbers")
                if max(map(abs, coord)) > LARGEST_VALUE:
                    raise InputError(f"{where}: point ({g.strip()}): parameter values above {LARGEST_VALUE:g} are too "
                                     f"large to model (their powers overflow): give them in larger units")
                if coord in points:
                    # DATA lines follow POINTS in order: a point listed twice would merge two points' data
                    raise InputError(f"{where}: point ({g.strip()}) is listed twice")
                points.append(coord)
        elif field == "REGION":
            callpath, next_point, last_data, in_regions = rest, 0, None, True
        elif field == "METRIC":
            metric, next_point, last_data, across = rest, 0, None, None
        elif field == "DATA":
            if across is not None:  # (review 136 finding 2: `METRC bytes` put the next region's data under time)
                raise InputError(f"{path}:{across[0]}: unknown field {across[1]!r} (expected one of "
                                 f"{', '.join(_TEXT_FIELDS)}), and the REGION at line {across[2]} has no METRIC line "
                                 f"of its own: its metric would be taken from before that line")
            before_last = last_data[1] if last_data is not None else None
            last_data = (ln, len(rest.split()), rest.rsplit(None, 1)[-1] if rest else "")
            if not points:
                raise InputError(f"{where}: DATA before any POINTS")
            if next_point >= len(points):
                raise InputError(f"{where}: more DATA lines than the {len(points)} POINTS")
            point = points[next_point]
            next_point += 1
            try:
                values = [float(v) for v in rest.split()]
            except ValueError:
                warnings.append(f"{where}: DATA values are not all numbers; point {_named(parameters, point)} "
                                f"left out for {callpath}")
                continue
            finite = [v for v in values if abs(v) <= LARGEST_MEASURED]  # (nan is not)
            if not finite:
                warnings.append(f"{where}: DATA line without finite values; point {_named(parameters, point)} "
                                f"left out for {callpath}")
                continue
            if len(finite) < len(values):
                bad = listing(sorted({repr(v) for v in values if not abs(v) <= LARGEST_MEASURED}), 3)
                big = "" if all(not math.isfinite(v) for v in values if not abs(v) <= LARGEST_MEASURED) else \
                    f" or above {LARGEST_MEASURED:g}"
                warnings.append(f"{where}: {len(values) - len(finite)} of {len(values)} values are not finite{big} ({bad}); "
                                f"the other {len(finite)} kept at point {_named(parameters, point)} for {callpath}")
                values = finite
            if min(values) < 0 and _never_negative(metric):
                negative.append((ln, metric, min(values)))
            data.setdefault((callpath or _DEFAULT_CALLPATH, metric or _DEFAULT_METRIC), {}).setdefault(
                point, []
            ).extend(values)
        elif field == "EXPERIMENT":
            continue
        elif in_regions:
            # a typo (`REGON`, `METRC`) in a region's block: its lines up to the next REGION are
            # skipped, named, and the other regions read (review 133 LOW-3: the whole file was
            # refused). Not the line alone: the DATA after it would go to the region before
            skipped, unknown, metric_skipped = [ln], field, False
        else:  # before the regions: the parameters or points themselves are in doubt
            raise InputError(f"{where}: unknown field {field!r} (expected one of {', '.join(_TEXT_FIELDS)})")
    if skipped:
        warnings.append(_skipped_block(path, skipped, unknown, "the end of the file"))
    if last_data is not None and last_line == last_data[0] and not raw_bytes.endswith((b"\n", b"\r")):
        # (Extra-P's own files end without a line end: that alone says nothing)
        if before_last is not None and last_data[1] < before_last:
            warnings.append(f"{path}:{last_data[0]}: the last line may be cut off (no line end, {last_data[1]} "
                            f"value(s) where the DATA line before has {before_last}): its last value may be a cut number")
        elif last_data[2].endswith("."):  # (review 118 LOW-2: `0.0010891` cut to `0.` was read as 0)
            warnings.append(f"{path}:{last_data[0]}: the last line may be cut off (no line end, and its last value "
                            f"{last_data[2]!r} ends in a point): its last value may be a cut number")
    warnings.extend(_negative_warnings(path, negative))
    return _to_dataset(path, parameters, data, warnings, declared=points)
