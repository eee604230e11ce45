"""Rank fitted models by how badly they scale: asymptotic growth first, then the predicted value
at a target point (`--at ranks=1024,batch=256`).

Growth is the dominant term's total exponent and total log exponent; a dominant term with a
negative coefficient means the value eventually falls, so it ranks below every constant. For
speedup and parallel efficiency, where more is better, the order is reversed: the fastest-falling
model ranks first. Among the models of one growth, those of several metrics are grouped by the
metric (`metric_order`: times first) before their values are compared, which only within one
metric's unit mean anything.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np

from .dataset import RunShares, ranks_text
from .derived import HIGHER_IS_BETTER, RANKS_TIME, Baselines, derived_predictions, disagreement_warning
from .growth import growth, growth_text, target_growth
from .level_growth import LEVEL, level_ends, level_growth_warning, level_weight, unsettled_growths
from .loop_parts import step_parts_growth_warning, step_verdicts
from .minor_terms import judging_text, minor_growth, minor_growths, minor_term_warning
from .model import FittedModel, Model
from .own_time import own_time_note
from .parts import SEPARATOR, PartsCheck, check_parts, parts_sums
from .parts_growth import (blamed_parts, doubt, faster_than_parts_warning, outgrown_wholes, parts_growths,
                           settled_checks, slower_than_parts_warning, unsettled_contradictions, worse_than_constant)
from .passes import hull, pass_spread_warning
from .rank_warnings import (below_zero_warning, beyond_ranks_warning, level_warnings, miss_warnings, out_of_range,
                            poor_fit_warning, step_parts_warning)
from .levels import LEVEL_NOTE_PREFIX
from .share import Share, kept_callpaths, measured_shares, own_shares, shares
from .target_point import largest_point
from .uncertainty import mixture_ranges, with_prediction
from .pointtext import point_text


#: the share of the forms' predictions that the prediction range covers
RANGE_LEVEL = 0.8

#: the order of the metrics' groups among the rows of one growth (`metric_order`): the times, in
#: seconds, first, then rank-seconds, bytes, counts and the ratios, each its own; the values of a
#: row are compared with those of its group only (review 110 LOW-2: under `--metric all`, a peak
#: memory of 2.56e+05 B came above a cost of 51 s and a run time of 0.74 s of the same growth)
METRIC_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"time", "exclusive_time", "step_time", "epoch_time", "data_wait", "step_comm_time",
               "step_gpu_time", "gpu_time", "comm_time", "comm_gpu_time"}),
    frozenset({"cost"}),
    frozenset({"peak_memory", "peak_rss"}),
    frozenset({"comm_bytes"}),
    frozenset({"visits"}),
    frozenset({"comm_calls"}),
    frozenset({"imbalance"}),
    frozenset({"speedup"}),
    frozenset({"parallel_efficiency"}),
)


def metric_order(metric: str) -> tuple[int, str]:
    """Where `metric`'s rows go among the rows of one growth: its group's place in `METRIC_GROUPS`,
    ("" within it: by value); a metric of no group (an Extra-P input's own) after them, by name.
    The order stays the same whatever metrics are ranked, and one metric alone is left as it was."""
    for i, group in enumerate(METRIC_GROUPS):
        if metric in group:
            return i, ""
    return len(METRIC_GROUPS), metric


@dataclass(frozen=True)
class RankedModel:
    fitted: FittedModel
    growth: tuple[float, float]
    prediction: float
    low: float | None
    high: float | None
    unit: str = ""
    #: for `time`: the call path's exclusive time plus its children's times, predicted at the same
    #: point (None without children); see `modeler.parts`; for a loop's `step_time` and `epoch_time`,
    #: the loop's, over the step's share of it (`loop_parts.step_verdicts`)
    from_parts: float | None = None
    #: the central 80% of the predictions of the forms in play (`modeler.uncertainty`), made to hold
    #: its parts where they are credible (`parts.PartsCheck.range_span`, `_holding`), or None
    range: tuple[float, float] | None = None
    #: for speedup, parallel_efficiency and cost: (the same figure from a model of the per-rank
    #: time, the metric of that model: "time" or "cost"), None where there is none; `modeler.derived`
    from_time: tuple[float, str] | None = None
    #: the call path's share of the run's time (`modeler.share`), None where it has no time series
    share: Share | None = None
    #: why this model is charged with its caller's whole/parts contradiction (`blamed_parts`), or None
    blamed: str | None = None
    #: for `time`: its parts' sum where it is clearly above the prediction, or a child's figure clearly
    #: above it (`parts.PartsCheck.time_figure`): its time in the shares and the run's time; for a
    #: loop's `step_time` and `epoch_time`, the loop's, over the step's share; else None
    time_figure: float | None = None
    #: how the ranks' values were combined (`--ranks`: `doubt`)
    combine: str = "mean"
    #: whether `from_parts` holds the call path's exclusive time (`parts.PartsCheck.with_exclusive`):
    #: without it, a prediction above its parts may be its own work (`doubt`)
    parts_exclusive: bool = True
    #: for `time`: the growth its parts (its exclusive time, its children's times) give it where they
    #: contradict `growth`: its fastest part's, below it (a sum cannot grow faster than its fastest
    #: part), or that of parts carrying most of its time, above it (nor slower than those); it ranks
    #: by it (`parts_growths`); for a loop's `step_time` and `epoch_time`, the loop's, where it goes
    #: beyond the step's own growth as beyond the loop's (`loop_parts.step_verdicts`); else None
    parts_growth: tuple[float, float] | None = None
    #: (passes, the prediction of the model fitted without the runs of those repetition passes) for
    #: each pass or group (`FittedModel.pass_models`); empty where the runs do not name their passes
    #: or agree
    passes: tuple[tuple[tuple[int, ...], float], ...] = ()

    #: where its dominant term falls (`growth` negative) but its value still rises up to the target
    #: (`rises_to_target`): that falling growth, and `growth` is its fastest rising term's (review 86
    #: MED-3: `a*n^2 - b*n^2*log2(ranks)` was "falling" and ranked below constants); else None
    falls_beyond: tuple[float, float] | None = None
    #: where only some ranks of a run ran the call path (`RunShares.some_ranks`): how many of how
    #: many (`1 of 2-3`); else None. Its additive values (time, visits, ...) are means over all the
    #: ranks, 0 for those that did not run it (review 88 MED-1)
    some_ranks: str | None = None
    #: for the `time` of such a call path: the model of the time of the ranks that ran it (fitted to
    #: its cost over ranks, `derived.some_ranks_series`: `aggregate.run_metrics` takes their mean as
    #: its per-rank time), that model's prediction at the target and its growth (`target_growth`); else None
    ranks_model: Model | None = None
    ranks_prediction: float | None = None
    ranks_growth: tuple[float, float] | None = None
    #: why the prediction cannot be (`out_of_range`): a speedup or efficiency below zero, an
    #: imbalance above the target's rank count (review 88 LOW-2); else None
    out_of_range: str | None = None
    #: where forms in play that stay level (or go the other way) carry at least `LEVEL_WEIGHT` of the
    #: weight: their share, and the row is ranked with the constants (`ranked_level`); else None
    level_weight: float | None = None
    #: for `time`: its parts' sum (`from_parts`) contradicts its prediction only through a growth the
    #: data do not settle, its own or a part's (`parts_growth.unsettled_contradictions`): no doubt then
    parts_unsettled: bool = False
    #: where its fastest terms carry under `minor_terms.MINOR_SHARE` of its value at the target (at
    #: least 4x the largest measured point) and a slower rising term carries that much: the growth
    #: of that term, which it is ranked by (`ranked_minor`; review 123 LOW-5); else None
    minor_growth: tuple[float, float] | None = None

    def ranked_level(self) -> bool:
        """Whether the row is ranked as level because the data do not settle its own growth
        (`level_weight`; review 104 M1: a near-flat region fitted with a steep term came first)."""
        return self.level_weight is not None and self.parts_growth is None and not self.by_ranks_that_ran_it()

    def by_ranks_that_ran_it(self) -> bool:
        """Whether the row is ranked by the growth of the time of the ranks that ran its call path
        (`ranks_growth`): where that grows faster than its own model (or its parts', `parts_growth`),
        as a mean over ranks with 0 for those that did not run it falls as 1/ranks while they do not."""
        own = self.growth if self.parts_growth is None else self.parts_growth
        return self.ranks_growth is not None and self.ranks_growth > own

    def ranked_minor(self) -> bool:
        """Whether the row is ranked by the slower growth of the terms that carry its value
        (`minor_growth`), its own growth not otherwise replaced (level, parts, ranks that ran it)."""
        return self.minor_growth is not None and self.level_weight is None and self.parts_growth is None \
            and self.falls_beyond is None and not self.by_ranks_that_ran_it()

    def rank_growth(self) -> tuple[float, float]:
        """The growth the row is ranked by: its parts' where they grow slower (`parts_growth`), that
        of the time of the ranks that ran it where faster (`by_ranks_that_ran_it`)."""
        if self.by_ranks_that_ran_it():
            return self.ranks_growth
        if self.ranked_level():
            return LEVEL
        if self.ranked_minor():
            return self.minor_growth
        return self.growth if self.parts_growth is None else self.parts_growth

    def headline(self) -> tuple[float, str | None]:
        """(the figure to show first at the target, None or the metric it was derived from): the
        model's prediction, but for a speedup or efficiency whose prediction cannot be
        (`out_of_range`: below zero, a falling term run past the measurements), the figure from the
        per-rank time where there is one (`from_time`; review 88 LOW-2: `speedup -61.33 (from cost: 8)`)."""
        if self.out_of_range is not None and self.fitted.metric in HIGHER_IS_BETTER and self.from_time is not None \
                and math.isfinite(self.from_time[0]):
            return self.from_time[0], self.from_time[1]
        return self.prediction, None

    def rank_value(self) -> float:
        """The value at the target the row is ranked by among those of its growth: its `headline`, or
        the time of the ranks that ran it where it is ranked by their growth."""
        if self.by_ranks_that_ran_it() and self.ranks_prediction is not None:
            return self.ranks_prediction
        return self.headline()[0]

    def doubtful(self) -> str | None:
        """Why this row's growth is not to be read as it stands, or None: see `doubt` and `blamed_parts`;
        not its parts' contradiction where only an unsettled growth makes it (`parts_unsettled`)."""
        parts = None if self.parts_unsettled else self.from_parts
        return doubt(self.fitted, self.prediction, parts, self.combine, self.parts_exclusive) or self.blamed

    def to_json(self) -> dict:
        d = self.fitted.to_json()
        d.update(
            doubtful=self.doubtful(),
            unit=self.unit,
            share=None if self.share is None else self.share.to_json(),
            growth={"exponent": self.growth[0], "log_exponent": self.growth[1]},
            growth_level_weight=self.level_weight,
            growth_ranked_level=self.ranked_level(),
            growth_ranked_minor=None if not self.ranked_minor() else
            {"exponent": self.minor_growth[0], "log_exponent": self.minor_growth[1]},
            growth_falls_beyond=None if self.falls_beyond is None else
            {"exponent": self.falls_beyond[0], "log_exponent": self.falls_beyond[1]},
            growth_from_parts=None if self.parts_growth is None else
            {"exponent": self.parts_growth[0], "log_exponent": self.parts_growth[1]},
            prediction=_finite_or_none(self.prediction),
            prediction_interval=None if self.low is None else [_finite_or_none(self.low), _finite_or_none(self.high)],
            prediction_from_parts=_finite_or_none(self.from_parts),
            prediction_range=None if self.range is None else [_finite_or_none(v) for v in self.range],
            prediction_from_time=None if self.from_time is None else _finite_or_none(self.from_time[0]),
            prediction_from_time_basis=None if self.from_time is None else self.from_time[1],
            prediction_without_pass=[{"passes": list(k), "prediction": _finite_or_none(v)} for k, v in self.passes],
            prediction_out_of_range=self.out_of_range,
            some_ranks=None if self.some_ranks is None else {
                "ranks": self.some_ranks,
                "model": None if self.ranks_model is None else self.ranks_model.formula(digits=None),
                "prediction": _finite_or_none(self.ranks_prediction),
                "growth": None if self.ranks_growth is None else
                {"exponent": self.ranks_growth[0], "log_exponent": self.ranks_growth[1]},
                "ranked_by": self.by_ranks_that_ran_it(),
            },
        )
        return d


@dataclass(frozen=True)
class Ranking:
    """Models in ranking order, worst-scaling first, with their predictions at `at`."""

    parameters: tuple[str, ...]
    at: dict[str, float]
    rows: tuple[RankedModel, ...]
    warnings: tuple[str, ...] = ()
    #: `--min-share`: the models of call paths under this share of the run's time are in `left_out`
    min_share: float = 0.0
    left_out: tuple[RankedModel, ...] = ()
    #: says the warnings again for fewer rows (`top`); None where the ranking was not made by `rank_models`
    about_rows: "_RowWarnings | None" = field(default=None, repr=False, compare=False)

    def left_out_callpaths(self) -> list[str]:
        """The call paths left out by `min_share`, each once, in ranking order: those with no model
        shown (not one whose time is shown and whose own time was left out: `own_time_left_out`)."""
        shown = {r.fitted.callpath for r in self.rows}
        return list(dict.fromkeys(r.fitted.callpath for r in self.left_out if r.fitted.callpath not in shown))

    def own_time_left_out(self) -> list[str]:
        """The call paths shown whose exclusive time `min_share` left out (its own time under it)."""
        shown = {r.fitted.callpath for r in self.rows}
        return list(dict.fromkeys(r.fitted.callpath for r in self.left_out if r.fitted.callpath in shown))

    def top(self, n: int) -> "Ranking":
        """The `n` worst-scaling models (`--top`); what `min_share` left out stays said, and the
        warnings speak of the models kept only (review 45: `(3 models)` with one shown, and a
        warning about a time model that `--top 1` had cut)."""
        rows = self.rows[:n]
        if len(rows) == len(self.rows) or self.about_rows is None:
            return replace(self, rows=rows)
        return replace(self, rows=rows, warnings=self.about_rows(rows, cut=True))


@dataclass(frozen=True)
class _RowWarnings:
    """The warnings of a ranking (`rank_models`): those given, then those about the models of the
    rows shown, made from these."""

    given: tuple[str, ...]
    model_notes: bool
    parts_checks: tuple[PartsCheck, ...]
    at_text: str
    nonnegative: Collection[tuple[str, str]]
    predictions: Mapping[tuple[str, str], float]
    measured: Sequence
    parameters: tuple[str, ...]
    repetitions: str | None = None
    #: the point where a model's fastest term is judged minor (`minor_terms.judging_text`)
    minor_point: str = ""

    def __call__(self, shown: Sequence[RankedModel], cut: bool = False) -> tuple[str, ...]:
        """The warnings with `shown` the rows; `cut`: rows were cut from the ranking (`Ranking.top`),
        so the step loops checked against their parts are those of the rows left too."""
        warnings = list(self.given)
        if self.model_notes:
            # (the notes of rows whose levels differ: `level_warnings` names the rows with their values)
            counts = Counter(w for r in shown for w in r.fitted.warnings if not w.startswith(LEVEL_NOTE_PREFIX))
            warnings += [f"{w} ({n} model{'s' if n > 1 else ''})" for w, n in counts.items()]
        warnings += level_warnings(shown)
        # the parts checks speak of time models: of those shown (review 19: under --metric visits they
        # named the time models fitted for the shares, without the exclusive times, a diagnosis of their own)
        shown_times = {r.fitted.callpath for r in shown if r.fitted.metric == "time"}
        warnings += [c.message(self.at_text) for c in self.parts_checks if c.callpath in shown_times]
        steps = self.predictions
        if cut:
            kept = {r.fitted.callpath for r in shown}
            steps = {k: v for k, v in steps.items() if k[0] in kept}
        warnings.extend(w for w in (poor_fit_warning(shown), *miss_warnings(shown),
                                    below_zero_warning(shown, self.nonnegative, self.at_text),
                                    beyond_ranks_warning(shown, self.at_text),
                                    disagreement_warning(shown, self.at_text), step_parts_warning(steps, self.at_text),
                                    faster_than_parts_warning(shown),
                                    slower_than_parts_warning(shown), step_parts_growth_warning(shown),
                                    pass_spread_warning(shown, self.at_text, self.repetitions),
                                    level_growth_warning(shown), minor_term_warning(shown, self.minor_point))
                        if w)
        if shown_times and (own := own_time_note(self.measured, self.parameters, among=shown_times)):
            warnings.append(own)
        return tuple(warnings)


def _ranges(
    models: Sequence[FittedModel], at: Mapping[str, float], predictions: Sequence[float],
    left_out: Sequence[tuple[tuple[tuple[int, ...], float], ...]] | None = None,
) -> list[tuple[float, float] | None]:
    """Each model's prediction range at `at`, holding its prediction there and its predictions with
    one repetition pass left out (`left_out`, as `_pass_predictions` gives them; found here where
    None); None without alternatives or where it cannot be had."""
    own = np.array(predictions, dtype=float)
    if left_out is None:
        left_out = [_pass_predictions(fm, at) for fm in models]
    with np.errstate(all="ignore"):
        lo, hi = with_prediction(*mixture_ranges([fm.alternatives for fm in models], at, RANGE_LEVEL), own)
        for j, refits in enumerate(left_out):
            if refits:
                a, b = hull(lo[j:j + 1], hi[j:j + 1], np.array([[v] for _, v in refits]), own[j:j + 1])
                lo[j], hi[j] = a[0], b[0]
        for j, fm in enumerate(models):  # each level's model, where the model does not follow a 2-valued parameter
            if fm.level_models:
                point = np.array([[at[p] for p in fm.model.parameters]], dtype=float)
                a, b = hull(lo[j:j + 1], hi[j:j + 1], fm.level_values(point), own[j:j + 1])
                lo[j], hi[j] = a[0], b[0]
    return [(float(a), float(b)) if math.isfinite(a) and math.isfinite(b) else None for a, b in zip(lo, hi)]


def _holding(rng: tuple[float, float] | None, prediction: float,
             span: tuple[float, float] | None) -> tuple[float, float] | None:
    """The range `rng` of a model's `prediction` made to hold `span`, the parts' (low, high) that a
    whole equals (`PartsCheck.range_span`): stretched to their far end; where they are above the
    prediction, also raised to their low end, never past the prediction: an inclusive time is at
    least its parts (parts below a time model, which grows faster than every one of them, are no
    such bound: which of the two is wrong the numbers do not say); as it is where either is not known."""
    if rng is None or span is None or not (all(math.isfinite(v) for v in span) and math.isfinite(prediction)):
        return rng
    low, high = span
    if high > prediction:
        return max(rng[0], min(prediction, low)), max(rng[1], high)
    return min(rng[0], low), rng[1]


def _pass_predictions(fm: FittedModel, at: Mapping[str, float]) -> tuple[tuple[tuple[int, ...], float], ...]:
    """(passes, prediction at `at`) of each of `fm.pass_models`."""
    if not fm.pass_models:
        return ()
    values = fm.pass_values({p: [v] for p, v in at.items()})[:, 0]
    return tuple((k, float(v)) for (k, _), v in zip(fm.pass_models, values))


def _finite_or_none(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def falls_text(row: "RankedModel") -> str:
    """What the growth text adds for a row ranked by its rising terms (`RankedModel.falls_beyond`)."""
    if row.falls_beyond is None:
        return ""
    return f" (up to the target; in the limit {growth_text(row.falls_beyond)})"


def nonnegative_keys(series: Iterable) -> set[tuple[str, str]]:
    """(call path, metric) of every series whose measured values are all at least 0."""
    return {(s.callpath, s.metric) for s in series if all(float(np.min(r)) >= 0.0 for r in s.repetitions)}


def rank_models(
    models: Iterable[FittedModel],
    parameters: Sequence[str],
    at: Mapping[str, float],
    *,
    warnings: Sequence[str] = (),
    units: Mapping[tuple[str, str], str] | None = None,
    companions: Sequence[FittedModel] = (),
    nonnegative: Collection[tuple[str, str]] = (),
    baselines: Baselines | None = None,
    measured: Sequence = (),
    min_share: float = 0.0,
    run_shares: RunShares | None = None,
    model_notes: bool = False,
    combine: str = "mean",
    largest: Mapping[str, float] | None = None,
    held: Mapping[str, float] | None = None,
    repetitions: str | None = None,
) -> Ranking:
    """The models worst-scaling first; `units` maps (call path, metric) to the unit of its values.
    `held`: the parameters a point filter left with one value (`Dataset.held`), which the target
    holds too: a `ranks` held so bounds an imbalance (`out_of_range`; review 92 LOW-1).
    `repetitions`: how the repetitions were combined (`--repetitions`), which the advice of the
    warnings follows (`pass_spread_warning`).

    Every `time` prediction is checked against its parts' (`modeler.parts`), using `companions` too:
    models fitted for that check only (exclusive times that were not selected), not ranked. Models
    of the series in `nonnegative` (see `nonnegative_keys`) that predict below zero are named in a
    warning. With `baselines` (the fewest ranks of each call path's time, `modeler.derived.baselines`),
    speedup, efficiency and cost also get their figure from the call path's time model (`from_time`),
    and those far from it are named in a warning.

    `measured`: the series read (their `time` and those of the top-level call paths give each call
    path's share of the run's time, `modeler.share`, with `run_shares` where read from runs); with
    `min_share` above 0, the models of the
    call paths under that share at every measured point and at the target (from the `time` models
    among `models` and `companions`) go to `Ranking.left_out` instead of the rows, and the warnings
    about models speak of the rows only. `model_notes`: also say once each warning the rows' models
    carry (`fewer than 5 values of parameter p (18 models)`). `largest`: the largest measured point,
    which a model whose dominant term falls must rise from up to `at` to be ranked by its rising
    terms (`target_growth`; without it, whether it rises at `at`).

    A call path that only some ranks of a run ran (`run_shares.some_ranks`, under `--ranks mean`)
    has its `time` row ranked by the growth of the time of the ranks that ran it where that is faster
    (`RankedModel.by_ranks_that_ran_it`), from its model among `companions` (`derived.RANKS_TIME`),
    with `baselines` only (where the per-rank time is what speedup, efficiency and cost derive from);
    its speedup, efficiency and cost take their figure from its cost model alone (review 88 MED-1).
    A prediction that cannot be (`out_of_range`) is named in a warning, and a speedup or efficiency
    below zero is shown with its figure from the per-rank time first (`RankedModel.headline`)."""
    point = np.array([[float(at[p]) for p in parameters]]) if parameters else np.zeros((1, 0))
    if largest is None and parameters:
        largest = largest_point(measured, parameters)  # `modeler fit`: of the series read, as the report's
    models = list(models)
    preds = []
    for fm in models:
        with np.errstate(all="ignore"):
            preds.append(float(fm.model.evaluate(point)[0]))
    by_key = {(fm.callpath, fm.metric): v for fm, v in zip(models, preds)}
    for fm in companions:
        with np.errstate(all="ignore"):
            by_key.setdefault((fm.callpath, fm.metric), float(fm.model.evaluate(point)[0]))
    at_text = point_text(parameters, [float(at[p]) for p in parameters])
    target = {p: float(at[p]) for p in parameters}
    left_out = [_pass_predictions(fm, target) for fm in models]
    ranges = _ranges(models, target, preds, left_out)
    range_of = _all_ranges(models, ranges, companions, by_key, target)
    sums = parts_sums(by_key, range_of, combine)
    # a part whose growth the data do not settle is level to the parts' rules, as its row is ranked
    # (review 109 F3)
    unsettled = unsettled_growths([fm for fm in [*models, *companions] if fm.metric in ("time", "exclusive_time")],
                                  parameters, at, largest)
    # and one whose fastest term carries little of its value at the target is the growth of the terms
    # that carry it (review 123 LOW-5)
    times = [fm for fm in [*models, *companions] if fm.metric in ("time", "exclusive_time")]
    minor_of = {id(fm): minor_growth(fm.model, parameters, at, largest) for fm in [*models, *times]}
    minor = minor_growths(times, minor_of)
    # the rows keep the growths of this first pass; the sums are made again with the wholes that
    # their parts outgrow (review 80), so that the shares, the figures and the run time agree, until
    # no more are: a caller judged on a child's figure from before (review 84 MED-2)
    slower = parts_growths([*models, *companions], sums, by_key, unsettled, minor)
    outgrown = outgrown_wholes([*models, *companions], sums, by_key, range_of, slower, unsettled, minor)
    while outgrown - {cp for cp, c in sums.items() if c.outgrown}:
        sums = parts_sums(by_key, range_of, combine, outgrown)
        again = parts_growths([*models, *companions], sums, by_key, unsettled, minor)
        outgrown = outgrown | outgrown_wholes([*models, *companions], sums, by_key, range_of, again, unsettled, minor)
    # a whole/parts contradiction counts where it also stands with the unsettled growths level
    ends = level_ends(unsettled, by_key, range_of)
    level_by_key = {**by_key, **ends}
    level_sums = parts_sums(level_by_key, range_of, combine, outgrown) if ends else sums
    hinged = unsettled_contradictions(sums, by_key, level_sums, level_by_key) if ends else set()
    parts_checks = settled_checks(check_parts(by_key, sums), level_sums)
    some = dict(run_shares.some_ranks) if run_shares is not None else {}
    # the time of the ranks that ran a call path only some ranks ran: its cost model over ranks, where
    # speedup, efficiency and cost derive from a per-rank time (`baselines`)
    per_rank = _ranks_that_ran_it([*models, *companions], some, parameters, point, at, largest) \
        if baselines is not None else {}
    derived = derived_predictions(models, companions, at, parameters, baselines, some)
    blamed = blamed_parts([*models, *companions], by_key, sums, hinged)
    share_of = _shares(measured, models, companions, by_key, range_of, sums, run_shares, blamed, hinged)
    own_of = _own_shares(measured, models, ranges, by_key, share_of, run_shares, blamed, sums)
    # a time model that grows faster than every one of its parts (`parts_growths`): its range holds
    # their sum (`PartsCheck.range_span`), as that of one whose parts clearly outgrow it does
    fitted_of = {(fm.callpath, fm.metric): fm for fm in [*companions, *models]}
    faster = {cp for cp, g in slower.items() if (cp, "time") in fitted_of and g < growth(fitted_of[(cp, "time")].model)}
    # a loop's step and epoch time take its time's verdict (review 123 MED-1)
    steps = step_verdicts([*models, *companions], sums, measured, parameters, target, slower, faster, hinged)
    rows = []
    for fm, pred, rng, ft, refits in zip(models, preds, ranges, derived, left_out):
        low = high = None
        if fm.interval is not None and math.isfinite(pred):
            a, b = pred * fm.interval[0], pred * fm.interval[1]
            low, high = min(a, b), max(a, b)
        unit = (units or {}).get((fm.callpath, fm.metric), "")
        parts = sums[fm.callpath].parts if fm.metric == "time" and fm.callpath in sums else None
        share = (own_of if fm.metric == "exclusive_time" and fm.callpath in own_of else share_of).get(fm.callpath)
        check = sums.get(fm.callpath) if fm.metric == "time" else None
        figure = check.time_figure() if check is not None else None
        if figure is not None and (not math.isfinite(pred) or figure == pred):
            figure = None
        parts_growth = slower.get(fm.callpath) if fm.metric == "time" else None
        with_exclusive = check is None or check.with_exclusive
        unsettled = fm.metric == "time" and fm.callpath in hinged
        # the range holds the parts' figure where they are credible (review 123 MED-1)
        hold = check.range_span(fm.callpath in faster, unsettled) if check is not None else None
        step = steps.get((fm.callpath, fm.metric))
        if step is not None:
            parts, figure, hold, parts_growth = step.from_parts, step.figure, step.held, step.parts_growth
            with_exclusive, unsettled = step.with_exclusive, step.unsettled
        if figure is not None and not math.isfinite(pred):
            figure = None
        rng = _holding(rng, pred, hold)
        g, falls = target_growth(fm.model, parameters, at, largest)
        ranks_model, ranks_pred, ranks_growth = per_rank.get(fm.callpath, (None, None, None)) \
            if fm.metric == "time" else (None, None, None)
        rows.append(RankedModel(fm, g, pred, low, high, unit, parts, rng, ft, share,
                                blamed.get((fm.callpath, fm.metric)), figure, combine, with_exclusive,
                                parts_growth, refits, falls,
                                ranks_text(some[fm.callpath]) if fm.callpath in some else None,
                                ranks_model, ranks_pred, ranks_growth,
                                out_of_range(fm.metric, pred, {**(held or {}), **at}),
                                level_weight(fm, g, parameters, at, largest), unsettled,
                                minor_of[id(fm)] if falls is None else None))

    def key(r: RankedModel) -> tuple:
        # for speedup and efficiency a falling model is the bad one: rank it as a growing time
        sign = -1.0 if r.fitted.metric in HIGHER_IS_BETTER else 1.0
        value = r.rank_value()
        pred = sign * value if math.isfinite(value) else -math.inf
        g = r.rank_growth()
        # values compared within one metric's group only (`metric_order`); a row ranked by its parts'
        # growth is then put after its descendants of that growth (`_after_their_parts`)
        return (-sign * g[0], -sign * g[1], metric_order(r.fitted.metric), -pred, r.parts_growth is not None,
                r.fitted.callpath, r.fitted.metric)

    rows.sort(key=key)
    kept = kept_callpaths(share_of, min_share)

    def shown_row(r: RankedModel) -> bool:
        # a call path's own time is kept when the call path is (one without a `time` share always
        # is: review 27, an Extra-P input of exclusive times only), and takes the fraction itself
        cp = r.fitted.callpath
        return r.share is None or ((cp in kept or cp not in share_of) and r.share.kept(min_share))

    shown = _after_their_parts([r for r in rows if shown_row(r)])
    left_out = _after_their_parts([r for r in rows if not shown_row(r)])
    # the warnings speak of the models shown only (review 18: "(70 models)" with 20 shown), also
    # after `Ranking.top` (review 45)
    about_rows = _RowWarnings(tuple(warnings), model_notes, tuple(parts_checks), at_text, nonnegative, by_key,
                              measured, tuple(parameters), repetitions, judging_text(parameters, at, largest))
    return Ranking(tuple(parameters), dict(at), tuple(shown), about_rows(shown), min_share, tuple(left_out),
                   about_rows)


def _after_their_parts(rows: list[RankedModel]) -> list[RankedModel]:
    """`rows` (sorted) with each row ranked by its parts' growth (`parts_growth`) moved to just after
    the last of its descendants among them whose own growth that is (same growth and metric): the
    region that grows so ahead of the callers it lifts (review 71 F3: `main`, with the larger time,
    came first). Only behind those, not behind every row of that growth (review 133 LOW-2: a 1.77 s
    `init_distributed` ranked constant by its parts came after an unrelated 0.04 s `evaluate`).
    Rows ranked as constants stay in the order of their values: nothing grows there to come first.
    A move keeps the order of the other rows, so one pass does."""
    out = list(rows)
    for r in [r for r in rows if r.parts_growth is not None and r.rank_growth() != LEVEL]:
        i = next(k for k, x in enumerate(out) if x is r)
        group = (r.rank_growth(), r.fitted.metric)
        below = [k for k in range(i + 1, len(out)) if out[k].parts_growth is None
                 and (out[k].rank_growth(), out[k].fitted.metric) == group
                 and out[k].fitted.callpath.startswith(r.fitted.callpath + SEPARATOR)]
        if below:
            out.insert(below[-1], out.pop(i))
    return out


def _ranks_that_ran_it(
    fitted: Sequence[FittedModel], some: Mapping[str, object], parameters: Sequence[str], point: np.ndarray,
    at: Mapping[str, float], largest: Mapping[str, float] | None,
) -> dict[str, tuple[Model, float, tuple[float, float]]]:
    """Per call path of `some` (run by some ranks only, `RunShares.some_ranks`) with a model of the
    time of the ranks that ran it among `fitted` (`derived.RANKS_TIME`, its cost over ranks: that
    time is its per-rank time, `aggregate.run_metrics`): that model, its prediction at the target and
    its growth (`target_growth`). Its `time`, a mean over every rank with 0 for those that did not
    run it, falls as 1/ranks where one rank runs it at every size (review 88 MED-1)."""
    out = {}
    for fm in fitted:
        if fm.metric == RANKS_TIME and fm.callpath in some and fm.callpath not in out:
            with np.errstate(all="ignore"):
                value = float(fm.model.evaluate(point)[0])
            out[fm.callpath] = (fm.model, value, target_growth(fm.model, parameters, at, largest)[0])
    return out


def _own_shares(measured: Sequence, models: Sequence[FittedModel], ranges: Sequence[tuple[float, float] | None],
                by_key: Mapping[tuple[str, str], float], share_of: Mapping[str, Share],
                run_shares: RunShares | None, blamed: Collection[tuple[str, str]] = (),
                sums: Mapping[str, PartsCheck] | None = None) -> dict[str, Share]:
    """The share of the run's time of each exclusive time model's call path's own time
    (`modeler.share.own_shares`); none from a model worse than a constant or `blamed`."""
    own = [(fm, rng) for fm, rng in zip(models, ranges) if fm.metric == "exclusive_time"]
    if not measured or not own:
        return {}
    predictions = {fm.callpath: by_key[(fm.callpath, fm.metric)] for fm, _ in own}
    lows = {fm.callpath: (None if rng is None else rng[0]) for fm, rng in own}
    doubtful = {fm.callpath for fm, _ in own if (fm.callpath, fm.metric) in blamed or worse_than_constant(fm)}
    times = {cp: v for (cp, metric), v in by_key.items() if metric == "time"}
    times = _time_figures(times, sums or {})
    roots = run_shares.main_roots if run_shares is not None else None
    return own_shares(measured_shares(measured, run_shares, "exclusive_time"), predictions, lows, share_of, roots,
                      times, doubtful)


def _all_ranges(models: Sequence[FittedModel], ranges: Sequence[tuple[float, float] | None],
                companions: Sequence[FittedModel], by_key: Mapping[tuple[str, str], float],
                at: Mapping[str, float]) -> dict[tuple[str, str], tuple[float, float] | None]:
    """The 80% range at the target of every `time` and `exclusive_time` model, shown (`ranges`) or
    fitted beside (`companions`): the shares take their low ends, the parts' sums theirs."""
    out = {(fm.callpath, fm.metric): rng for fm, rng in zip(models, ranges)}
    extra = [fm for fm in companions if fm.metric in ("time", "exclusive_time") and (fm.callpath, fm.metric) not in out]
    if extra:
        keys = [(fm.callpath, fm.metric) for fm in extra]
        out.update(zip(keys, _ranges(extra, at, [by_key[k] for k in keys])))
    return out


def _shares(measured: Sequence, models: Sequence[FittedModel], companions: Sequence[FittedModel],
            by_key: Mapping[tuple[str, str], float], range_of: Mapping[tuple[str, str], tuple[float, float] | None],
            sums: Mapping[str, PartsCheck], run_shares: RunShares | None = None,
            blamed: Collection[tuple[str, str]] = (), unsettled: Collection[str] = ()) -> dict[str, Share]:
    """Each call path's share of the run's time (`modeler.share`): measured in `measured` (and
    `run_shares`), and at the target from the `time` models (the low end from their 80% ranges;
    none from a doubtful one, `doubt`, or one `blamed` for its caller's contradiction, but for a
    contradiction that only a growth the data do not settle makes, `unsettled`), or from
    their parts' sums where clearly above them (`_time_figures`)."""
    if not measured:
        return {}
    def doubtful_time(fm: FittedModel) -> bool:
        check = sums.get(fm.callpath)
        if check is None or fm.callpath in unsettled:
            return doubt(fm, by_key[(fm.callpath, "time")], None) is not None
        return doubt(fm, by_key[(fm.callpath, "time")], check.parts, check.combine, check.with_exclusive) is not None

    doubtful = {fm.callpath for fm in [*models, *companions] if fm.metric == "time"
                and ((fm.callpath, "time") in blamed or doubtful_time(fm))}
    times = {cp: v for (cp, metric), v in by_key.items() if metric == "time"}
    lows: dict[str, float | None] = {cp: (None if (rng := range_of.get((cp, "time"))) is None else rng[0]) for cp in times}
    figures = _time_figures(times, sums)
    for cp in [cp for cp in times if cp in sums and figures[cp] != times[cp]]:  # (nan != nan: review 57 F2)
        # its parts' sum, not its model: the low ends of the parts' ranges (none where a child's figure
        # lifted it: `PartsCheck.floor`)
        lows[cp] = sums[cp].parts_low if sums[cp].below_parts() else None
    roots = run_shares.main_roots if run_shares is not None else None
    return shares(measured_shares(measured, run_shares), figures, lows, roots, doubtful)


def _time_figures(times: Mapping[str, float], sums: Mapping[str, PartsCheck]) -> dict[str, float]:
    """Each call path's time at the target for the shares: its model's prediction, or its parts'
    sum where the model predicts clearly below it (`parts.PartsCheck.time_figure`; review 25: the
    training function's model, 0.91 s at 4x, capped the shares of the training step under it, 4.5 s,
    at 14%, where it took 85% of the run)."""
    return {cp: sums[cp].time_figure() if cp in sums else v for cp, v in times.items()}
