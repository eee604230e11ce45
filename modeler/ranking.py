"""Rank fitted models by how badly they scale: asymptotic growth first, then the predicted value
at a target point (`--at ranks=1024,batch=256`).

Growth is the dominant term's total exponent and total log exponent; a dominant term with a
negative coefficient means the value eventually falls, so it ranks below every constant. For
speedup and parallel efficiency, where more is better, the order is reversed: the fastest-falling
model ranks first.
"""

from __future__ import annotations

import math
from collections import Counter
import re
from dataclasses import dataclass, field, replace
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np

from .dataset import LARGEST_VALUE, RANKS_PARAMETER, Dataset, RunShares, ranks_text
from .derived import RANKS_TIME, Baselines, derived_predictions, disagreement_warning
from .errors import InputError
from .listing import listing
from .misfit import LACK_PREFIX, MISS_FACTOR, MISS_PREFIX
from .model import FittedModel, Model
from .own_time import own_time_note
from .passes import hull, pass_spread_warning
from .parts import SEPARATOR, PartsCheck, check_parts, disagrees, parts_sums, times
from .share import Share, kept_callpaths, measured_shares, own_shares, shares
from .uncertainty import mixture_ranges, with_prediction
from .pointtext import param_text, point_text


# metrics where more is better; for every other metric (times, bytes, imbalance) more is worse
HIGHER_IS_BETTER = frozenset({"speedup", "parallel_efficiency"})
#: a time model whose parts' models (exclusive time + children) differ from it by more than this
#: factor at the target is marked doubtful in the ranking
PARTS_DISAGREE = 2.0
#: the share of the forms' predictions that the prediction range covers
RANGE_LEVEL = 0.8


def doubt(fm: FittedModel, prediction: float, from_parts: float | None, combine: str = "mean",
          with_exclusive: bool = True) -> str | None:
    """Why a model's growth is not to be read as it stands, or None: a fit worse than a constant, one
    that misses its own measurements (`modeler.misfit`), or a time model that its parts' models
    (`from_parts`) contradict at the target (review 15: a noisy
    18 ms region led the ranking with adj. R² -0.2 and parts 52x apart). Under `--ranks max`
    (`combine`) a whole below its parts is none, under `min` one above them, and without its
    exclusive time (`with_exclusive`) one above them neither (`parts.PartsCheck`)."""
    if _worse_than_constant(fm):
        return f"adj. R² {fm.ar2:.2g}: worse than a constant"
    return fm.miss or contradiction(prediction, from_parts, combine, with_exclusive)


def contradiction(prediction: float, from_parts: float | None, combine: str = "mean",
                  with_exclusive: bool = True) -> str | None:
    """How a time model's prediction and its parts' sum (`from_parts`) contradict each other at the
    target, by more than `PARTS_DISAGREE` (`parts.disagrees`), or None. Without the call path's
    exclusive time among its parts (`with_exclusive`) a whole above them is none, as for
    `parts.PartsCheck.contradicts`: that may be its own work (review 45: an Extra-P input's `main`,
    20 + 0.5 * batch over a child of 0.2 s, was marked doubtful and its share not trusted)."""
    if from_parts is not None and 0 < from_parts < math.inf and -math.inf < prediction <= 0 \
            and combine in ("mean", "min"):
        return "it predicts no time at all at the target, where its parts' models add up to more"  # review 43
    if from_parts is not None and 0 < from_parts < math.inf and 0 < prediction < math.inf:
        ratio = prediction / from_parts
        if disagrees(ratio, PARTS_DISAGREE if with_exclusive else None, PARTS_DISAGREE, combine):
            # each way round from the two numbers: 1 / ratio of an underflowed ratio divides by 0
            return f"its parts' models add up to {times(ratio)} less at the target" if ratio > 1 else \
                f"its parts' models add up to {times(from_parts / prediction)} more at the target"
    return None


def blamed_parts(models: Iterable[FittedModel], predictions: Mapping[tuple[str, str], float],
                 sums: Mapping[str, PartsCheck]) -> dict[tuple[str, str], str]:
    """The parts charged with a whole/parts contradiction, with why: where a call path's `time`
    model and its parts' (`doubt`) disagree, which of them is wrong cannot be told from the numbers
    alone, so the whole is marked, and so is the part whose fit is the poorest when it is poorer than
    the whole's (none where the whole is a constant below its parts) (review 18: a loop was marked while the constant that its child's clearly growing,
    noisy values were fitted with, SMAPE 60%, was not). Keys: (call path, metric) of the part."""
    fitted = {(fm.callpath, fm.metric): fm for fm in models}
    children = _time_children(fitted)
    out: dict[tuple[str, str], str] = {}
    for cp, check in sums.items():
        whole = fitted.get((cp, "time"))
        if whole is None or _worse_than_constant(whole) or contradiction(
                predictions.get((cp, "time"), math.nan), check.parts, check.combine, check.with_exclusive) is None:
            continue
        if not whole.model.terms and check.parts > check.whole:
            # a constant below its parts: it holds constant a growth its parts' models follow (review
            # 25), and a part with a poorer fit is not the one to blame (review 31: the one region
            # that came out right, -23% at 4x, was marked for its constant caller, -86%)
            continue
        parts = [fitted[k] for k in [(cp, "exclusive_time"), *((c, "time") for c in children.get(cp, ()))]
                 if k in fitted]
        worst = max(parts, key=lambda fm: fm.smape if math.isfinite(fm.smape) else -math.inf, default=None)
        if worst is None or not math.isfinite(worst.smape) or worst.smape <= whole.smape:
            continue
        why = (f"whose time model its parts' contradict by "
               f"{times(max(check.whole / check.parts, check.parts / check.whole))} at the target"
               if check.whole > 0 else
               "whose time model predicts no time at all at the target, where its parts' add up to more")
        out.setdefault((worst.callpath, worst.metric), (
            f"a part of {cp}, {why}; its fit is the poorer (SMAPE {worst.smape:.3g}% against {whole.smape:.3g}%)"))
    return out


