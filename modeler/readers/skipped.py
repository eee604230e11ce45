"""Lines of an input file skipped as they are read: said a few a reason, then counted, and the
series none of whose lines was kept named (review 121 MED-1: a region whose every line was
refused was gone from the output, the warnings naming line numbers only, 32 of them uncapped)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..listing import listing

#: the lines named a reason, series named a file, missing points named a series: the rest are counted
SHOWN = 5


class Skipped:
    """The lines of one file skipped so far: by reason, and by the series they would have added to."""

    __slots__ = ("by_reason", "by_series")

    def __init__(self) -> None:
        self.by_reason: dict[str, list[int]] = {}
        self.by_series: dict[tuple[str, str], list[int]] = {}

    def add(self, why: str | None, line: int, series: tuple[str, str] | None = None) -> None:
        """Line `line` skipped for `why` (None: said elsewhere); `series`: (callpath, metric), where
        the line names them."""
        if why is not None:
            self.by_reason.setdefault(why, []).append(line)
        if series is not None:
            self.by_series.setdefault(series, []).append(line)

    def add_series(self, series: Iterable[tuple[str, str]]) -> None:
        """Series read from lines skipped as a whole group (over other parameters), said elsewhere."""
        for key in series:
            self.by_series.setdefault(key, [])

    def line_warnings(self, path: Path) -> list[str]:
        """`path:line: why; line skipped` for the first few lines of each reason, then one line
        with how many more and up to which."""
        out: list[str] = []
        for why, lines in self.by_reason.items():
            out.extend(f"{path}:{ln}: {why}; line skipped" for ln in lines[:SHOWN])
            if len(lines) > SHOWN:
                out.append(f"{path}: {len(lines) - SHOWN} more line(s) skipped for the same reason ({why}), "
                           f"up to line {lines[-1]}")
        return out

    def lost_warnings(self, path: Path, kept: Iterable[tuple[str, str]]) -> list[str]:
        """One line naming the series (callpath/metric) none of whose lines was kept."""
        out: list[str] = []
        kept = set(kept)
        lost = [f"{callpath}/{metric} ({_lines(lines)})" for (callpath, metric), lines in self.by_series.items()
                if (callpath, metric) not in kept]
        if lost:
            out.append(f"{path}: {len(lost)} series with every line skipped, not modeled: "
                       f"{listing(lost, SHOWN, 'more series')}")
        return out


def _lines(lines: list[int]) -> str:
    if not lines:
        return "over other parameters"
    return f"line {lines[0]}" if len(lines) == 1 else f"{len(lines)} lines from line {lines[0]}"
