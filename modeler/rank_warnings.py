"""The ranking's warnings about its rows' models and predictions: poor fits, models that miss their
own measurements, predictions below zero or beyond what the metric can be at the target, parts of
a step above the step. Each names the models concerned, at most a few (`listing`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Collection, Mapping, Sequence

from .dataset import RANKS_PARAMETER
from .derived import HIGHER_IS_BETTER
from .listing import listing
from .misfit import LACK_PREFIX, MISS_FACTOR, MISS_PREFIX
from .pointtext import param_text, point_text

if TYPE_CHECKING:
    from .ranking import RankedModel


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


#: at most this many rows are named, with their values, in a warning about parameters with two values
LEVEL_ROWS_NAMED = 10


def level_warnings(rows: Sequence["RankedModel"]) -> list[str]:
    """One warning per parameter with two measured values (and the level modeled, if any) naming the
    rows whose values differ between them beyond their noise, each with its value at both levels
    (`modeler.levels`; review 128 MED-1: one generic "modeled as constant in ranks" for 17 models,
    two of whose values doubled with ranks)."""
    groups: dict[tuple, list] = {}
    for r in rows:
        for e in getattr(r.fitted, "levels", ()):
            groups.setdefault((e.parameter, e.levels, e.modeled_at), []).append((r.fitted, e))
    out = []
    for (p, (a, b), at), found in groups.items():
        found.sort(key=lambda fe: -abs(math.log(fe[1].ratio)))
        n, places = len(found), {e.where for _, e in found}
        once = len(places) == 1 and next(iter(places))  # the point of the values, said once where it is one
        named = [f"{fm.callpath} ({fm.metric}): {e.values_text(where=not once)}" for fm, e in found]
        where = f" (values at {point_text(dict(once))}; ratios over the points measured at both)" if once else ""
        whose = "models'" if n > 1 else "model's"
        head = (f"{n} {whose} values differ between {p}={param_text(a)} and {p}={param_text(b)} "
                f"beyond their noise ({p} was measured at 2 values, too few for a term){where}: "
                f"{listing(named, LEVEL_ROWS_NAMED)}; ")
        if at is not None:
            out.append(head + f"{'they are' if n > 1 else 'it is'} modeled on the runs at {p}={param_text(at)} alone, "
                              f"the target's value: {'their' if n > 1 else 'its'} predictions hold for {p}={param_text(at)} "
                              f"only; measure a third value of {p} to model how {'they' if n > 1 else 'it'} change{'' if n > 1 else 's'} with it")
        else:
            out.append(head + f"{'their models lie' if n > 1 else 'its model lies'} between the two levels and do"
                              f"{'' if n > 1 else 'es'} not follow {p} (marked !; the 80% range holds each level's "
                              f"model): {'their' if n > 1 else 'its'} predictions away from those levels are guesses; "
                              f"measure a third value of {p}, or give --at one of its two values")
    return out