def parts_growths(models: Iterable[FittedModel], sums: Mapping[str, PartsCheck],
                  predictions: Mapping[tuple[str, str], float] | None = None) -> dict[str, tuple[float, float]]:
    """Per call path whose `time` model's growth its parts (its exclusive time and its children's
    times) contradict, the growth its parts give it. A child's own figure here is its parts' where
    it has one; deepest first. Two ways:

    - faster than every one of its parts, all modeled: the growth of the fastest part. A sum cannot
      grow faster than its fastest part, so such a model overstates its growth, and ranked by it a
      parent came above the children that make up 98% of it (review 62 F3: `Trainer.fit` deg 2.92
      over a child of deg 2.5, `main` above both, where the innermost region grew most). Only where
      the parts hold the exclusive time (`PartsCheck.with_exclusive`): without it, the rest may be
      the call path's own work.
    - slower than parts that carry at least `HEAVY_PARTS` of its time at the target (`predictions`;
      the whole's figure, `PartsCheck.time_figure`): the slowest growth among those parts, taken
      fastest first. A sum grows at least as fast as its parts (review 71 F3: `n^2 + n` was fitted
      n^1.5 in the training step and every caller, over an exact n^2 descendant with 60% of the
      time, and `main` was ranked by the n^1.5 of its children). Under `--ranks max` or `min` a
      whole is only known to be at least each of its parts, not their sum: one part alone must carry
      that much."""
    fitted = {(fm.callpath, fm.metric): fm for fm in models}
    children = _time_children(fitted)
    values = predictions or {}
    out: dict[str, tuple[float, float]] = {}
    for cp in sorted(sums, key=lambda c: -c.count(SEPARATOR)):
        whole = fitted.get((cp, "time"))
        if whole is None or cp not in children:
            continue
        parts = [(g, v) for g, v, _ in _parts(cp, fitted, children[cp], sums, values, out)]
        mine = growth(whole.model)
        if (cp, "exclusive_time") in fitted and sums[cp].with_exclusive:
            fastest = max(g for g, _ in parts)
            if fastest < mine:
                out[cp] = fastest
                continue
        heavy = _heavy_growth(parts, sums[cp].time_figure(), sums[cp].combine == "mean")
        if heavy is not None and heavy > mine:
            out[cp] = heavy
    return out


def outgrown_wholes(models: Iterable[FittedModel], sums: Mapping[str, PartsCheck],
                    predictions: Mapping[tuple[str, str], float],
                    ranges: Mapping[tuple[str, str], tuple[float, float] | None],
                    growths: Mapping[str, tuple[float, float]]) -> set[str]:
    """The call paths whose `time` model grows slower than parts that carry `HEAVY_PARTS` of its
    time at the target (`growths`, from `parts_growths`, above its own growth), and do so even at
    the low ends of their 80% ranges (`ranges`; a part's value where its range is not known),
    against the high end of the whole's (its prediction where that is not known): with
    its parts' sum above it, the model misses a part's growth, and the sum is its time whatever the
    ranges (`parts.PartsCheck.outgrown`; review 80: a run modeled at 3.13 s, with a training
    function of 6.79 s, range 5.32 to 11.8 s, under it, took 8.83 s). The low ends keep one
    far-extrapolated part with a wide range from deciding it (review 27: a 2% region, range 0.25
    to 560 s, would have made a 79 s run 4.9 min)."""
    fitted = {(fm.callpath, fm.metric): fm for fm in models}
    children = _time_children(fitted)
    out: set[str] = set()
    for cp, faster in growths.items():
        whole = fitted.get((cp, "time"))
        if whole is None or cp not in sums or cp not in children or not faster > growth(whole.model):
            continue
        parts = [(g, v if low is None else low)
                 for g, v, low in _parts(cp, fitted, children[cp], sums, predictions, growths, ranges)]
        # half of the whole's high end, not of its prediction (review 84 MED-1: a part of range 6 to
        # 394 s made a flat 10 s run, range 6.2 to 13.8 s, 3.4 min)
        check = sums[cp]
        high = check.time_figure() if check.whole_high is None else max(check.time_figure(), check.whole_high)
        heavy = _heavy_growth(parts, high, check.combine == "mean")
        if heavy is not None and heavy > growth(whole.model):
            out.add(cp)
    return out


