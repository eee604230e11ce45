"""Does a region's model agree with the models of its parts where it predicts?

At every measured point a call path's inclusive time is exactly its exclusive time plus its
children's inclusive times. Each of those series gets its own model, though, and beyond the
measured range they can part ways: a parent fitted with a steeper term than any of its children
may predict 2.5x what its parts add up to. Neither number can be trusted then, and the user
should know. `check_parts` compares, at the target point, every call path's `time` prediction
with the sum of its parts' predictions, and names the call paths where the whole is more than
`RATIO` times its parts, or its parts more than `BELOW` times the whole (impossible for inclusive
time, so the tighter bound), where the difference matters (over `SHARE` of the largest root).
Without an exclusive time only a whole below its children is reported: above them may be its own
work. The ranking's doubtful mark, its blame on a part and its shares, and the report's caveat
on the run time follow the same rule (`parts_growth.contradiction`; review 45).

The parts are summed from the bottom (`parts_sums`): a call path's `exclusive_time` (where that
metric was modeled) plus each child's parts, down to the leaves, whose `time` counts; a child
without an exclusive time model counts with its `time`. One level would not do: the whole's
values are the sum of its parts' values, and where one part's growth is small against the
others' noise at the measured points, a model of the whole holds it constant, and so does a model
of every caller on the way down (review 25: the run, the training function and its epoch loop
were all fitted without the batch x width term of the training step below them; each agreed with
its children's models, and the run was predicted at 1.21 s where it took 8.6 s; its parts, each
fitted on its own, added up to 6.3 s).

A whole's time at the target (`PartsCheck.time_figure`) is its parts' sum where its model is more
than `BELOW` below it and clearly so (the low ends of the parts' 80% ranges above the high end of
the whole's), or where its heavy parts also outgrow it (`PartsCheck.outgrown`: the ranking finds
those from a first pass of `parts_growth.parts_growths`, then makes the sums again with them; review 80).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Collection, Mapping

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
    parts: float  # exclusive_time (if modeled) + the children's parts, from the bottom (`parts_sums`)
    children: int
    with_exclusive: bool
    #: the sum reaches below the children (some child counts with its own parts, not its `time`)
    deep: bool = False
    #: the sum of the low ends of the parts' 80% ranges, and the high end of the whole's (None
    #: where some range is not known: `--compat extrap`)
    parts_low: float | None = None
    whole_high: float | None = None
    #: how values were combined over ranks and repetitions (`combination`): a whole equals its parts
    #: for `mean` (sums and means), is at most their sum for `max` (its parts' largest ranks or
    #: repetitions may be different ones: a straggler's compute and the others' wait for it, review
    #: 27), at least for `min`, and neither is known for `none` (a max over one, a min over the other)
    combine: str = "mean"
    #: the largest figure among its children (`time_figure`) that is clearly above this whole (the
    #: low end of its range above the high end of the whole's): a region's time holds its children's
    floor: float = 0.0
    #: the low end of the range of its figure: `parts_low` where its parts replace its model, else
    #: the low end of the whole's own range (None where not known)
    whole_low: float | None = None
    #: its model grows slower than parts that carry at least half its time at the target, even at
    #: the low ends of their 80% ranges (`parts_growth.outgrown_wholes`): a second sign, besides its
    #: parts' sum above it, that the model misses a part's growth; with that sum more than `BELOW`
    #: above the model, the sum replaces the model whatever the ranges (`below_parts`; review 80)
    outgrown: bool = False
    #: the sum of the high ends of the parts' 80% ranges, as `parts_low` of the low ends (None where
    #: some range is not known)
    parts_high: float | None = None

    @property
    def figure_low(self) -> float | None:
        return self.parts_low if self.below_parts() else self.whole_low

    @property
    def ratio(self) -> float:
        return self.whole / self.parts

    def contradicts(self) -> bool:
        """Whole and parts disagree (`RATIO`, `BELOW`; a whole above its children only where its
        exclusive time is known: else that may be its own work; under `--ranks max` a whole below its
        parts, under `min` one above them, is no contradiction)."""
        if not (math.isfinite(self.whole) and math.isfinite(self.parts)) or self.parts <= 0:
            return False
        if self.whole <= 0:  # a time below zero under parts above it (review 43: no warning was given)
            return self.combine in ("mean", "min")
        return disagrees(self.ratio, RATIO if self.with_exclusive else None, BELOW, self.combine)

    def below_parts(self) -> bool:
        """The whole is predicted below its parts by more than `BELOW`, which an inclusive time
        cannot be (whatever parts were not modeled: they would only add to them), and clearly so:
        the low ends of the parts' 80% ranges add up to more than the high end of the whole's, so
        that one far-extrapolated part with a wide range does not decide it (review 27: `main`'s
        own 2% of the run, with a range of 0.25 to 560 s, made a 79 s run 4.9 min); or its model
        grows slower than parts that carry most of its time even at their ranges' low ends
        (`outgrown`): two signs that it misses a part's growth, which noisy runs, widening every
        range, leave standing (review 80: a run's model of 3.13 s, range 2.48 to 7.82 s, under
        parts of 7.75 s whose low ends added up to 2.8 s; 8.83 s was measured)."""
        if not (self.contradicts() and self.ratio < 1.0 / BELOW):
            return False
        if self.outgrown:
            return True
        return self.parts_low is None or self.whole_high is None or self.parts_low > self.whole_high

    def time_figure(self) -> float:
        """The call path's time at the target for the shares and the run's time: its parts' sum
        where the whole is clearly below it (`below_parts`), else the whole's prediction; never
        below the figure of one of its children (review 29: the run, kept at its model's 7.22 s, came
        out below its training function's parts, 8.29 s)."""
        # a whole at or below zero is no time at all: its parts stand for it, whatever their ranges
        # (review 43: -23 s lifted to a floor of 0 was the report's run time, and its divisor)
        below_zero = self.whole <= 0 < self.parts and math.isfinite(self.parts)
        base = float(self.parts) if self.below_parts() or below_zero else float(self.whole)
        return max(base, self.floor) if math.isfinite(base) else base

    def range_span(self, faster_than_parts: bool = False, unsettled: bool = False) -> tuple[float, float] | None:
        """(low, high): the span of its parts that the whole's 80% range is to hold where they are
        credible, or None (review 123 MED-1: `c + a*n + b*n^2`, fitted with one term between n and
        n^2, was 6% below its parts' sum at 2x, the sum right, and the range held neither the sum nor
        the truth). A whole equals its parts, so the range holds them and, on their side of the
        model, is bounded by them (`ranking._holding`):

        - above its model: its time figure where that is not its model's prediction (`time_figure`:
          its parts' sum where clearly above it, a child's figure clearly above it), or its parts'
          sum above it by less than `BELOW`, with the same evidence: the low ends of the parts' 80%
          ranges above the high end of the whole's, or its model outgrown by its heavy parts
          (`outgrown`); from the sum of the low ends of the parts' ranges (`parts_low`) to that of
          their high ends (`parts_high`). Not under `max`, where a whole below its parts is no
          contradiction (`contradicts`);
        - below its model, where its model grows faster than every one of its parts, its exclusive
          time among them (`faster_than_parts`: `parts_growth.parts_growths`), which a sum cannot:
          from `parts_low` to `parts_high`. Not under `min`.

        Its far end is no further from the parts' sum than the whole's own range from its model, in
        ratio: one part with a wide range would make it useless.

        None where the contradiction comes only from a growth the data do not settle (`unsettled`:
        `parts_growth.unsettled_contradictions`), save for the time figure, which stands anyway."""
        whole, parts = self.whole, self.parts
        figure = self.time_figure()
        low = parts if self.parts_low is None or not math.isfinite(self.parts_low) else min(parts, self.parts_low)
        high = parts if self.parts_high is None or not math.isfinite(self.parts_high) else max(parts, self.parts_high)
        if whole > 0 and math.isfinite(whole):
            # its far end no further from the sum than the whole's own range from its model (one part's
            # wide range, review 27's 0.25 to 560 s, would make the range useless)
            if parts > whole and self.whole_high is not None and math.isfinite(self.whole_high):
                high = max(parts, min(high, parts * self.whole_high / whole))
            if parts < whole and self.whole_low is not None and math.isfinite(self.whole_low):
                low = min(parts, max(low, parts * self.whole_low / whole))
        if math.isfinite(figure) and figure != whole:
            return (low, high) if figure == parts else (figure, figure)
        if unsettled or not (math.isfinite(whole) and math.isfinite(parts) and whole > 0 and parts > 0):
            return None
        if parts > whole and self.combine in ("mean", "min"):
            clear = self.parts_low is not None and self.whole_high is not None and self.parts_low > self.whole_high
            return (low, high) if clear or self.outgrown else None
        if parts < whole and self.combine in ("mean", "max") and self.with_exclusive and faster_than_parts:
            return low, high
        return None

    @property
    def what(self) -> str:
        """What the parts are, in words."""
        kids = "its descendants' exclusive times" if self.deep else "its children's models"
        return f"its exclusive time and {kids}" if self.with_exclusive else kids.replace("exclusive times", "models")

    def message(self, at: str) -> str:
        what = self.what
        if self.whole <= 0:
            return (f"{self.callpath}: its time model predicts {_num(self.whole)} at {at}, no time at all, but {what} "
                    f"add up to {_num(self.parts)}: its model extrapolates badly there, and its parts' sum stands for it")
        return (
            f"{self.callpath}: its time model predicts {_num(self.whole)} at {at}, but {what} add up to "
            f"{_num(self.parts)} ({times(self.ratio)}): at least one of them extrapolates badly there; "
            f"compare their growth before trusting either"
        )


def parts_sums(predictions: Mapping[tuple[str, str], float],
               ranges: Mapping[tuple[str, str], tuple[float, float] | None] | None = None,
               combine: str = "mean", outgrown: Collection[str] = ()) -> dict[str, PartsCheck]:
    """Per call path that has children with a `time` prediction: its whole and its parts, summed
    from the bottom (see the module): its exclusive time plus each child's parts where they agree
    with the child's model or clearly replace it (`PartsCheck.below_parts`), else the child's `time`.

    `predictions` maps (call path, metric) to the prediction at the target point, `ranges` to the
    80% range there (`PartsCheck.parts_low`, `whole_high`, `floor`); `combine`: `combination`;
    `outgrown`: the call paths whose model grows slower than its heavy parts (`PartsCheck.outgrown`,
    from a first pass: `parts_growth.outgrown_wholes`)."""
    ranges = ranges or {}

    def low(key: tuple[str, str]) -> float | None:
        rng = ranges.get(key)
        return None if rng is None else max(0.0, min(rng[0], predictions[key]))

    def high(key: tuple[str, str]) -> float | None:
        rng = ranges.get(key)
        return None if rng is None else max(0.0, rng[1], predictions[key])

    def part(value: float) -> float:
        # a part predicted below zero adds nothing to a time, never less (review 43: a child's -10.9
        # took a parent's parts' sum to -3.7, and its caller's to 0.87 where the truth was 16)
        return max(0.0, value) if not math.isnan(value) else value

    children: dict[str, list[str]] = {}
    for cp, metric in predictions:
        if metric == "time" and SEPARATOR in cp:
            children.setdefault(cp.rsplit(SEPARATOR, 1)[0], []).append(cp)
    out: dict[str, PartsCheck] = {}
    # deepest first, so that every child's parts are known before its parent's (no recursion: call
    # paths of indirect recursion run thousands of levels deep)
    for cp in sorted(children, key=lambda c: -c.count(SEPARATOR)):
        whole = predictions.get((cp, "time"))
        if whole is None:
            continue
        excl = predictions.get((cp, "exclusive_time"))
        whole_rng = ranges.get((cp, "time"))
        whole_high = None if whole_rng is None else max(whole_rng[1], whole)
        parts, deep, floor = (part(excl) if excl is not None else 0.0), False, 0.0
        lows: list[float | None] = [low((cp, "exclusive_time"))] if excl is not None else []
        highs: list[float | None] = [high((cp, "exclusive_time"))] if excl is not None else []
        for kid in children[cp]:
            below = out.get(kid)
            # a child counts with its parts where they agree with its model or clearly replace it,
            # else with its model (review 29: a child's parts far above its model, but not clearly,
            # added 19.9 s to a run's 3.6 min where the child's model said 0.065 s)
            if below is not None and (below.below_parts() or (below.with_exclusive and not below.contradicts())):
                parts += part(below.parts)
                lows.append(below.parts_low)
                highs.append(below.parts_high)
                deep = True
            else:
                parts += part(predictions[(kid, "time")])
                lows.append(low((kid, "time")))
                highs.append(high((kid, "time")))
            figure = below.time_figure() if below is not None else predictions[(kid, "time")]
            kid_low = below.figure_low if below is not None else low((kid, "time"))
            # a child whose parts outgrow it stands for its figure here too (review 84 MED-2: a
            # training function at 100 s under a run kept at its model's 10 s)
            outgrown_kid = below is not None and below.outgrown and below.below_parts()
            if math.isfinite(figure) and (outgrown_kid or kid_low is None or whole_high is None or kid_low > whole_high):
                floor = max(floor, figure)
        parts_low = None if any(v is None for v in lows) else float(sum(v for v in lows if v is not None))
        parts_high = None if any(v is None for v in highs) else float(sum(v for v in highs if v is not None))
        out[cp] = PartsCheck(cp, whole, parts, len(children[cp]), excl is not None, deep, parts_low=parts_low,
                             whole_high=whole_high, combine=combine, floor=floor, whole_low=low((cp, "time")),
                             outgrown=cp in outgrown, parts_high=parts_high)
    return out


def disagrees(ratio: float, above: float | None, below: float, combine: str) -> bool:
    """Whether a whole `ratio` times its parts' sum contradicts them: more than `above` times (None:
    never, its own work may be unmodeled), or less than 1/`below`, as far as `combine` (`combination`)
    makes the whole equal to its parts (`mean`), at most their sum (`max`) or at least (`min`)."""
    too_high = above is not None and ratio > above and combine in ("mean", "max")
    return too_high or (ratio < 1.0 / below and combine in ("mean", "min"))


def combination(ranks: str = "mean", repetitions: str | None = None) -> str:
    """How a whole relates to its parts' sum after `--ranks` and `--repetitions` (`PartsCheck.combine`):
    `mean` where both are linear or nearly (mean, sum, median, robust), `max` where a largest of
    several is taken, `min` where a smallest, `none` where both are and differ."""
    kinds = {k for k in (ranks, repetitions) if k in ("max", "min")}
    return "mean" if not kinds else kinds.pop() if len(kinds) == 1 else "none"


def check_parts(predictions: Mapping[tuple[str, str], float],
                sums: Mapping[str, PartsCheck] | None = None) -> list[PartsCheck]:
    """The call paths whose `time` prediction and the sum of their parts' disagree (see the module);
    `sums`: `parts_sums(predictions, ...)` where made already."""
    roots = [v for (cp, m), v in predictions.items() if m == "time" and SEPARATOR not in cp and math.isfinite(v)]
    scale = max(roots, default=0.0)
    out = []
    for c in (sums if sums is not None else parts_sums(predictions)).values():
        if c.contradicts() and max(c.whole, c.parts) >= SHARE * scale:
            out.append(c)
    return sorted(out, key=lambda c: -max(c.whole, c.parts))


def _num(v: float) -> str:
    return f"{v:.4g}"


def times(ratio: float) -> str:
    """A ratio of two positive numbers as a factor, `6.8e+02x`; one past the float range as a bound
    (review 45: a parts' sum of 1e-299 under a whole of 4e+303 read "infx")."""
    if ratio == math.inf:
        return f"over {sys.float_info.max:.2g}x"
    if ratio == 0:
        return f"under {sys.float_info.min:.2g}x"
    return f"{ratio:.2g}x"


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
