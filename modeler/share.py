"""How much of the run's time a call path takes, and `--min-share`: leave the small ones out of the
ranking.

The ranking sorts by growth first, so a millisecond init function whose noisy values happen to fit
`width^3 * log2(width)` ranks above the training step. What a performance engineer asks is which
function *that matters* scales worst; a call path matters when it takes a fair share of the run's
time, now or at the target point:

- measured: at every measured point, its `time` over the run's time there. The run's time of a rank
  is the longest top-level region of its main process, as the report's run time: top-level
  regions of threads run beside the main one, so they are not summed, and those of a rank's
  DataLoader and multiprocessing workers are no candidates (summed over the rank's worker
  processes, they can exceed the run several times). From runs (`Dataset.run_shares`) the share is
  taken per rank and the rank where it is largest counts, so that a region of rank 0 only is not
  divided by the ranks as its mean over ranks would be; from Extra-P inputs, the median over the
  repetitions over the longest top-level call path's. Its share is the largest over the points,
  so a region that grows into the run at the large points is never left out;
- at the target (`--at`): its time model's prediction over the longest prediction of a top-level
  call path's time model (the main processes' where known), from the low end of the call path's
  80% range (`modeler.uncertainty`), so that a poor fit extrapolated far (a millisecond with a
  cubic term) does not keep it, while a region that is small at the measured points but clearly
  grows into the run at the target is kept. A region's time is part of its caller's: the share at
  the target is at most the parent's; and a doubtful time model (`parts_growth.doubt`) keeps nothing
  at the target.

A call path is left out when both are below the fraction, and whenever its parent is left out
(`kept_callpaths`). The share of a call path's time stands
for all its metrics (visits, bytes, imbalance, speedup ...): a region that takes no time does not
matter whatever else it does. Its exclusive time must take the share itself as well (`own_shares`). A call path without a `time` series (Extra-P inputs of other metrics)
has no share and is always kept.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

from .dataset import RunShares, Series
from .errors import InputError

#: the default of `--min-share`: Score-P and TAU users look at regions above 1% of the run as well
DEFAULT_MIN_SHARE = 0.01
SEPARATOR = "->"


@dataclass(frozen=True)
class Share:
    """A call path's share of the run's time: the largest over the measured points, and at the target
    (its prediction, and the low end of its 80% range; None where there is no time model or no run
    time at the target)."""

    measured: float | None
    at_target: float | None = None
    at_target_low: float | None = None
    #: False where the time model is doubtful (worse than a constant, or contradicted by its parts'):
    #: its share at the target then keeps nothing
    trusted: bool = True

    def kept(self, fraction: float) -> bool:
        if fraction <= 0:
            return True
        if self.measured is None:  # no run time where it was measured: its share at the target, if any
            low = self.at_target_low if self.at_target_low is not None else self.at_target
            return low is None or low >= fraction
        if self.measured >= fraction:
            return True
        if not self.trusted:
            return False
        low = self.at_target_low if self.at_target_low is not None else self.at_target
        return low is not None and low >= fraction

    def to_json(self) -> dict:
        return {"measured": _finite(self.measured), "at_target": _finite(self.at_target),
                "at_target_low": _finite(self.at_target_low), "at_target_trusted": self.trusted}


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


_FRACTION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(%?)\s*")


def parse_min_share(text: str | float | None, option: str = "--min-share") -> float:
    """`0.01` or `1%` -> 0.01; None -> the default. Errors name `option`."""
    if text is None:
        return DEFAULT_MIN_SHARE
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, percent = float(text), False
    else:
        m = _FRACTION.fullmatch(str(text))
        if not m:
            raise InputError(f"{option}: {text!r} is not a fraction of the run's time (examples: {option} 0.01, "
                             f"{option} 1%, {option} 0 to show every call path)")
        value, percent = float(m.group(1)), bool(m.group(2))
    if percent:
        value /= 100.0
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{option}: {text!r} must be a fraction from 0 to 1 (0 shows every call path)")
    if value == 1 and not percent and isinstance(text, str):
        raise InputError(f"{option}: {text!r} would leave out every call path but the longest (1 is the whole run): "
                         f"for 1%, write 0.01 or 1%; for the whole run, 100%")
    if value > 1:
        hint = f" (for {value:g}%, write {value / 100:g} or {value:g}%)" if value <= 100 and not percent else ""
        raise InputError(f"{option}: {text!r} is more than the whole run: give a fraction from 0 to 1{hint}")
    return value


def percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def run_time_series(series: Sequence[Series], roots: Collection[str] | None = None) -> list[Series]:
    """The `time` series of the top-level call paths that the run's time is taken from: the main
    processes' (`roots`) where known."""
    top = [s for s in series if s.metric == "time" and SEPARATOR not in s.callpath]
    main = [s for s in top if roots is not None and s.callpath in roots]
    return main or top