def _parts(cp: str, fitted: Mapping[tuple[str, str], FittedModel], children: Sequence[str],
           sums: Mapping[str, PartsCheck], values: Mapping[tuple[str, str], float],
           growths: Mapping[str, tuple[float, float]],
           ranges: Mapping[tuple[str, str], tuple[float, float] | None] | None = None,
           ) -> list[tuple[tuple[float, float], float, float | None]]:
    """(growth, time at the target, the low end of its 80% range or None) of each part of `cp`:
    its exclusive time where modeled, and each child, with the growth its own parts give it
    (`growths`) and its figure (`_figure`)."""
    def low(key: tuple[str, str]) -> float | None:
        rng = (ranges or {}).get(key)
        value = values.get(key, math.nan)
        return None if rng is None or not math.isfinite(value) else max(0.0, min(rng[0], value))

    own = fitted.get((cp, "exclusive_time"))
    out = [(growth(own.model), values.get((cp, "exclusive_time"), math.nan), low((cp, "exclusive_time")))] \
        if own is not None else []
    for kid in children:
        kid_low = sums[kid].figure_low if kid in sums else low((kid, "time"))
        out.append((growths.get(kid, growth(fitted[(kid, "time")].model)), _figure(kid, sums, values), kid_low))
    return out


#: the share of a whole's time at the target that parts growing faster than it must carry for
#: their growth to rank it (`parts_growths`)
HEAVY_PARTS = 0.5


def _figure(cp: str, sums: Mapping[str, PartsCheck], values: Mapping[tuple[str, str], float]) -> float:
    """A call path's time at the target: its parts' figure where it has parts, else its model's."""
    return sums[cp].time_figure() if cp in sums else values.get((cp, "time"), math.nan)


def _heavy_growth(parts: Sequence[tuple[tuple[float, float], float]], whole: float,
                  summed: bool) -> tuple[float, float] | None:
    """The slowest growth among the fastest-growing parts (growth, value at the target) that carry
    `HEAVY_PARTS` of `whole`, taken fastest first (`summed`), or of one part alone; None if none do."""
    if not (math.isfinite(whole) and whole > 0):
        return None
    need = HEAVY_PARTS * whole
    if not summed:
        alone = [g for g, v in parts if math.isfinite(v) and v >= need]
        return max(alone, default=None)
    carried = 0.0
    for g, v in sorted(parts, key=lambda p: p[0], reverse=True):
        carried += v if math.isfinite(v) and v > 0 else 0.0
        if carried >= need:
            return g
    return None


def faster_than_parts_warning(rows: Sequence[RankedModel]) -> str | None:
    """One warning naming the rows ranked by their parts' slower growth (`RankedModel.parts_growth`), or None."""
    named = [f"{r.fitted.callpath} ({growth_text(r.growth)}, parts {growth_text(r.parts_growth)})"
             for r in rows if r.parts_growth is not None and r.parts_growth < r.growth]
    if not named:
        return None
    n = len(named)
    return (f"{n} time model{'s' if n > 1 else ''} grow{'' if n > 1 else 's'} faster than every one of "
            f"{'their' if n > 1 else 'its'} parts (exclusive time and children), which a sum cannot: "
            f"{'they are' if n > 1 else 'it is'} ranked by the fastest part's growth, marked (parts): "
            f"{listing(named, 5)}")


def slower_than_parts_warning(rows: Sequence[RankedModel]) -> str | None:
    """One warning naming the rows ranked by their heavy parts' faster growth (`parts_growths`), or None."""
    named = [f"{r.fitted.callpath} ({growth_text(r.growth)}, parts {growth_text(r.parts_growth)})"
             for r in rows if r.parts_growth is not None and r.parts_growth > r.growth]
    if not named:
        return None
    n = len(named)
    return (f"{n} time model{'s' if n > 1 else ''} grow{'' if n > 1 else 's'} slower than parts that carry "
            f"at least {HEAVY_PARTS:.0%} of {'their' if n > 1 else 'its'} time at the target, which a sum "
            f"cannot: {'they are' if n > 1 else 'it is'} ranked by those parts' growth, marked (parts), and "
            f"{'their models underestimate' if n > 1 else 'its model underestimates'} larger runs: "
            f"{listing(named, 5)}")


def _time_children(fitted: Mapping[tuple[str, str], FittedModel]) -> dict[str, list[str]]:
    """Call path -> its children that have a `time` model in `fitted` (keyed by (call path, metric))."""
    children: dict[str, list[str]] = {}
    for cp, metric in fitted:
        if metric == "time" and SEPARATOR in cp:
            children.setdefault(cp.rsplit(SEPARATOR, 1)[0], []).append(cp)
    return children


def _worse_than_constant(fm: FittedModel) -> bool:
    return math.isfinite(fm.ar2) and fm.ar2 < 0 and bool(fm.model.terms)


