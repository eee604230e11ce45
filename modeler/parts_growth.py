"""A `time` model checked against its parts' (its exclusive time and its children's times) in the
ranking: where they contradict it at the target (`doubt`), which part is charged with it
(`blamed_parts`), and where they contradict its growth (`parts_growths`, `outgrown_wholes`): a sum
grows no faster than its fastest part and no slower than the parts carrying most of it. The sums
themselves are `modeler.parts`'.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Collection, Iterable, Mapping, Sequence

from .growth import growth, growth_text
from .level_growth import LEVEL
from .listing import listing
from .model import FittedModel
from .parts import SEPARATOR, PartsCheck, disagrees, times

if TYPE_CHECKING:
    from .ranking import RankedModel

#: a time model whose parts' models (exclusive time + children) differ from it by more than this
#: factor at the target is marked doubtful in the ranking
PARTS_DISAGREE = 2.0


def doubt(fm: FittedModel, prediction: float, from_parts: float | None, combine: str = "mean",
          with_exclusive: bool = True) -> str | None:
    """Why a model's growth is not to be read as it stands, or None: a fit worse than a constant, one
    that misses its own measurements (`modeler.misfit`), or a time model that its parts' models
    (`from_parts`) contradict at the target (review 15: a noisy
    18 ms region led the ranking with adj. R² -0.2 and parts 52x apart). Under `--ranks max`
    (`combine`) a whole below its parts is none, under `min` one above them, and without its
    exclusive time (`with_exclusive`) one above them neither (`parts.PartsCheck`)."""
    if worse_than_constant(fm):
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
                 sums: Mapping[str, PartsCheck], unsettled: Collection[str] = ()) -> dict[tuple[str, str], str]:
    """The parts charged with a whole/parts contradiction, with why: where a call path's `time`
    model and its parts' (`doubt`) disagree, which of them is wrong cannot be told from the numbers
    alone, so the whole is marked, and so is the part whose fit is the poorest when it is poorer than
    the whole's (none where the whole is a constant below its parts) (review 18: a loop was marked while the constant that its child's clearly growing,
    noisy values were fitted with, SMAPE 60%, was not). None for the call paths in `unsettled`,
    whose contradiction a growth the data do not settle makes (`unsettled_contradictions`). Keys:
    (call path, metric) of the part."""
    fitted = {(fm.callpath, fm.metric): fm for fm in models}
    children = _time_children(fitted)
    out: dict[tuple[str, str], str] = {}
    for cp, check in sums.items():
        whole = fitted.get((cp, "time"))
        if whole is None or cp in unsettled or worse_than_constant(whole) or contradiction(
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
                  predictions: Mapping[tuple[str, str], float] | None = None,
                  unsettled: Collection[tuple[str, str]] = (),
                  minor: Mapping[tuple[str, str], tuple[float, float]] | None = None) -> dict[str, tuple[float, float]]:
    """Per call path whose `time` model's growth its parts (its exclusive time and its children's
    times) contradict, the growth its parts give it. A child's own figure here is its parts' where
    it has one; a part whose growth the data do not settle (`unsettled`: (call path, metric), from
    `level_growth.unsettled_growths`) is level, as its row is ranked (review 109 F3: a near-flat
    child fitted n^2 * log2(n)^2, ranked level itself, ranked its constant parent first, above a
    region with 16000x its time); a model whose fastest term carries little of its value at the
    target grows as the terms that carry it, whole or part (`minor`: (call path, metric) -> that
    growth, from `minor_terms.minor_growths`; review 123 LOW-5); deepest first. Two ways:

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
        parts = [(g, v) for g, v, _ in _parts(cp, fitted, children[cp], sums, values, out, unsettled=unsettled,
                                              minor=minor)]
        mine = (minor or {}).get((cp, "time"), growth(whole.model))
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
                    growths: Mapping[str, tuple[float, float]],
                    unsettled: Collection[tuple[str, str]] = (),
                    minor: Mapping[tuple[str, str], tuple[float, float]] | None = None) -> set[str]:
    """The call paths whose `time` model grows slower than parts that carry `HEAVY_PARTS` of its
    time at the target (`growths`, from `parts_growths` with the same `unsettled` and `minor`, above
    its own growth), and do so even at
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
        mine = (minor or {}).get((cp, "time"), growth(whole.model)) if whole is not None else None
        if whole is None or cp not in sums or cp not in children or not faster > mine:
            continue
        parts = [(g, v if low is None else low)
                 for g, v, low in _parts(cp, fitted, children[cp], sums, predictions, growths, ranges, unsettled, minor)]
        # half of the whole's high end, not of its prediction (review 84 MED-1: a part of range 6 to
        # 394 s made a flat 10 s run, range 6.2 to 13.8 s, 3.4 min)
        check = sums[cp]
        high = check.time_figure() if check.whole_high is None else max(check.time_figure(), check.whole_high)
        heavy = _heavy_growth(parts, high, check.combine == "mean")
        if heavy is not None and heavy > mine:
            out.add(cp)
    return out


def _parts(cp: str, fitted: Mapping[tuple[str, str], FittedModel], children: Sequence[str],
           sums: Mapping[str, PartsCheck], values: Mapping[tuple[str, str], float],
           growths: Mapping[str, tuple[float, float]],
           ranges: Mapping[tuple[str, str], tuple[float, float] | None] | None = None,
           unsettled: Collection[tuple[str, str]] = (),
           minor: Mapping[tuple[str, str], tuple[float, float]] | None = None,
           ) -> list[tuple[tuple[float, float], float, float | None]]:
    """(growth, time at the target, the low end of its 80% range or None) of each part of `cp`:
    its exclusive time where modeled, and each child, with the growth its own parts give it
    (`growths`) and its figure (`_figure`); level where its own growth is not settled (`unsettled`),
    that of the terms carrying its value where its fastest term is minor (`minor`)."""
    def own_growth(key: tuple[str, str]) -> tuple[float, float]:
        return LEVEL if key in unsettled else (minor or {}).get(key, growth(fitted[key].model))

    def low(key: tuple[str, str]) -> float | None:
        rng = (ranges or {}).get(key)
        value = values.get(key, math.nan)
        return None if rng is None or not math.isfinite(value) else max(0.0, min(rng[0], value))

    own = fitted.get((cp, "exclusive_time"))
    out = [(own_growth((cp, "exclusive_time")), values.get((cp, "exclusive_time"), math.nan),
            low((cp, "exclusive_time")))] if own is not None else []
    for kid in children:
        kid_low = sums[kid].figure_low if kid in sums else low((kid, "time"))
        out.append((growths[kid] if kid in growths else own_growth((kid, "time")), _figure(kid, sums, values), kid_low))
    return out


def unsettled_contradictions(sums: Mapping[str, PartsCheck], predictions: Mapping[tuple[str, str], float],
                             level_sums: Mapping[str, PartsCheck],
                             level_predictions: Mapping[tuple[str, str], float]) -> set[str]:
    """The call paths whose `time` model and parts' sum contradict each other at the target
    (`contradiction`) only through a growth the data do not settle: made again with every such
    model at its value were it level (`level_predictions`, `level_growth.level_ends`, and the sums
    of those, `level_sums`), they agree. Such a contradiction is no sign against the whole's model
    (`doubt`) nor against a part's (`blamed_parts`): the unsettled model is ranked level and says so
    itself (review 109 F3: a flat `main` was marked `!` because its near-flat child, fitted n^2 *
    log2(n)^2 and ranked level, extrapolated to 88x its time). One that only the level values make
    is not counted either: a contradiction is counted where it holds both ways, the same way round
    (review 123 LOW-4: a whole below its parts, above them with the level values, was counted)."""
    out = set()
    for cp, check in sums.items():
        level = level_sums.get(cp)
        if level is None:
            continue
        whole = predictions.get((cp, "time"), math.nan)
        if contradiction(whole, check.parts, check.combine, check.with_exclusive) is None:
            continue
        level_whole = level_predictions.get((cp, "time"), whole)
        if contradiction(level_whole, level.parts, level.combine, level.with_exclusive) is None \
                or (level_whole < level.parts) != (whole < check.parts):
            out.add(cp)
    return out


def settled_checks(checks: Iterable[PartsCheck], level_sums: Mapping[str, PartsCheck]) -> list[PartsCheck]:
    """Of the whole/parts contradictions `checks` (`parts.check_parts`), those that also stand in
    `level_sums`, the sums made again with every growth the data do not settle taken level
    (`unsettled_contradictions`), the same way round: the warning names no contradiction that such a
    growth alone makes (review 123 LOW-4: a whole below its parts was named at one target because the
    level values put it above them, and not at a larger one, where they put it within bounds)."""
    out = []
    for c in checks:
        level = level_sums.get(c.callpath)
        if level is None or (level.contradicts() and (level.whole < level.parts) == (c.whole < c.parts)):
            out.append(c)
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
             for r in rows if r.fitted.metric == "time" and r.parts_growth is not None and r.parts_growth < r.growth]
    if not named:
        return None
    n = len(named)
    return (f"{n} time model{'s' if n > 1 else ''} grow{'' if n > 1 else 's'} faster than every one of "
            f"{'their' if n > 1 else 'its'} parts (exclusive time and children), which a sum cannot: "
            f"{'they are' if n > 1 else 'it is'} ranked by the fastest part's growth, marked (parts): "
            f"{listing(named, 5)}; the whole's model or its parts' extrapolate wrongly, and which one the "
            f"measurements do not say (review 108: the parts' sum was as far off as the whole's): compare "
            f"both with a larger run")


def slower_than_parts_warning(rows: Sequence[RankedModel]) -> str | None:
    """One warning naming the rows ranked by their heavy parts' faster growth (`parts_growths`), or None."""
    named = [f"{r.fitted.callpath} ({growth_text(r.growth)}, parts {growth_text(r.parts_growth)})"
             for r in rows if r.fitted.metric == "time" and r.parts_growth is not None and r.parts_growth > r.growth]
    if not named:
        return None
    n = len(named)
    return (f"{n} time model{'s' if n > 1 else ''} grow{'' if n > 1 else 's'} slower than parts that carry "
            f"at least {HEAVY_PARTS:.0%} of {'their' if n > 1 else 'its'} time at the target, which a sum "
            f"cannot: {'they are' if n > 1 else 'it is'} ranked by those parts' growth, marked (parts): "
            f"{listing(named, 5)}; {'their models likely underestimate' if n > 1 else 'its model likely underestimates'} "
            f"larger runs, or the parts' models overestimate them: compare both with a larger run")


def _time_children(fitted: Mapping[tuple[str, str], FittedModel]) -> dict[str, list[str]]:
    """Call path -> its children that have a `time` model in `fitted` (keyed by (call path, metric))."""
    children: dict[str, list[str]] = {}
    for cp, metric in fitted:
        if metric == "time" and SEPARATOR in cp:
            children.setdefault(cp.rsplit(SEPARATOR, 1)[0], []).append(cp)
    return children


def worse_than_constant(fm: FittedModel) -> bool:
    return math.isfinite(fm.ar2) and fm.ar2 < 0 and bool(fm.model.terms)
