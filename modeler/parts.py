"""Does a region's model agree with the models of its parts where it predicts?

At every measured point a call path's inclusive time is exactly its exclusive time plus its
children's inclusive times. Each of those series gets its own model, though, and beyond the
measured range they can part ways: a parent fitted with a steeper term than any of its children
may predict 2.5x what its parts add up to. Neither number can be trusted then, and the user
should know. `check_parts` compares, at the target point, every call path's `time` prediction
with the sum of its parts' predictions (its `exclusive_time` where that metric was modeled, plus
its direct children's `time`), and names the call paths where the whole is more than `RATIO`
times its parts, or its parts more than `BELOW` times the whole (impossible for inclusive time,
so the tighter bound), where the difference matters (over `SHARE` of the largest root). Without
an exclusive time only a whole below its children is reported: above them may be its own work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from .dataset import Dataset, Series

#: a whole above its parts by more than this factor is reported (only with an exclusive time)
RATIO = 1.5
#: a whole below its parts is impossible for inclusive time: reported from this factor on
BELOW = 1.2
#: ... when the larger of the two is at least this share of the largest root's prediction
SHARE = 0.01
SEPARATOR = "->"


@dataclass(frozen=True)
class PartsCheck:
    callpath: str
    whole: float  # the call path's own `time` prediction
    parts: float  # exclusive_time (if modeled) + the children's `time` predictions
    children: int
    with_exclusive: bool

    @property
    def ratio(self) -> float:
        return self.whole / self.parts

    def message(self, at: str) -> str:
        what = "its exclusive time and its children's models" if self.with_exclusive else "its children's models"
        return (
            f"{self.callpath}: its time model predicts {_num(self.whole)} at {at}, but {what} add up to "
            f"{_num(self.parts)} ({self.ratio:.2g}x): at least one of them extrapolates badly there; "
            f"compare their growth before trusting either"
        )


def parts_sums(predictions: Mapping[tuple[str, str], float]) -> dict[str, PartsCheck]:
    """Per call path that has children with a `time` prediction: its whole and its parts.

    `predictions` maps (call path, metric) to the prediction at the target point."""
    children: dict[str, list[float]] = {}
    for (cp, metric), v in predictions.items():
        if metric == "time" and SEPARATOR in cp:
            children.setdefault(cp.rsplit(SEPARATOR, 1)[0], []).append(v)
    out = {}
    for cp, kids in children.items():
        whole = predictions.get((cp, "time"))
        if whole is None:
            continue
        excl = predictions.get((cp, "exclusive_time"))
        parts = sum(kids) + (excl if excl is not None else 0.0)
        out[cp] = PartsCheck(cp, whole, parts, len(kids), excl is not None)
    return out


def check_parts(predictions: Mapping[tuple[str, str], float]) -> list[PartsCheck]:
    """The call paths whose `time` prediction and the sum of their parts' disagree (see the module)."""
    roots = [v for (cp, m), v in predictions.items() if m == "time" and SEPARATOR not in cp and math.isfinite(v)]
    scale = max(roots, default=0.0)
    out = []
    for c in parts_sums(predictions).values():
        if not (math.isfinite(c.whole) and math.isfinite(c.parts)) or c.whole <= 0 or c.parts <= 0:
            continue
        if max(c.whole, c.parts) < SHARE * scale:
            continue
        # without the exclusive time, a whole above its children is expected (its own work): only a
        # whole below them is a contradiction
        if c.ratio < 1.0 / BELOW or (c.with_exclusive and c.ratio > RATIO):
            out.append(c)
    return sorted(out, key=lambda c: -max(c.whole, c.parts))


def _num(v: float) -> str:
    return f"{v:.4g}"


def parts_series(data: Dataset, measured: Dataset | None, min_points: int = 3) -> list[Series]:
    """The `exclusive_time` series of `measured` that `data` (a selection of it) lacks, for the call
    paths whose `time` and some child's `time` are both in `data`: fitted for the check only."""
    if measured is None or tuple(measured.parameters) != tuple(data.parameters):
        return []
    times = {s.callpath for s in data.series if s.metric == "time"}
    parents = {cp.rsplit(SEPARATOR, 1)[0] for cp in times if SEPARATOR in cp} & times
    have = {(s.callpath, s.metric) for s in data.series}
    return [
        s for s in measured.series
        if s.metric == "exclusive_time" and s.callpath in parents and (s.callpath, s.metric) not in have
        and s.n_points >= min_points
    ]