@dataclass(frozen=True)
class RankedModel:
    fitted: FittedModel
    growth: tuple[float, float]
    prediction: float
    low: float | None
    high: float | None
    unit: str = ""
    #: for `time`: the call path's exclusive time plus its children's times, predicted at the same
    #: point (None without children); see `modeler.parts`
    from_parts: float | None = None
    #: the central 80% of the predictions of the forms in play (`modeler.uncertainty`), or None
    range: tuple[float, float] | None = None
    #: for speedup, parallel_efficiency and cost: (the same figure from a model of the per-rank
    #: time, the metric of that model: "time" or "cost"), None where there is none; `modeler.derived`
    from_time: tuple[float, str] | None = None
    #: the call path's share of the run's time (`modeler.share`), None where it has no time series
    share: Share | None = None
    #: why this model is charged with its caller's whole/parts contradiction (`blamed_parts`), or None
    blamed: str | None = None
    #: for `time`: its parts' sum where it is clearly above the prediction, or a child's figure clearly
    #: above it (`parts.PartsCheck.time_figure`): its time in the shares and the run's time; else None
    time_figure: float | None = None
    #: how the ranks' values were combined (`--ranks`: `doubt`)
    combine: str = "mean"
    #: whether `from_parts` holds the call path's exclusive time (`parts.PartsCheck.with_exclusive`):
    #: without it, a prediction above its parts may be its own work (`doubt`)
    parts_exclusive: bool = True
    #: for `time`: the growth its parts (its exclusive time, its children's times) give it where they
    #: contradict `growth`: its fastest part's, below it (a sum cannot grow faster than its fastest
    #: part), or that of parts carrying most of its time, above it (nor slower than those); it ranks
    #: by it (`parts_growths`); else None
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

    def by_ranks_that_ran_it(self) -> bool:
        """Whether the row is ranked by the growth of the time of the ranks that ran its call path
        (`ranks_growth`): where that grows faster than its own model (or its parts', `parts_growth`),
        as a mean over ranks with 0 for those that did not run it falls as 1/ranks while they do not."""
        own = self.growth if self.parts_growth is None else self.parts_growth
        return self.ranks_growth is not None and self.ranks_growth > own

    def rank_growth(self) -> tuple[float, float]:
        """The growth the row is ranked by: its parts' where they grow slower (`parts_growth`), that
        of the time of the ranks that ran it where faster (`by_ranks_that_ran_it`)."""
        if self.by_ranks_that_ran_it():
            return self.ranks_growth
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
        """Why this row's growth is not to be read as it stands, or None: see `doubt` and `blamed_parts`."""
        return doubt(self.fitted, self.prediction, self.from_parts, self.combine, self.parts_exclusive) or self.blamed

    def to_json(self) -> dict:
        d = self.fitted.to_json()
        d.update(
            doubtful=self.doubtful(),
            unit=self.unit,
            share=None if self.share is None else self.share.to_json(),
            growth={"exponent": self.growth[0], "log_exponent": self.growth[1]},
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
                "model": None if self.ranks_model is None else self.ranks_model.formula(),
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

    def __call__(self, shown: Sequence[RankedModel], cut: bool = False) -> tuple[str, ...]:
        """The warnings with `shown` the rows; `cut`: rows were cut from the ranking (`Ranking.top`),
        so the step loops checked against their parts are those of the rows left too."""
        warnings = list(self.given)
        if self.model_notes:
            counts = Counter(w for r in shown for w in r.fitted.warnings)
            warnings += [f"{w} ({n} model{'s' if n > 1 else ''})" for w, n in counts.items()]
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
                                    slower_than_parts_warning(shown), pass_spread_warning(shown, self.at_text))
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
    return [(float(a), float(b)) if math.isfinite(a) and math.isfinite(b) else None for a, b in zip(lo, hi)]


def _pass_predictions(fm: FittedModel, at: Mapping[str, float]) -> tuple[tuple[tuple[int, ...], float], ...]:
    """(passes, prediction at `at`) of each of `fm.pass_models`."""
    if not fm.pass_models:
        return ()
    values = fm.pass_predictions({p: [v] for p, v in at.items()})[:, 0]
    return tuple((k, float(v)) for (k, _), v in zip(fm.pass_models, values))


