"""The cells every tabular format shows for a ranked model, formatted once for all of them."""

from __future__ import annotations

import math

from ..misfit import LACK_RATIO, MISS_FACTOR
from ..growth import growth_text
from ..parts_growth import PARTS_DISAGREE
from ..ranking import RankedModel, Ranking
from ..share import left_out_note
from ..pointtext import point_text

# the model formula goes last: it is the only unbounded cell, so it may run past a terminal's width
HEADERS = ("#", "callpath", "metric", "growth", "at target", "run spread", "80% range", "SMAPE%", "adj.R2", "CV SMAPE%", "RSS",
           "points", "model")


def number(v: float | None, digits: int = 4) -> str:
    """`v` to `digits` significant digits; `-` where it could not be computed: None, nan, and an
    overflow to infinity (JSON has null there, CSV an empty cell; review 66 F6: an RSS of values
    near 1e300 was `inf` here)."""
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:.{digits}g}"


def target_text(ranking: Ranking) -> str:
    return point_text(ranking.at)


def cells(i: int, row: RankedModel) -> tuple[str, ...]:
    fm = row.fitted
    interval = "-" if row.low is None else f"[{number(row.low)}, {number(row.high)}]"
    forms = "-" if row.range is None else f"[{number(row.range[0])}, {number(row.range[1])}]"
    value, derived_from = row.headline()
    at = number(value) + (f" {row.unit}" if row.unit and math.isfinite(value) else "")
    if derived_from is not None:
        # a speedup or efficiency that cannot be (below zero): the figure from the per-rank time
        # first, the model's own beside it (review 88 LOW-2)
        at += f" (from {derived_from}; its model: {number(row.prediction)})"
    elif row.from_time is not None:
        # speedup, efficiency, cost: the same figure from a model of the per-rank time (modeler.derived)
        at += f" (from {row.from_time[1]}: {number(row.from_time[0])})"
    if row.time_figure is not None:
        # clearly below its parts' sum, which an inclusive time cannot be: that sum is its time in the shares
        at += f" (parts: {number(row.time_figure)})"
    if row.ranks_prediction is not None:
        # run by some ranks only: its time is a mean with 0 for the others; theirs (review 88 MED-1)
        at += f" (ranks that ran it: {number(row.ranks_prediction)})"
    if row.out_of_range is not None and fm.metric == "imbalance":
        at += " (above the rank count)"  # max/mean over the ranks cannot be (review 88 LOW-2)
    by_ranks = row.by_ranks_that_ran_it()
    return (
        f"{i}!" if row.doubtful() else str(i),
        fm.callpath,
        fm.metric,
        # not settled by the data: ranked with the constants, shown with its own growth (review 104 M1);
        # so too one whose fastest term is minor, ranked by the terms that carry it (review 123 LOW-5)
        (growth_text(row.growth) + "?" if row.ranked_level() or row.ranked_minor() else growth_text(row.rank_growth()))
        + (" (ranks that ran it)" if by_ranks else " (parts)" if row.parts_growth is not None else "")
        + (" (up to the target)" if row.falls_beyond is not None and row.parts_growth is None and not by_ranks else ""),
        at,
        interval,
        forms,
        number(fm.smape, 3),
        number(fm.ar2, 4),
        number(fm.cv_smape, 3),
        number(fm.rss, 3),
        str(fm.points),
        fm.model.formula(digits=4),
    )


def left_out_text(ranking: Ranking) -> str:
    """What `--min-share` left out, in words (empty when nothing)."""
    return (left_out_note(len(ranking.left_out_callpaths()), ranking.min_share, len(ranking.own_time_left_out()))
            if ranking.left_out else "")


def doubtful_legend(ranking: Ranking) -> str:
    """The line that explains the `!` of doubtful rows (empty when none is)."""
    marked = [i for i, row in enumerate(ranking.rows, 1) if row.doubtful()]
    if not marked:
        return ""
    return (f"! ({len(marked)} row{'s' if len(marked) > 1 else ''}): a fit worse than a constant (adj. R2 below 0), "
            f"a model more than {MISS_FACTOR:g}x from every run at one of its measured points, one that does not "
            f"follow its measurements (more than {LACK_RATIO:g}x the noise of their repetitions from them), "
            f"or a time model that its parts' models (its exclusive time and its descendants') contradict by more than "
            f"{PARTS_DISAGREE:g}x at the target, or the part with the poorest fit in such a contradiction: "
            f"its growth and prediction are not to be acted on as they stand")