def measured_shares(series: Sequence[Series], run_shares: RunShares | None = None,
                    metric: str = "time") -> dict[str, float]:
    """Per call path with a `metric` series (`time`, or `exclusive_time`: its own time): its largest
    share of the run's time over the measured points. From runs (`run_shares`): its value on the
    rank where the share is largest over that rank's run time (the longest top-level region of its
    main process); a call path measured only on ranks whose run time is unknown has none. Otherwise
    (Extra-P inputs): its value (the median of the repetitions) over the longest top-level call
    path's time there; points where no top-level call path was measured, or where the run took no
    time, say nothing."""
    roots = run_shares.main_roots if run_shares is not None else None
    total: dict[tuple[float, ...], float] = {}
    for s in run_time_series(series, roots):
        for pt, v in zip(s.points, s.values("median")):
            key = tuple(map(float, pt))
            if math.isfinite(v):
                total[key] = max(total.get(key, 0.0), float(v))
    out: dict[str, float] = {}
    from_runs = run_shares.of(metric) if run_shares is not None else {}
    for s in series:
        if s.metric != metric:
            continue
        if s.callpath in from_runs:
            out[s.callpath] = float(from_runs[s.callpath])
            continue
        if run_shares is not None:
            # from runs, a call path without a run share was measured only on ranks whose run time is
            # unknown (no end record: their top-level region may never have been written); over the
            # top-level series at its points its share was 350 (a 2 us helper standing for the run,
            # review 136 finding 3): it has none, and --min-share judges it at the target
            continue
        shares = [float(v) / total[k] for pt, v in zip(s.points, s.values("median"))
                  if total.get(k := tuple(map(float, pt)), 0.0) > 0 and math.isfinite(v)]
        if shares:
            out[s.callpath] = max(shares)
    return out


def predicted_run_time(time_predictions: Mapping[str, float], roots: Collection[str] | None = None) -> float | None:
    """The run's time at the target: the longest prediction of a top-level call path's time, of the
    main processes' (`roots`) where known."""
    top = {cp: v for cp, v in time_predictions.items() if SEPARATOR not in cp and math.isfinite(v)}
    main = [v for cp, v in top.items() if roots is not None and cp in roots]
    total = max(main or top.values(), default=math.nan)
    return total if total > 0 else None


def parent(callpath: str) -> str | None:
    return callpath.rsplit(SEPARATOR, 1)[0] if SEPARATOR in callpath else None


def shares(measured: Mapping[str, float], predictions: Mapping[str, float],
           lows: Mapping[str, float | None], roots: Collection[str] | None = None,
           doubtful: Collection[str] = ()) -> dict[str, Share]:
    """Every call path's `Share`: `measured` from `measured_shares`; `predictions` and `lows`: each
    call path's time prediction at the target and the low end of its 80% range there; `roots`: the
    main processes' top-level call paths (the run's time), where known; `doubtful`: the call paths
    whose time model is doubtful (`parts_growth.doubt`), whose share at the target keeps nothing.

    A region's time is part of its caller's: the share at the target of a call path is at most its
    parent's (where the parent has one), so a wild fit of a child cannot outgrow its caller's."""
    total = predicted_run_time(predictions, roots)
    out: dict[str, Share] = {}
    for cp in sorted({*measured, *predictions}, key=lambda c: c.count(SEPARATOR)):
        at = low = None
        if total is not None and cp in predictions and math.isfinite(predictions[cp]):
            at = predictions[cp] / total
            lo = lows.get(cp)
            low = min(lo, predictions[cp]) / total if lo is not None and math.isfinite(lo) else None
            up = out.get(parent(cp) or "")
            if up is not None and up.at_target is not None:
                at = min(at, up.at_target)
                low = None if low is None else min(low, up.at_target_low if up.at_target_low is not None
                                                   else up.at_target)
        out[cp] = Share(measured.get(cp), at, low, cp not in doubtful)
    return out


