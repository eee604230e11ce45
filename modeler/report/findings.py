"""The report's findings: plain values that both output formats render, and how values print.

`build_report` (in `assemble`) fills a `Report`; the HTML and markdown templates only lay it out,
so the page and the text never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from markupsafe import Markup

from ..pointtext import point_text
from ..derived import HIGHER_IS_BETTER
from ..share import DEFAULT_MIN_SHARE, Share, left_out_note
from . import svg

NS = 1e-9
_BACKTICKS = re.compile(r"`+")


@dataclass
class ReportOptions:
    """What the user chose on the command line; validated in `build_report`."""

    metric: str = "time"
    target: Mapping[str, float] | None = None
    hold: Mapping[str, float] | None = None
    run_id: str | None = None
    rank: int | None = None
    top: int = 12
    title: str = "scaleprobe report"
    #: how the runs' ranks were reduced (`--ranks`): under `sum` a time is rank-seconds, under
    #: `min` the fastest rank's, so the headline run time comes from the cost models instead
    ranks: str = "mean"
    #: `--min-share`: regions under this share of the run's time (`modeler.share`) go to
    #: `Report.left_out`, out of the ranking and the region views
    min_share: float = DEFAULT_MIN_SHARE
    #: `--repetitions` (None: the engine's choice): with `--ranks`, how a region relates to its
    #: parts' sum (`modeler.parts.combination`)
    repetitions: str | None = None


@dataclass
class RankingRow:
    callpath: str
    formula: str
    growth: str
    growth_key: tuple[float, float]
    smape: float
    cv_smape: float | None
    ar2: float
    points: int
    #: the largest median over the measured points (of each point's repetitions), as the charts show
    measured_max: float
    predicted: float
    low: float | None
    high: float | None
    factor: float
    warnings: tuple[str, ...]
    anchor: str
    #: the central 80% of the forms' predictions at the target (`modeler.uncertainty`), or None
    forms: tuple[float, float] | None = None
    #: whether `forms` holds the fits with each repetition pass left out (run files name their passes)
    pass_refits: bool = False
    #: for speedup, parallel_efficiency and cost: (the same figure from the call path's per-rank
    #: time, "time" or "cost": the model it came from), as `modeler fit` gives it; `modeler.derived`
    from_time: tuple[float, str] | None = None
    #: the region's share of the run's time (`modeler.share`), None without a time series
    share: Share | None = None
    #: for `time`: its exclusive time and its children's times predicted at the target (`modeler.parts`)
    from_parts: float | None = None
    #: for `time`: its parts' sum where clearly above its prediction, its time as part of the run's
    #: (`ranking.RankedModel.time_figure`), else None
    time_figure: float | None = None
    #: why its growth is not to be read as it stands (`RankedModel.doubtful`), or None
    doubtful: str | None = None
    #: whether the data do not settle its growth (`RankedModel.ranked_level`), and whether its parts'
    #: sum contradicts it only through such a growth (`RankedModel.parts_unsettled`): neither is
    #: taken for a fault of the run's model in the run-time caveats (review 109)
    unsettled: bool = False
    parts_unsettled: bool = False
    #: how its model misses its own measurements (`modeler.misfit`), or None
    miss: str | None = None
    #: how its values differ between the two values of a parameter without a term
    #: (`FittedModel.levels`, `modeler.levels.LevelEffect`); empty where they do not
    levels: tuple = ()
    #: whether its growth is the bad kind, the page's red pill: a time (or any more-is-worse value)
    #: growing at least linearly, a speedup or efficiency that falls (`scales_badly`)
    bad: bool = False


def scales_badly(metric: str, growth: tuple[float, float]) -> bool:
    """Whether a model of `metric` with `growth` (`growth.growth`, the one it is ranked by) scales
    badly: for speedup and parallel efficiency it falls (review 69: a falling speedup had the plain
    pill of a good one, and a rising one the red pill), for every other metric it grows at least
    linearly."""
    if metric in HIGHER_IS_BETTER:
        return growth < (0.0, 0.0)
    return growth[0] >= 1


@dataclass
class RegionView:
    row: RankingRow
    charts: list[Markup]
    heat: Markup | None
    spread: float


@dataclass
class TreeNode:
    name: str
    incl_s: float
    excl_s: float
    visits: int
    share: float
    children: list["TreeNode"] = field(default_factory=list)


@dataclass
class Report:
    """Everything the page shows. The views (`training`, `ranks`) fill their part in place."""

    title: str
    parameters: tuple[str, ...]
    metric: str
    unit_format: Callable[[float], str]
    target: dict[str, float]
    hold: dict[str, float]
    ranking: list[RankingRow]
    regions: list[RegionView]
    warnings: list[str] = field(default_factory=list)
    #: regions under `min_share` of the run's time, left out of the ranking (`--min-share`)
    left_out: list[RankingRow] = field(default_factory=list)
    min_share: float = 0.0
    design: list[tuple[str, str]] = field(default_factory=list)
    environment: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    training_charts: list[Markup] = field(default_factory=list)
    training_table: list[dict] = field(default_factory=list)
    split_charts: list[Markup] = field(default_factory=list)
    scaling_axis: str | None = None
    scaling_held: dict[str, float] = field(default_factory=dict)
    scaling_table: list[dict] = field(default_factory=list)
    scaling_charts: list[Markup] = field(default_factory=list)
    #: the run time at the target: the prediction of the longest top-level region of the main
    #: process (`predicted_root`); never a sum of top-level regions, which may run in parallel
    #: (DataLoader workers, threads), but for those of a process's images that ran one after the
    #: other (os.exec*): the longest of each other image's is added (`predicted_others`)
    predicted_total: float | None = None
    predicted_others: float = 0.0
    predicted_cost: float | None = None  # predicted_total x ranks at the target, when ranks is a parameter
    predicted_root: str | None = None
    #: the root's own time model's prediction, where the run time is its parts' sum instead
    #: (`RankingRow.time_figure`)
    predicted_model: float | None = None
    #: what `predicted_root` is and how its time was had
    predicted_basis: str = ""
    #: which rank's time the run time is (review 86 MED-1): "mean over ranks" (`--ranks mean`, and
    #: `sum`/`min` through the cost models) or "slowest rank" (`max`); empty where the runs say
    #: nothing of ranks (Extra-P inputs). The scaling table gives the slowest rank's
    predicted_over: str = ""
    #: why there is no run time, where there is none for a reason worth saying
    predicted_note: str = ""
    #: what makes the run time doubtful: parameters its model holds constant that the target moves,
    #: a model that disagrees with its parts (`modeler.report.assemble._caveats`)
    predicted_caveats: list[str] = field(default_factory=list)
    imbalance_run: str | None = None
    #: the point and repetition of the run that the rank and call-tree views show (`ranks.run_point`):
    #: its shares are that run's (review 80 LOW-3: the page named it by its id only)
    run_point: str = ""
    imbalance: list[dict] = field(default_factory=list)
    imbalance_chart: Markup | None = None
    slowest_ranks: list[tuple[int, int]] = field(default_factory=list)
    #: which ranks of that run recorded no profile and are not shown (`ranks.unprofiled_text`;
    #: review 86 LOW-2: the rank view showed 3 of 4 ranks without a word)
    unprofiled: str = ""
    #: how many ranks of that run recorded a profile
    profiled_ranks: int = 0
    tree_run: str | None = None
    tree_rank: int | None = None
    tree: list[TreeNode] = field(default_factory=list)

    #: the left-out table lists this many (review 21: 19,975 rows made 10.9 MB of a 16.9 MB page)
    LEFT_OUT_ROWS = 500

    def unprofiled_sentence(self) -> str:
        """`unprofiled` as a sentence of its own (empty when every rank recorded a profile)."""
        return self.unprofiled[:1].upper() + self.unprofiled[1:] + "." if self.unprofiled else ""

    def left_out_text(self) -> str:
        """What `--min-share` left out, in words (empty when nothing)."""
        shown = {row.callpath for row in self.ranking}
        left = {row.callpath for row in self.left_out}
        return left_out_note(len(left - shown), self.min_share, len(left & shown)) if left else ""

    def target_text(self) -> str:
        return point_text(self.target)

    @property
    def higher_is_better(self) -> bool:
        """Whether more of the metric is better (speedup, efficiency): the worst models fall."""
        return self.metric in HIGHER_IS_BETTER

    def headline(self) -> RankingRow | None:
        """The region to name first: among those with the worst growth the deepest, since its
        callers inherit its growth and say less about where to look; a doubtful fit only where no
        other grows (review 31: the card said no region grows while every growing row was doubtful).
        None where no model grows (for speedup and efficiency: falls)."""
        # for speedup and efficiency the worst is the fastest to fall, ranked first as well
        worse = (lambda g: g < (0.0, 0.0)) if self.higher_is_better else (lambda g: g > (0.0, 0.0))
        growing = [r for r in self.ranking if worse(r.growth_key)]
        rows = [r for r in growing if r.doubtful is None] or growing
        if not rows:
            return None
        top = rows[0].growth_key
        return max((r for r in rows if r.growth_key == top), key=lambda r: r.callpath.count("->"))

    def passed_over(self) -> list[RankingRow]:
        """The doubtful rows that scale worse than the headline's (`headline`), which the card must
        not pass over in silence (review 73: the card named a deg 2.25 region of the evaluation
        while the 7 rows above it, deg 3, were doubtful, and said nothing of them)."""
        worst = self.headline()
        if worst is None or worst.doubtful is not None:
            return []
        return [r for r in self.ranking[:self.ranking.index(worst)]
                if r.doubtful is not None and r.growth_key != worst.growth_key]

    def short_name(self, callpath: str) -> str:
        """The call path's last region, or as many of its last regions as tell it from the others of
        the ranking (review 73: `BasicBlock.forward` under the training and under the evaluation)."""
        parts = callpath.split("->")
        others = [r.callpath.split("->") for r in self.ranking if r.callpath != callpath]
        for n in range(1, len(parts) + 1):
            if not any(o[-n:] == parts[-n:] for o in others):
                return "->".join(parts[-n:])
        return callpath

    def tree_rows(self) -> list[dict]:
        """The call tree in display order, each row with its depth and the ids of its ancestors
        (the page's script folds a subtree by hiding the rows that list its id)."""
        rows: list[dict] = []

        def walk(n: TreeNode, depth: int, ancestors: tuple[int, ...]) -> None:
            rid = len(rows)
            rows.append({"id": rid, "node": n, "depth": depth, "ancestors": " ".join(map(str, ancestors)),
                         "children": bool(n.children)})
            for c in n.children:
                walk(c, depth + 1, ancestors + (rid,))

        for n in self.tree:
            walk(n, 0, ())
        return rows

    def tree_lines(self) -> list[str]:
        """The call tree as indented text: name, inclusive / exclusive time, visits, share. A line
        break in a name shows as `\\n` (`\\r`), so that each region keeps one line and its indent."""
        lines: list[str] = []

        def walk(n: TreeNode, depth: int) -> None:
            name = n.name.replace("\r", "\\r").replace("\n", "\\n")
            lines.append(
                f"{'  ' * depth}{name}  {svg.format_seconds(n.incl_s)} / {svg.format_seconds(n.excl_s)}"
                f"  x{n.visits}  ({n.share * 100:.1f}%)"
            )
            for c in n.children:
                walk(c, depth + 1)

        for n in self.tree:
            walk(n, 0)
        return lines

    def tree_fence(self) -> str:
        """The markdown code fence around `tree_lines`: longer than any run of backticks in them,
        so that no region name closes it early (CommonMark: a closing fence is at least as long)."""
        longest = max((len(run) for line in self.tree_lines() for run in _BACKTICKS.findall(line)), default=0)
        return "`" * max(3, longest + 1)

    def hold_text(self) -> str:
        return point_text(self.hold)


def value_formatter(metric: str, unit: str) -> Callable[[float], str]:
    """How to print a metric's values: durations as time, everything else as plain numbers. A
    metric without a unit (Extra-P's inputs carry none) is a plain number, even one named time."""
    u = unit.lower()
    if u in ("ns", "nanoseconds"):
        return svg.SecondsFormat(NS)
    if u in ("us", "µs", "microseconds"):
        return svg.SecondsFormat(1e-6)
    if u in ("ms", "milliseconds"):
        return svg.SecondsFormat(1e-3)
    if u in ("s", "sec", "seconds"):
        return svg.SecondsFormat()
    return lambda v: svg.short_number(v) + (f" {unit}" if unit else "")
