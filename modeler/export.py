"""Export a Dataset as Extra-P JSON Lines, filling nothing that was not measured.

Extra-P refuses a file where some (call path, metric) lacks a value at some point of the file, so
a series not measured at every point is left out, never padded; `ExportSummary` says which.
One line per (point, call path, metric): `{"params": {...}, "callpath": "a->b", "metric": "time",
"value": [repetitions]}`.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Sequence, TextIO

import numpy as np

from .dataset import RANKS_PARAMETER, Dataset
from .errors import InputError
from .listing import listing
from .replace_file import why_not_written, write_text
from .pointtext import param_text


@dataclass
class ExportSummary:
    target: str
    series: int = 0
    points: int = 0
    lines: int = 0
    left_out: list[str] = field(default_factory=list)
    #: the series left out because they lack exactly the points where one parameter has one value
    #: (communication at ranks=1): (parameter, value) -> series
    missing_where: dict[tuple[str, float], list[str]] = field(default_factory=dict)
    #: the reader of the stream written to went away before the end (`modeler export --extrap - |
    #: head`): how many lines it got is not known, and "wrote" would claim them all
    cut_off: bool = False
    #: series exported whose repetitions came from two or more passes, which the format cannot carry
    passes_dropped: int = 0

    def describe(self) -> str:
        what = f"{self.lines} lines ({self.series} series at {self.points} points)"
        if self.cut_off:
            return f"output cut off: the reader of {self.target} closed it before the end of the {what}"
        return f"wrote {what} to {self.target}"

    def notes(self) -> list[str]:
        notes = []
        for (p, v), items in self.missing_where.items():
            # a guess: at one rank the series could also be work that rank 0 leaves to the others
            # (review 92 LOW-3: compute regions of ranks 1..N-1 were called communication)
            why = (" (communication, which a single rank does not do, or work that rank 0 leaves to the other ranks)"
                   if p == RANKS_PARAMETER and v == 1 else "")
            notes.append(
                f"{len(items)} series left out of the export: not measured where {p}={param_text(v)}{why}, and Extra-P "
                f"refuses gaps. To hand them to Extra-P, export the other points on their own (--exclude "
                f"{p}={param_text(v)}), with --callpath to pick these series: {listing(items, 10)}")
        if self.left_out:
            shown = listing(self.left_out, 10)
            notes.append(f"{len(self.left_out)} series left out of the export: not measured at every point, "
                         f"and Extra-P refuses gaps: {shown}")
        if self.passes_dropped:  # review 121 MED-3: the fit of the export gave other ranges, unsaid
            notes.append(f"the repetition passes of {self.passes_dropped} series are not kept (Extra-P's format has "
                         "no place for them): a fit of this file has no refits with a pass left out, so its 80% "
                         "ranges can be narrower than those of a fit of the runs")
        return notes


def _missing_where(parameters: Sequence[str], points: Sequence[tuple[float, ...]],
                   have: set[tuple[float, ...]]) -> tuple[str, float] | None:
    """(p, v) when the points a series lacks are exactly those where parameter p is v."""
    missing = {pt for pt in points if pt not in have}
    for i, p in enumerate(parameters):
        values = {pt[i] for pt in missing}
        if len(values) == 1 and (v := values.pop()) is not None and missing == {pt for pt in points if pt[i] == v}:
            return p, v
    return None


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)


def extrap_lines(dataset: Dataset, summary: ExportSummary) -> list[str]:
    """The JSON Lines of every series measured at every point of the dataset."""
    points = sorted({tuple(map(float, pt)) for s in dataset.series for pt in s.points})
    summary.points = len(points)
    lines = []
    for s in dataset.series:
        have = {tuple(map(float, pt)) for pt in s.points}
        if len(have) < len(points):
            item = f"{s.callpath} [{s.metric}] ({len(have)} of {len(points)} points)"
            where = _missing_where(dataset.parameters, points, have)
            if where is None:
                summary.left_out.append(item)
            else:
                summary.missing_where.setdefault(where, []).append(item)
            continue
        if not s.callpath:
            summary.left_out.append(f"<empty call path> [{s.metric}]")
            continue
        summary.series += 1
        if s.passes is not None and len(np.unique(np.concatenate(s.passes))) > 1:
            summary.passes_dropped += 1
        for pt, reps in zip(s.points, s.repetitions):
            rec = {
                "params": {p: _number(v) for p, v in zip(dataset.parameters, pt)},
                "callpath": s.callpath,
                "metric": s.metric,
                "value": [float(v) for v in reps],
            }
            lines.append(json.dumps(rec, separators=(", ", ": "), allow_nan=False))
    summary.lines = len(lines)
    return lines


def write_extrap_jsonl(dataset: Dataset, out: str | os.PathLike[str] | TextIO) -> ExportSummary:
    """Write `dataset` to `out` (a path, '-' for stdout, or an open text file)."""
    if not dataset.parameters:
        raise InputError("export: no parameter varies over the measurements; Extra-P needs at least one")
    name = out if isinstance(out, (str, os.PathLike)) else getattr(out, "name", "<stream>")
    summary = ExportSummary(os.fspath(name) if isinstance(name, (str, os.PathLike)) else str(name))
    try:
        lines = extrap_lines(dataset, summary)
    except ValueError as exc:  # NaN or infinity in a measurement: JSON cannot carry it, Extra-P neither
        raise InputError(f"export: a value is not finite: {exc}") from exc
    if not lines:
        raise InputError("export: no series was measured at every point (Extra-P refuses gaps); nothing written")
    text = "\n".join(lines) + "\n"
    if isinstance(out, (str, os.PathLike)) and os.fspath(out) == "-":
        summary.target = "<stdout>"
        sys.stdout.write(text)
        sys.stdout.flush()
    elif isinstance(out, (str, os.PathLike)):
        try:
            write_text(out, text)  # folders made as `modeler report -o` does; whole or not at all
        except OSError as exc:
            raise InputError(f"--extrap {os.fspath(out)}: cannot write: {why_not_written(exc)}") from exc
    else:
        out.write(text)
    return summary