def own_shares(measured: Mapping[str, float], predictions: Mapping[str, float],
               lows: Mapping[str, float | None], of_callpaths: Mapping[str, Share],
               roots: Collection[str] | None, time_predictions: Mapping[str, float],
               doubtful: Collection[str] = ()) -> dict[str, Share]:
    """The `Share` of each call path's exclusive time (review 20: under `--metric exclusive_time` an
    evaluation function whose own time was 0.03% of the run was ranked first, on its loop's share):
    `measured` from `measured_shares(..., metric="exclusive_time")`, `predictions` and `lows` of
    the exclusive time models at the target, the run's time at the target from `time_predictions`.
    A call path's own time is part of its time: its share at the target is at most the call path's
    (`of_callpaths`)."""
    total = predicted_run_time(time_predictions, roots)
    out: dict[str, Share] = {}
    for cp in {*measured, *predictions}:
        at = low = None
        if total is not None and cp in predictions and math.isfinite(predictions[cp]):
            at = predictions[cp] / total
            lo = lows.get(cp)
            low = min(lo, predictions[cp]) / total if lo is not None and math.isfinite(lo) else None
            whole = of_callpaths.get(cp)
            if whole is not None and whole.at_target is not None:
                at = min(at, whole.at_target)
                cap = whole.at_target_low if whole.at_target_low is not None else whole.at_target
                low = None if low is None else min(low, cap)
        out[cp] = Share(measured.get(cp), at, low, cp not in doubtful)
    return out


def kept_callpaths(of: Mapping[str, Share], fraction: float) -> set[str]:
    """The call paths `of` keeps at `fraction` (`Share.kept`): never one whose parent (the nearest
    enclosing call path with a share) is left out, since its time is part of the parent's."""
    kept: set[str] = set()
    for cp in sorted(of, key=lambda c: c.count(SEPARATOR)):
        up = parent(cp)
        while up is not None and up not in of:
            up = parent(up)
        if of[cp].kept(fraction) and (up is None or up in kept):
            kept.add(cp)
    return kept


def left_out_note(count: int, fraction: float, own_only: int = 0) -> str:
    """`12 call paths under 1% of the run's time (at every measured point and at the target) left out;
    --min-share 0 shows all`; `own_only`: call paths shown whose exclusive time was left out (review 27:
    they were counted as left out)."""
    said = []
    if count:
        said.append(f"{count} call path{'s' if count != 1 else ''} under {percent(fraction)} of the run's time (at "
                    f"every measured point and at the target) left out")
    if own_only:  # review 121 LOW-8: "... of 8 call paths shown (...) left out" read as the call paths left out
        said.append(f"the exclusive time of {own_only} of the call paths shown left out (its own time under "
                    f"{percent(fraction)})")
    return "; ".join(said) + "; --min-share 0 shows all"


def share_series(data: Sequence[Series], measured: Sequence[Series], min_points: int = 3) -> list[Series]:
    """The `time` series of `measured` that `data` lacks and the shares at the target need: those of
    the top-level call paths (the run's time), of the call paths `data` holds other metrics of, and
    of their callers (a call path's share at the target is capped by its parent's, and one whose
    parent has no share there is left out with it: `kept_callpaths`). Fitted beside `data`, not shown."""
    have = {(s.callpath, s.metric) for s in data}
    wanted: set[str] = set()
    for s in data:
        cp: str | None = s.callpath
        while cp is not None and cp not in wanted:
            wanted.add(cp)
            cp = parent(cp)
    return [s for s in measured
            if s.metric == "time" and (s.callpath, "time") not in have and s.n_points >= min_points
            and (SEPARATOR not in s.callpath or s.callpath in wanted)]
