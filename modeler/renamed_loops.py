"""Loops renamed by an edit: call paths that differ only in the `@<line>` of their loops' names.

Loops are named `<function>:for@<line>` (docs/instrument.md), so an edit above a loop renames it
and every call path under it. Runs made before and after such an edit (a resumed or extended
sweep) hold the same loop under two call paths, each measured at part of the points, and the copy
with few points may well rank as the worst-scaling. Two call paths of one shape whose points do
not overlap (or barely: fewer than half of the smaller set shared) are named in a warning; loops
measured together at most points are two loops of one function, and say nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import combinations
from typing import Sequence

from .dataset import Dataset
from .listing import listing

#: a loop's line in its region name: `train:for@65`, `<module>:while@3`
_LOOP_LINE = re.compile(r"(:(?:for|while)@)\d+(?=->|$)")


def renamed_loops_warnings(dataset: Dataset) -> list[str]:
    """One warning naming the loops that are probably one loop renamed between runs, or none."""
    points: dict[str, set[tuple[float, ...]]] = defaultdict(set)
    for s in dataset.series:
        if _LOOP_LINE.search(s.callpath):
            points[s.callpath].update(tuple(float(v) for v in pt) for pt in s.points)
    shapes: dict[str, list[str]] = defaultdict(list)
    for cp in points:
        shapes[_LOOP_LINE.sub(r"\1*", cp)].append(cp)
    # (the loops' names that differ, ...) -> the call paths under both, as (more points, fewer)
    renames: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] = defaultdict(list)
    for cps in shapes.values():
        for a, b in combinations(sorted(cps), 2):
            pa, pb = points[a], points[b]
            if 2 * len(pa & pb) >= min(len(pa), len(pb)):
                continue  # measured together: two loops of one function
            if len(pb) > len(pa):
                a, b = b, a
            diff = tuple((x, y) for x, y in zip(a.split("->"), b.split("->")) if x != y)
            renames[diff].append((a, b))
    if not renames:
        return []
    items = []
    for diff, pairs in sorted(renames.items(), key=lambda kv: -len(kv[1])):
        a, b = min(pairs, key=lambda p: (p[0].count("->"), p))  # the loop's own call path, the shortest
        names = "; ".join(f"{x} and {y}" for x, y in diff)
        items.append(f"{names} ({len(pairs)} call path(s) under both, e.g. {a} at {len(points[a])} point(s), "
                     f"{b} at {len(points[b])})")
    return [
        f"{len(renames)} loop(s) appear under two names that differ only in the loop's line, measured at "
        f"different points: {_list(items)}. They are probably one loop whose line changed between runs (code "
        f"edited above it: loops are named <function>:for@<line>), so each copy is modeled on part of the "
        f"points, and a copy with few points may rank as worst-scaling. Model runs of one version of the "
        f"code (re-run the runs made before the edit), or read the runs of each version apart. (Two "
        f"different loops of one function that run at different points, e.g. in branches on a "
        f"parameter, look the same: then nothing is wrong)"
    ]


def _list(items: Sequence[str]) -> str:
    return listing(items, 3, "more")
