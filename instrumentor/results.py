"""What instrumenting one file gave: the rewritten code with its regions, or why there is none."""

from __future__ import annotations

from dataclasses import dataclass, field

from .regions import Region


@dataclass
class Skip:
    name: str
    line: int
    reason: str


@dataclass
class FileResult:
    """What became of one file. status: instrumented | unchanged | already | failed."""

    relpath: str
    status: str
    code: str | None = None
    regions: list[Region] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    linemap: list[int] | None = None
    error: str | None = None
    columns: dict[str, list[list[int]]] | None = None  # see positions.column_points
    transient: bool = False  # failed for want of this process's resources (recursion, memory): may work next time
    warnings: list[str] = field(default_factory=list)  # "relpath:line: why" (facts.loop_warnings)