def _finite_or_none(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def growth_text(g: tuple[float, float]) -> str:
    """The dominant term's total degree and log power (`growth`): `deg 1.5, log^1`, `const`, or
    `falling (...)`. A falling growth whose parts are both at or below 0 (a rising term with a
    negative coefficient, or a decaying term without a log) is told by their sizes: `falling (log^1)`
    for `10 - 2 * log2(p)`. Parts of mixed signs are told as they are: a term that decays to 0 as
    `ranks^(-1/3) * log2(ranks)` is `falling (deg -0.333, log^1)` (review 66 F4: it was `falling (deg
    0.333, log^1)`, which reads as a rise of degree 0.333 turned over)."""
    e, l = g
    if e == 0 and l == 0:
        return "const"
    signed = (e < 0 < l) or (l < 0 < e)
    parts = ([f"deg {(e if signed else abs(e)):.3g}"] if e else []) + ([f"log^{(l if signed else abs(l)):.3g}"] if l else [])
    text = ", ".join(parts)
    return f"falling ({text})" if e < 0 or (e == 0 and l < 0) else text


def growth(model: Model) -> tuple[float, float]:
    """(total exponent, total log exponent) of the dominant term, negated when it decreases.

    Growth is taken as every parameter grows alike, so a term's degree is the sum of its exponents.
    A term of positive degree dominates; a negative coefficient on it means the value eventually
    falls. Without one, the model tends to its constant (or to a term of degree 0, such as
    `batch^(1) * ranks^(-1)`, work split over the ranks): level, whatever sign a decaying term in
    `ranks^(-1)` has (`c - a * ranks^(-1)` rises to a plateau). A model with nothing but decaying
    terms falls, as its slowest-decaying term."""
    rising: tuple[tuple[float, float], float] | None = None
    level = model.constant != 0
    decaying: list[tuple[float, float]] = []
    for t in model.terms:
        if t.coefficient == 0:
            continue
        if not any(f.exponent or f.log_exponent for f in t.factors):
            level = True  # a constant-valued term does not grow
            continue
        g = (float(sum(f.exponent for f in t.factors)), float(sum(f.log_exponent for f in t.factors)))
        if g > (0.0, 0.0):
            if rising is None or g > rising[0]:
                rising = (g, 1.0 if t.coefficient > 0 else -1.0)
        elif g == (0.0, 0.0):
            level = True
        else:
            decaying.append(g)
    if rising is not None:
        g, sign = rising
        return (sign * g[0], sign * g[1])
    if level or not decaying:
        return (0.0, 0.0)
    return max(decaying)


def rising_growth(model: Model) -> tuple[float, float] | None:
    """The growth of the fastest term with a positive coefficient and a positive growth, or None."""
    best = None
    for t in model.terms:
        if t.coefficient <= 0:
            continue
        g = (float(sum(f.exponent for f in t.factors)), float(sum(f.log_exponent for f in t.factors)))
        if g > (0.0, 0.0) and (best is None or g > best):
            best = g
    return best


#: the step of `rises_to_target` where the target is not beyond the largest measured point
RISE_STEP = 1.01


def rises_to_target(model: Model, parameters: Sequence[str], at: Mapping[str, float],
                    largest: Mapping[str, float] | None = None) -> bool:
    """Whether the model's value rises up to the target `at`: where `at` lies beyond the largest
    measured point `largest` (at least as large in every parameter), its prediction there is above
    the one at `largest`; else (the default target is that point) it rises as every parameter grows
    alike by 1% at the target, as `growth` takes the parameters to grow."""
    if not parameters:
        return False
    t = np.array([[float(at[p]) for p in parameters]])
    if largest is not None and all(p in largest for p in parameters):
        m = np.array([[float(largest[p]) for p in parameters]])
        if bool(np.all(t >= m)) and bool(np.any(t > m)):
            with np.errstate(all="ignore"):
                a, b = float(model.evaluate(m)[0]), float(model.evaluate(t)[0])
            return math.isfinite(a) and math.isfinite(b) and b > a
    with np.errstate(all="ignore"):
        a, b = float(model.evaluate(t)[0]), float(model.evaluate(t * RISE_STEP)[0])
    return math.isfinite(a) and math.isfinite(b) and b > a


def target_growth(model: Model, parameters: Sequence[str], at: Mapping[str, float],
                  largest: Mapping[str, float] | None = None) -> tuple[tuple[float, float], tuple[float, float] | None]:
    """(the growth to rank by, the falling dominant growth it replaces or None): `growth`, but for a
    model whose dominant term falls while its value rises up to the target (`rises_to_target`), whose
    fastest rising term's growth it takes (review 86 MED-3)."""
    g = growth(model)
    if g < (0.0, 0.0):
        up = rising_growth(model)
        if up is not None and rises_to_target(model, parameters, at, largest):
            return up, g
    return g, None


def falls_text(row: "RankedModel") -> str:
    """What the growth text adds for a row ranked by its rising terms (`RankedModel.falls_beyond`)."""
    if row.falls_beyond is None:
        return ""
    return f" (up to the target; in the limit {growth_text(row.falls_beyond)})"


def measured_maximum(dataset: Dataset) -> dict[str, float]:
    """The largest measured value of every parameter: the default target point."""
    return largest_point(dataset.series, dataset.parameters)


def largest_point(series: Iterable, parameters: Sequence[str]) -> dict[str, float]:
    """The largest value of every parameter among the points of `series`."""
    points = [s.points for s in series if getattr(s, "points", None) is not None and s.points.ndim == 2
              and s.points.shape[0] and s.points.shape[1] == len(parameters)]
    if not points:
        return {}
    top = np.max(np.vstack(points), axis=0)
    return {p: float(v) for p, v in zip(parameters, top)}


def parse_assignments(text: str | None, option: str, parameters: Sequence[str] | None = None,
                      held: Mapping[str, float] | None = None) -> dict[str, float]:
    """`ranks=1024,batch=256` -> {"ranks": 1024.0, "batch": 256.0}; errors name `option`. Values are
    parameter values, so positive (PMNF models use x^i and log2(x)); with `parameters`, names must be
    among them; `held`: the parameters a point filter left with one value (`Dataset.held`), which
    the error then names as such."""
    out: dict[str, float] = {}
    if text is None:
        return out
    if not text.strip():  # (review 78 LOW-5: `--at "$TARGET"`, TARGET unset, was the largest measured point)
        raise InputError(f"{option} {text!r}: empty (an unset shell variable?); leave {option} out for the largest "
                         f"measured values")
    for item in text.split(","):
        item = item.strip()
        if not item:  # `p=4,` or `,`: a value lost, not nothing asked for
            raise InputError(f"{option} {text!r}: an empty item (a comma too many, or an unset shell variable?); "
                             f"give NAME=VALUE,... (example: {option} ranks=1024,batch=256)")
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise InputError(f"{option}: {item!r} is not NAME=VALUE (example: {option} ranks=1024,batch=256)")
        if parameters is not None and name not in parameters:
            known = ", ".join(parameters) if parameters else "none"
            if held and name in held:  # (review 40 L4)
                raise InputError(f"{option}: {name} has one value ({param_text(held[name])}) in the points used (the runs' "
                                 f"constant, or what --where/--exclude left of it), so it is no parameter of the "
                                 f"models, which have: {known}; leave {name} out of {option}, or measure (or keep) "
                                 f"more of its values")
            raise InputError(f"{option}: unknown parameter {name!r}; the measurements have: {known}")
        if not _NUMBER.fullmatch(value):  # float() would take 1_000, '١٦' and 'nan' as well
            raise InputError(f"{option}: {name}={value!r} is not a number") from None
        v = float(value)
        if v <= 0:
            raise InputError(f"{option}: {name}={value}: values must be positive (PMNF models use x^i and log2(x))")
        if not v <= LARGEST_VALUE:
            raise InputError(f"{option}: {name}={value}: values above {LARGEST_VALUE:g} are too large to predict at "
                             "(their powers overflow); give the parameter in larger units")
        if name in out and out[name] != v:
            raise InputError(f"{option}: {name} is given twice ({name}={param_text(out[name])} and {name}={param_text(v)})")
        out[name] = v
    return out


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?inf(?:inity)?", re.IGNORECASE)


def parse_at(text: str | None, parameters: Sequence[str], defaults: Mapping[str, float],
             held: Mapping[str, float] | None = None) -> dict[str, float]:
    """The target point of `--at`; parameters not named take `defaults` (`held`: as for
    parse_assignments)."""
    at = {p: float(defaults[p]) for p in parameters if p in defaults}
    at.update(parse_assignments(text, "--at", parameters, held))
    missing = [p for p in parameters if p not in at]
    if missing:
        raise InputError(f"--at: no value for parameter(s) {', '.join(missing)} and no measurement to default to")
    return at


def nonnegative_keys(series: Iterable) -> set[tuple[str, str]]:
    """(call path, metric) of every series whose measured values are all at least 0."""
    return {(s.callpath, s.metric) for s in series if all(float(np.min(r)) >= 0.0 for r in s.repetitions)}


#: a model whose SMAPE (percent) exceeds this explains little of its measurements
POOR_FIT_SMAPE = 50.0
#: ... unless its adjusted R² is at least this: then it follows the values' variation, and its SMAPE
#: is high from values of 0 (no communication on one rank), where any miss counts 200%
GOOD_FIT_AR2 = 0.9
#: the parts of a step (data wait, communication per step) predicted above the step's time by more
#: than this factor contradict it. Not its GPU time: where the CPU runs ahead of the GPU, a step's
#: span on the GPU is longer than its duration on the CPU (gpu_check on an H100: 4 ms against 35 us)
STEP_PART_EXCESS = 1.1
STEP_PARTS = ("data_wait", "step_comm_time")


def poor_fit_warning(rows: Sequence["RankedModel"]) -> str | None:
    """One warning naming the models whose fit is poor (SMAPE above `POOR_FIT_SMAPE`), or None. Such a
    model is often a constant drawn through values that PMNF terms cannot follow, as a speedup that
    falls with more ranks (x^i, log2(x) cannot fall as 1/x)."""
    poor = [r.fitted for r in rows if math.isfinite(r.fitted.smape) and r.fitted.smape > POOR_FIT_SMAPE
            and not (math.isfinite(r.fitted.ar2) and r.fitted.ar2 >= GOOD_FIT_AR2)]
    if not poor:
        return None
    named = [f"{fm.callpath} ({fm.metric}) {fm.smape:.0f}%" for fm in poor]
    n = len(named)
    why = ("the values vary more than any form explains (run-to-run noise, or a change of regime inside "
           "the measured range)")
    if any(fm.metric in HIGHER_IS_BETTER for fm in poor):
        why = ("PMNF terms cannot fall as 1/x: a speedup or efficiency that drops with more ranks is better read "
               "from the models of time (`from time` in the table, `prediction_from_time` in JSON and CSV)")
    return (f"{n} model{'s' if n > 1 else ''} fit{'' if n > 1 else 's'} the measurements poorly (SMAPE above "
            f"{POOR_FIT_SMAPE:g}%): {listing(named, 5)}; {'their predictions say' if n > 1 else 'its prediction says'} little. {why[0].upper()}{why[1:]}")


def miss_warnings(rows: Sequence["RankedModel"]) -> list[str]:
    """One warning naming the models that miss their own measurements at a point, and one naming
    those that do not follow them over all their points (`modeler.misfit`)."""
    def named(prefix: str) -> list[str]:
        return [f"{r.fitted.callpath} ({r.fitted.metric}): {r.fitted.miss.removeprefix(prefix)}"
                for r in rows if r.fitted.miss and r.fitted.miss.startswith(prefix)]

    out = []
    if missing := named(MISS_PREFIX):
        n = len(missing)
        out.append(f"{n} model{'s' if n > 1 else ''} miss{'' if n > 1 else 'es'} {'their' if n > 1 else 'its'} own "
                   f"measurements by more than {MISS_FACTOR:g}x at a measured point: {listing(missing, 5)}; no form with "
                   f"these parameters follows the values there (a change of regime, or a term the model lacks): read "
                   f"{'their' if n > 1 else 'its'} growth and predictions as rough, and measure around that point")
    if lacking := named(LACK_PREFIX):
        n = len(lacking)
        out.append(f"{n} model{'s' if n > 1 else ''} do{'' if n > 1 else 'es'} not follow {'their' if n > 1 else 'its'} "
                   f"own measurements: {listing(lacking, 5)}; a change of regime inside the measured range (a step, a "
                   f"cache or memory limit), or a term the model lacks: read {'their' if n > 1 else 'its'} growth and "
                   "predictions as rough, and look at the values along each parameter")
    return out


def step_parts_warning(predictions: Mapping[tuple[str, str], float], at_text: str) -> str | None:
    """One warning naming the step loops a part of whose step (data wait, communication) is
    predicted above the whole step at the target (review 15: communication 0.214 s in a step of
    0.158 s), or None. A part is a mean over the active steps and the step a median, so a part a little
    above is possible; far above, one of the two models extrapolates badly."""
    named = []
    for (cp, metric), step in sorted(predictions.items()):
        if metric != "step_time" or not math.isfinite(step) or step <= 0:
            continue
        for part in STEP_PARTS:
            v = predictions.get((cp, part))
            if v is not None and math.isfinite(v) and v > STEP_PART_EXCESS * step:
                named.append(f"{cp}: {part} {v:.4g} > step_time {step:.4g}")
    if not named:
        return None
    return (f"at {at_text} a part of the step is predicted above the whole step: {listing(named, 5)}; one of "
            "these models extrapolates badly there: compare their growth before trusting either")


def below_zero_warning(
    rows: Sequence["RankedModel"], nonnegative: Collection[tuple[str, str]], at_text: str
) -> str | None:
    """One warning naming the models that predict a value below zero at the target although every
    value they were fitted to is at least 0 (a falling term run past the measurements), or None."""
    below = [r for r in rows
             if math.isfinite(r.prediction) and r.prediction < 0 and (r.fitted.callpath, r.fitted.metric) in nonnegative]
    if not below:
        return None
    named = [f"{r.fitted.callpath} ({r.fitted.metric}) {r.prediction:.4g}" for r in below]
    n = len(named)
    text = (f"{n} model{'s' if n > 1 else ''} predict{'' if n > 1 else 's'} a value below zero at {at_text}, "
            f"though every value measured is at least 0: {listing(named, 5)}; a falling term has run past the "
            "measurements there: read such a prediction as near 0, and measure closer to the target before trusting it")
    if any(r.headline()[1] is not None for r in below):
        text += ("; a speedup or efficiency among them is shown with the figure from the call path's per-rank time "
                 "first (`from time` or `from cost`), its model's prediction beside it")
    return text


def beyond_ranks_warning(rows: Sequence["RankedModel"], at_text: str) -> str | None:
    """One warning naming the imbalance models that predict more than the target's rank count, which
    max/mean over that many ranks cannot exceed (`out_of_range`), or None."""
    named = [f"{r.fitted.callpath} {r.prediction:.4g}" for r in rows
             if r.fitted.metric == "imbalance" and r.out_of_range is not None]
    if not named:
        return None
    n = len(named)
    return (f"{n} imbalance model{'s' if n > 1 else ''} predict{'' if n > 1 else 's'} more at {at_text} than the "
            f"rank count, which max/mean over the ranks cannot exceed: {listing(named, 5)}; a growing term has run "
            "past the measurements there: read such a prediction as at most the rank count (one rank doing all "
            "the work), and measure closer to the target before trusting it")


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
) -> Ranking:
    """The models worst-scaling first; `units` maps (call path, metric) to the unit of its values.
    `held`: the parameters a point filter left with one value (`Dataset.held`), which the target
    holds too: a `ranks` held so bounds an imbalance (`out_of_range`; review 92 LOW-1).

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
            preds.append(float(fm.predict(point)[0]))
    by_key = {(fm.callpath, fm.metric): v for fm, v in zip(models, preds)}
    for fm in companions:
        with np.errstate(all="ignore"):
            by_key.setdefault((fm.callpath, fm.metric), float(fm.predict(point)[0]))
    at_text = point_text(parameters, [float(at[p]) for p in parameters])
    target = {p: float(at[p]) for p in parameters}
    left_out = [_pass_predictions(fm, target) for fm in models]
    ranges = _ranges(models, target, preds, left_out)
    range_of = _all_ranges(models, ranges, companions, by_key, target)
    sums = parts_sums(by_key, range_of, combine)
    # the rows keep the growths of this first pass; the sums are made again with the wholes that
    # their parts outgrow (review 80), so that the shares, the figures and the run time agree, until
    # no more are: a caller judged on a child's figure from before (review 84 MED-2)
    slower = parts_growths([*models, *companions], sums, by_key)
    outgrown = outgrown_wholes([*models, *companions], sums, by_key, range_of, slower)
    while outgrown - {cp for cp, c in sums.items() if c.outgrown}:
        sums = parts_sums(by_key, range_of, combine, outgrown)
        again = parts_growths([*models, *companions], sums, by_key)
        outgrown = outgrown | outgrown_wholes([*models, *companions], sums, by_key, range_of, again)
    parts_checks = check_parts(by_key, sums)
    some = dict(run_shares.some_ranks) if run_shares is not None else {}
    # the time of the ranks that ran a call path only some ranks ran: its cost model over ranks, where
    # speedup, efficiency and cost derive from a per-rank time (`baselines`)
    per_rank = _ranks_that_ran_it([*models, *companions], some, parameters, point, at, largest) \
        if baselines is not None else {}
    derived = derived_predictions(models, companions, at, parameters, baselines, some)
    blamed = blamed_parts([*models, *companions], by_key, sums)
    share_of = _shares(measured, models, companions, by_key, range_of, sums, run_shares, blamed)
    own_of = _own_shares(measured, models, ranges, by_key, share_of, run_shares, blamed, sums)
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
        g, falls = target_growth(fm.model, parameters, at, largest)
        ranks_model, ranks_pred, ranks_growth = per_rank.get(fm.callpath, (None, None, None)) \
            if fm.metric == "time" else (None, None, None)
        rows.append(RankedModel(fm, g, pred, low, high, unit, parts, rng, ft, share,
                                blamed.get((fm.callpath, fm.metric)), figure, combine,
                                check is None or check.with_exclusive,
                                slower.get(fm.callpath) if fm.metric == "time" else None, refits, falls,
                                ranks_text(some[fm.callpath]) if fm.callpath in some else None,
                                ranks_model, ranks_pred, ranks_growth,
                                out_of_range(fm.metric, pred, {**(held or {}), **at})))

    def key(r: RankedModel) -> tuple:
        # for speedup and efficiency a falling model is the bad one: rank it as a growing time
        sign = -1.0 if r.fitted.metric in HIGHER_IS_BETTER else 1.0
        value = r.rank_value()
        pred = sign * value if math.isfinite(value) else -math.inf
        g = r.rank_growth()
        # a growth of its own before the same growth taken from parts: the region that grows so
        # ahead of the callers it lifts (review 71 F3: `main`, with the larger time, came first)
        return (-sign * g[0], -sign * g[1], r.parts_growth is not None, -pred, r.fitted.callpath, r.fitted.metric)

    rows.sort(key=key)
    kept = kept_callpaths(share_of, min_share)

    def shown_row(r: RankedModel) -> bool:
        # a call path's own time is kept when the call path is (one without a `time` share always
        # is: review 27, an Extra-P input of exclusive times only), and takes the fraction itself
        cp = r.fitted.callpath
        return r.share is None or ((cp in kept or cp not in share_of) and r.share.kept(min_share))

    shown = [r for r in rows if shown_row(r)]
    left_out = [r for r in rows if not shown_row(r)]
    # the warnings speak of the models shown only (review 18: "(70 models)" with 20 shown), also
    # after `Ranking.top` (review 45)
    about_rows = _RowWarnings(tuple(warnings), model_notes, tuple(parts_checks), at_text, nonnegative, by_key,
                              measured, tuple(parameters))
    return Ranking(tuple(parameters), dict(at), tuple(shown), about_rows(shown), min_share, tuple(left_out),
                   about_rows)


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
                value = float(fm.predict(point)[0])
            out[fm.callpath] = (fm.model, value, target_growth(fm.model, parameters, at, largest)[0])
    return out


def out_of_range(metric: str, prediction: float, at: Mapping[str, float]) -> str | None:
    """Why a prediction of `metric` at `at` cannot be, or None: a speedup or efficiency below zero
    (a ratio of times), an imbalance (max/mean over the ranks) above the target's rank count, which
    it cannot exceed (review 88 LOW-2: imbalance 29.7 at 8 ranks). Other metrics below
    zero are named by `below_zero_warning` where their values are never below it."""
    if not math.isfinite(prediction):
        return None
    if metric in HIGHER_IS_BETTER and prediction < 0:
        return "below zero"
    if metric == "imbalance":
        ranks = at.get(RANKS_PARAMETER)
        if ranks is not None and prediction > ranks * (1 + 1e-6):  # (1 + 1e-15 * ranks is ranks: one rank works)
            return f"above {param_text(ranks)}, the most max/mean over {param_text(ranks)} ranks can be"
    return None


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
    doubtful = {fm.callpath for fm, _ in own if (fm.callpath, fm.metric) in blamed or _worse_than_constant(fm)}
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
            blamed: Collection[tuple[str, str]] = ()) -> dict[str, Share]:
    """Each call path's share of the run's time (`modeler.share`): measured in `measured` (and
    `run_shares`), and at the target from the `time` models (the low end from their 80% ranges;
    none from a doubtful one, `doubt`, or one `blamed` for its caller's contradiction), or from
    their parts' sums where clearly above them (`_time_figures`)."""
    if not measured:
        return {}
    def doubtful_time(fm: FittedModel) -> bool:
        check = sums.get(fm.callpath)
        if check is None:
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
