"""Turn runs, the fitted dataset and its models into the report's findings (numbers and charts).

Both output formats render the same `Report`, so the HTML page and the markdown text never
disagree. Charts are prepared as inline SVG by the view modules; the templates only lay them out.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Collection, Mapping, Sequence

import numpy as np

from ..pointtext import param_text, point_text
from ..dataset import RANKS_PARAMETER, Dataset, RunShares, Series
from ..derived import Baselines
from ..errors import InputError
from ..estimator import MIN_POINTS
from ..listing import listing
from ..model import FittedModel
from ..parts import combination, disagrees, times
from ..readers.runs import ODD
from . import svg
from ..target_point import parse_assignments
from ..share import parse_min_share
from .findings import Report, ReportOptions, value_formatter
from .ranks import call_tree_view, check_rank, choose_run, imbalance_view, run_point
from .regions import rank_regions, region_view
from .runs import PER_RUN_KEYS, RunGroup
from .training import scaling_view, training_view

__all__ = ["Report", "ReportOptions", "build_report", "check_options", "headline_series", "main_roots",
           "parse_assignments"]


def _about_other_metric(warning: str, metric: str, metrics: Sequence[str]) -> bool:
    """Readers warn per metric ("1 'speedup' series ..."); the report shows one metric."""
    from ..aggregate import METRICS

    names = set(metrics) | set(METRICS)
    return any(f"'{m}'" in warning for m in names if m != metric) and f"'{metric}'" not in warning


def _check_names(names: Mapping[str, float], parameters: Sequence[str], option: str) -> None:
    unknown = [n for n in names if n not in parameters]
    if unknown:
        raise InputError(
            f"{option}: unknown parameter(s) {', '.join(unknown)}; the runs have {', '.join(parameters) or 'none'}"
        )


def _env_text(v: object) -> str:
    """A header value for the Environment row: a mapping as `calls=100000, ns=10000` (review 86
    LOW-9: the throttle's settings showed as a Python dict), a list as its items."""
    if isinstance(v, dict):
        return ", ".join(f"{k}={_env_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_env_text(x) for x in v) + "]"
    return str(v)


def _unmeasured_hold(name: str, value: float, measured: Sequence[float]) -> str:
    """The warning for `--hold NAME=VALUE` at a value that no run measured (review 86 LOW-9: the
    charts fell back to another value, said in their titles only)."""
    shown = listing([param_text(v) for v in measured], 8)
    return (f"--hold {name}={param_text(value)}: {name} was not measured there (measured: {shown}); each chart "
            f"holds {name} where it has the most points, as its title says")


def _about_failed_run(warning: str, failed: set[str]) -> bool:
    """Whether `warning` is the readers' "run X left out (...)" of a run the report lists as left out."""
    head, sep, _ = warning.partition(" left out (")
    return bool(sep) and head.startswith("run ") and head[4:] in failed


def check_options(groups: Sequence[RunGroup], parameters: Sequence[str], opt: ReportOptions) -> None:
    """Raise `InputError` naming the option for every choice that the runs cannot satisfy."""
    if opt.top < 1:
        raise InputError(f"--top: must be at least 1, got {opt.top}")
    _check_names(opt.target or {}, parameters, "--at")
    _check_names(opt.hold or {}, parameters, "--hold")
    ok = [g for g in groups if g.ok] or list(groups)
    chosen = choose_run(ok, opt.run_id)
    if opt.rank is not None and chosen is not None:
        check_rank(chosen, opt.rank)


def build_report(
    groups: Sequence[RunGroup],
    dataset: Dataset,
    models: Sequence[FittedModel],
    options: ReportOptions | None = None,
    companions: Sequence[FittedModel] = (),
    baselines: Baselines | None = None,
    series_read: Sequence[Series] = (),
    run_shares: RunShares | None = None,
) -> Report:
    """All findings of the report; `models` are fitted on `dataset` (same order as its series);
    `companions` are models fitted only to check each time model against its parts (`modeler.parts`),
    to derive speedup, efficiency and cost from the per-rank time (with `baselines`, as `modeler fit`
    does: `modeler.derived`), and, under `--ranks sum` or `min`, the top-level regions' cost models
    that the run time is taken from (`headline_series`). `series_read`: every series read (default:
    `dataset`'s); their `time` gives each region's share of the run's time, and the regions under
    `options.min_share` are left out of the ranking (`Report.left_out`; `modeler.share`), with
    `run_shares` (default: `dataset`'s): what runs say of the run's time, its main processes."""
    opt = options or ReportOptions()
    params = tuple(dataset.parameters)
    metrics = dataset.metrics()
    metric = opt.metric
    if metrics and metric not in metrics:
        raise InputError(f"--metric: no metric {metric!r} in the runs; they have {', '.join(metrics)}")
    check_options(groups, params, opt)
    target = dict(opt.target or {})
    hold = dict(opt.hold or {})

    series = [s for s in dataset.series if s.metric == metric]
    by_key = {(m.callpath, m.metric): m for m in models}
    unit = next((s.unit for s in series if s.unit), "")
    fmt = value_formatter(metric, unit)

    all_points = np.vstack([s.points for s in series]) if series else np.zeros((0, len(params)))
    measured = {p: sorted({float(v) for v in all_points[:, i]}) for i, p in enumerate(params)}
    unmeasured_hold = [_unmeasured_hold(p, v, measured[p]) for p, v in hold.items() if p in measured and measured[p]
                       and v not in measured[p]]
    for p in params:
        if p not in target and measured[p]:
            target[p] = measured[p][-1]
        if p not in hold and measured[p]:
            hold[p] = measured[p][-1]
    min_share = parse_min_share(opt.min_share)
    from_runs = run_shares if run_shares is not None else dataset.run_shares  # None for Extra-P inputs
    ranking, left_out, folded, parts_notes = rank_regions(
        series, models, params, target, {p: v[-1] for p, v in measured.items() if v}, companions, baselines,
        measured=series_read or dataset.series, min_share=min_share, run_shares=from_runs,
        combine=combination(opt.ranks if from_runs is not None else "mean", opt.repetitions),
        repetitions=opt.repetitions)
    region_series = {s.callpath: s for s in series}

    regions = [
        region_view(r, region_series[r.callpath], by_key[(r.callpath, metric)], params, hold, target, fmt)
        for r in ranking[: opt.top]
    ]

    report = Report(
        title=opt.title,
        parameters=params,
        metric=metric,
        unit_format=fmt,
        target=target,
        hold=hold,
        ranking=ranking,
        regions=regions,
        left_out=left_out,
        min_share=min_share,
        warnings=unmeasured_hold
        + [w for w in dataset.warnings if not _about_other_metric(w, metric, metrics)]
        + folded
        + parts_notes,
    )
    _design(report, groups, params, measured, len(series))
    # a run the "Runs left out" list names is not named again among the warnings (review 86 LOW-9)
    failed = {run_id for run_id, _ in report.failed}
    report.warnings = [w for w in report.warnings if not _about_failed_run(w, failed)]
    ok_groups = [g for g in groups if g.ok]
    training_view(report, ok_groups, params, hold)
    scaling_view(report, ok_groups, params, hold)
    if metric == "time":
        _run_time(report, [*ranking, *left_out], root_stages(groups), companions, opt.ranks)
        # the call paths whose parts' sum holds their exclusive time (`parts.PartsCheck.with_exclusive`)
        exclusive = {fm.callpath for fm in [*models, *companions] if fm.metric == "exclusive_time"}
        report.predicted_caveats = _caveats(report, [*ranking, *left_out], series_read or dataset.series,
                                            per_rank=opt.ranks not in PER_RANK_FROM_COST,
                                            combine=combination(opt.ranks, opt.repetitions), exclusive=exclusive)
    chosen = choose_run(ok_groups or list(groups), opt.run_id)
    if chosen is not None:
        report.run_point = run_point(chosen, params, groups)
        imbalance_view(report, chosen)
        call_tree_view(report, chosen, opt.rank)
    return report


def main_roots(groups: Sequence[RunGroup]) -> set[str] | None:
    """Call paths of the top-level regions of the ranks' main processes in the completed runs (None
    without runs: Extra-P inputs say nothing of processes). The top-level regions of DataLoader
    workers and other processes a rank started are left out: they run in parallel with it."""
    if not groups:
        return None
    ok = [g for g in groups if g.ok] or list(groups)
    return {cp for g in ok for r in g.ranks for cp in r.roots()}


def root_stages(groups: Sequence[RunGroup]) -> list[set[str]] | None:
    """`main_roots` in the parts that ran one after the other: a process that replaced itself with
    os.exec* ran its images' top-level regions in turn, where those of one image (its threads') ran
    side by side. Regions found in one image together are one part; the parts, in the order first
    seen (None without runs)."""
    if not groups:
        return None
    ok = [g for g in groups if g.ok] or list(groups)
    parts: list[set[str]] = []  # disjoint; a set of roots found in one image joins the parts it meets
    for g in ok:
        for r in g.ranks:
            for roots in r.root_stages():
                if not roots:
                    continue
                met = [i for i, part in enumerate(parts) if part & roots]
                if not met:
                    parts.append(set(roots))
                    continue
                parts[met[0]] |= roots.union(*(parts[i] for i in met[1:]))
                parts = [part for i, part in enumerate(parts) if i not in met[1:]]
    return parts


def headline_series(dataset: Dataset, groups: Sequence[RunGroup], ranks: str) -> list:
    """Under `--ranks sum` or `min` the `time` series is not a time per rank: the `cost` series of
    the main processes' top-level regions (ranks x the mean time over ranks, `modeler.aggregate`),
    which the run time is taken from; fitted for that only."""
    if ranks not in PER_RANK_FROM_COST:
        return []
    roots = main_roots(groups)
    return [s for s in dataset.series
            if s.metric == "cost" and "->" not in s.callpath and (roots is None or s.callpath in roots)]


#: `--ranks` choices whose `time` is no time per rank: rank-seconds, the fastest rank's
PER_RANK_FROM_COST = ("sum", "min")


def _run_time(report: Report, ranking: Sequence, stages: list[set[str]] | None,
              companions: Sequence[FittedModel], ranks: str) -> None:
    """The headline run time at the target: the longest top-level region of the main process. Its
    regions' times are not summed: the top-level regions of other threads are merged into the
    process's profile (docs/format.md) and run in parallel with the main thread's, as workers do.
    Where the process replaced itself with os.exec* and its images had other top-level regions
    (`root_stages`), the longest of each image's are added up (review 52). Under `--ranks sum` or
    `min`, the mean time over ranks from the regions' cost models, as `modeler fit` derives cost
    there; without them (no `ranks` parameter), none, with a note saying why."""
    target = report.target
    roots = None if stages is None else set().union(*stages)
    candidates = [row for row in ranking if "->" not in row.callpath and (roots is None or row.callpath in roots)]
    if not candidates:
        if ranking and not any("->" not in row.callpath for row in ranking):
            # review 86 LOW-3: `--callpath '*Block*'` dropped the card without a word
            report.predicted_note = ("the regions selected (--callpath) leave out the top-level regions "
                                     "that the run time is taken from")
        return
    what = "the longest top-level region of the main process" if roots is not None else "the longest top-level region"
    if ranks in PER_RANK_FROM_COST:
        why = ("rank-seconds" if ranks == "sum" else "the fastest rank's")
        ranks_at = target.get(RANKS_PARAMETER)
        if not ranks_at:
            report.predicted_note = (
                f"under --ranks {ranks} a call path's time is {why}, not the time of a run, and without a "
                "ranks parameter there is no cost model to take the mean time per rank from")
            return
        names = {row.callpath for row in candidates}
        point = np.array([[target[p] for p in report.parameters]])
        with np.errstate(all="ignore"):
            costs = [(float(fm.model.evaluate(point)[0]), fm.callpath) for fm in companions
                     if fm.metric == "cost" and fm.callpath in names]
        costs = [(c, cp) for c, cp in costs if math.isfinite(c)]
        if not costs:
            report.predicted_note = (
                f"under --ranks {ranks} a call path's time is {why}, not the time of a run, and no cost model "
                "of a top-level region gives a finite value at the target")
            return
        (cost, callpath), others = _longest_per_part(costs, stages)
        cost += sum(c for c, _ in others)
        report.predicted_total, report.predicted_cost, report.predicted_root = cost / ranks_at, cost, callpath
        report.predicted_others = sum(c for c, _ in others) / ranks_at
        report.predicted_over = "mean over ranks"
        report.predicted_basis = (f"{what}; the mean over ranks, from its cost model: under --ranks {ranks} "
                                  f"its time is {why}") + _others_text(report, others, 1 / ranks_at)
        return
    finite = [(_figure(row), row.callpath, row) for row in candidates if math.isfinite(row.predicted)]
    if not finite:
        return
    (figure, _, row), others = _longest_per_part(finite, stages)
    report.predicted_others = sum(o[0] for o in others)
    report.predicted_total, report.predicted_root = figure + report.predicted_others, row.callpath
    if report.scaling_axis in target and roots is not None:
        # (not from Extra-P inputs, whose `time` may be a sum over ranks already: review 43)
        report.predicted_cost = report.predicted_total * target[report.scaling_axis]
    report.predicted_basis = what
    if roots is not None:
        report.predicted_over = "slowest rank" if ranks == "max" else "mean over ranks"
    if figure != row.predicted:
        report.predicted_model = float(row.predicted)
        report.predicted_basis = f"{what}, from its parts' models"
    report.predicted_basis += _others_text(report, others)


def _longest_per_part(items: Sequence[tuple], stages: list[set[str]] | None) -> tuple[tuple, list[tuple]]:
    """Of `items` ((figure, callpath, ...)), the largest of each part of `stages` (all one part where
    None): (the largest of those, the others')."""
    def key(it: tuple) -> tuple:
        return it[0], it[1]

    best = [max(mine, key=key) for part in stages or () if (mine := [it for it in items if it[1] in part])]
    top = max(best or items, key=key)
    return top, [it for it in best if it is not top]


def _others_text(report: Report, others: Sequence[tuple], scale: float = 1.0) -> str:
    """How the top-level regions of a process's other images (os.exec*) were added to the run time."""
    if not others:
        return ""
    added = ", ".join(f"{cp} ({report.unit_format(v * scale)})" for v, cp, *_ in others)
    return f"; plus the longest top-level region of each image the process ran before or after it (os.exec*): {added}"


def _figure(row) -> float:
    """A top-level region's time as the run's: its parts' sum where clearly above its model's
    prediction (`ranking.RankedModel.time_figure`), else that prediction."""
    return float(row.time_figure) if row.time_figure is not None else float(row.predicted)


#: a run time whose model and its parts' models differ by more than this factor gets a caveat
PARTS_DISAGREE = 2.0
#: a run time predicted at a measured point is said to disagree with it outside these ratios
MEASURED_AGREES = (1 / 1.5, 1.5)
#: a region predicted above this many times the run time it is part of contradicts it
INSIDE_ABOVE = 1.2


def _caveats(report: Report, ranking: Sequence, series: Sequence, per_rank: bool = True,
             combine: str = "mean", exclusive: Collection[str] | None = None) -> list[str]:
    """What makes the headline run time doubtful, said next to it: a parameter that the target
    moves but that its model holds constant (too few values); a prediction far from what was
    measured at the target itself, or below the most measured where the target lies beyond it with
    such a parameter; and a model that its parts' models contradict at the target (review 15: two
    values of ranks pooled into a constant of 4 s, where 8.3 s had been measured and the step loop
    alone predicted 28 s); and a model that misses its own measurements (`modeler.misfit`). `per_rank`: the run time is the region's time model's (not, under
    `--ranks sum` or `min`, from its cost model: the time series and parts are no time per rank).
    `exclusive`: the call paths with an exclusive time model (None: all); a model above parts without
    its exclusive time is none (`parts.PartsCheck.contradicts`: that may be its own work, review 45)."""
    if report.predicted_total is None or report.predicted_root is None:
        return []
    own = report.predicted_total - report.predicted_others  # `predicted_root`'s figure alone
    value = report.unit_format  # Extra-P's values carry no unit (review 43: they were said in s)
    out = []
    s = next((s for s in series if s.callpath == report.predicted_root and s.metric == "time"), None)
    if s is not None:
        for i, p in enumerate(report.parameters):
            values = sorted({float(v) for v in s.points[:, i]})
            at = report.target.get(p)
            if at is not None and len(values) < MIN_POINTS and at not in values:
                shown = ", ".join(svg.param_text(v) for v in values)
                out.append(f"{p} has {len(values)} measured value(s) ({shown}): the model holds it constant, "
                           f"so this prediction does not follow {p}={svg.param_text(at)}")
    if s is not None and per_rank:
        measured = s.values()
        target = tuple(report.target.get(p) for p in report.parameters)
        here = [i for i, point in enumerate(s.points) if tuple(float(v) for v in point) == target]
        top = int(np.argmax(measured))
        beyond = all(report.target.get(p, v) >= v for p, v in zip(report.parameters, s.points[top]))
        if here and measured[here[0]] > 0 and \
                not MEASURED_AGREES[0] <= own / measured[here[0]] <= MEASURED_AGREES[1]:
            out.append(f"{value(measured[here[0]])} was measured at this very point")
        elif here and (outside := _outside_runs(own, s.repetitions[here[0]], value)):
            out.append(outside)
        elif out and beyond and own < measured[top]:
            point = point_text(report.parameters, s.points[top])
            out.append(f"below the {value(measured[top])} already measured at {point}")
    row = next((r for r in ranking if r.callpath == report.predicted_root), None)
    if row is not None and row.miss:  # review 25: nothing said a model far from its own runs
        out.append(f"its model {row.miss}")
    for e in (getattr(row, "levels", ()) if row is not None else ()):
        if e.modeled_at is not None:  # review 128 MED-1: 5.1 s "at ranks=2" beside 69% weak scaling at 2 ranks
            p = e.parameter
            out.append(f"modeled on the runs at {p}={svg.param_text(e.modeled_at)} alone: its time differs between "
                       f"{p}={svg.param_text(e.levels[0])} and {p}={svg.param_text(e.levels[1])} ({e.values_text()}), and "
                       f"2 measured values of {p} give no form in it: this prediction holds for "
                       f"{p}={svg.param_text(e.modeled_at)} only; how the time changes with {p} is measured, not modeled")
    parts = None if row is None or row.parts_unsettled else row.from_parts
    if per_rank and report.predicted_model is not None and not (report.predicted_model > 0 and own > 0):
        # review 43: a model below zero was lifted to 0 and divided by
        out.append(f"its own time model predicts {value(report.predicted_model)}, no time at all: it extrapolates "
                   "badly there, and its parts' models stand for it")
    elif per_rank and report.predicted_model is not None:
        out.append(f"its own time model predicts {value(report.predicted_model)} "
                   f"({times(report.predicted_model / own)}): less than its parts' models add up "
                   "to, which an inclusive time cannot be; a model of the whole holds a part's growth constant "
                   "where it is small against the other parts' noise at the measured points")
    elif per_rank and parts is not None and parts > 0 and own > 0:
        ratio = own / parts
        # under --ranks max a run below its parts' sum is none (their largest ranks are other ranks:
        # review 29), under min one above it
        # without its exclusive time, a run above its parts' sum may be its own work (review 45)
        above = PARTS_DISAGREE if exclusive is None or report.predicted_root in exclusive else None
        if disagrees(ratio, above, PARTS_DISAGREE, combine):
            out.append(f"its parts' models add up to {value(parts)} ({times(ratio)}): one of them extrapolates badly")
    # a region whose growth the data do not settle says nothing of a growth the run's model misses
    inside = [r for r in ranking if r.callpath.startswith(report.predicted_root + "->") and math.isfinite(r.predicted)
              and not r.unsettled]
    deepest = max(inside, key=lambda r: r.predicted, default=None)
    if per_rank and deepest is not None and own > 0 \
            and deepest.predicted > INSIDE_ABOVE * own:
        # review 20: a run time of 23 s whose training loop, two levels down, predicted 2 min (its
        # model had no term in the parameter that the loop grows with)
        out.append(f"{deepest.callpath}, a region inside it, is predicted at {value(deepest.predicted)} "
                   f"({deepest.predicted / own:.2g}x the run): the run's model misses a growth "
                   "of its parts")
    elif per_rank and own > 0:
        # review 86 LOW-4: each child under 1.2x the run, but together above it (6.79 s + 1.38 s
        # inside a run time of 6.63 s): the regions directly inside it ran one after the other
        kids = [r for r in inside if "->" not in r.callpath[len(report.predicted_root) + 2:]]
        together = sum(_figure(r) for r in kids)
        if len(kids) > 1 and together > INSIDE_ABOVE * own:
            out.append(f"the regions directly inside it add up to {value(together)} ({together / own:.3g}x the run): "
                       "the run's model misses a growth of its parts")
    return out


#: a run time at a measured point is outside its runs there (review 86 MED-2) only when it lies
#: beyond the nearest run by more than the runs' spread there and by more than this fraction of it
OUTSIDE_RUNS = 0.1


def _outside_runs(own: float, runs: Sequence[float], value) -> str | None:
    """The caveat for a run time below every run measured at its own point, or above every one, by
    more than the runs' spread (max - min) there and more than `OUTSIDE_RUNS` of the nearest run
    (noise puts a prediction a little outside a few runs' range often); None where it is not."""
    runs = sorted(float(v) for v in runs if math.isfinite(v))
    if not runs or not math.isfinite(own):
        return None
    lo, hi = runs[0], runs[-1]
    spread = hi - lo
    if lo - own > max(spread, OUTSIDE_RUNS * abs(lo)):
        side = "below"
    elif own - hi > max(spread, OUTSIDE_RUNS * abs(hi)):
        side = "above"
    else:
        return None
    if len(runs) == 1:
        return f"{side} the one run measured at this very point ({value(lo)})"
    return f"{side} every run measured at this very point ({len(runs)} runs, {value(lo)} to {value(hi)})"


def _design(report: Report, groups: Sequence[RunGroup], params: Sequence[str],
            measured: Mapping[str, Sequence[float]], n_series: int) -> None:
    if not groups:
        # Extra-P inputs: no runs, only the measured points
        for p in params:
            report.design.append((f"parameter {p}", ", ".join(svg.param_text(v) for v in measured.get(p, ()))))
        report.design.append(("call paths measured", str(n_series)))
        return
    values: dict[str, set] = {}
    for g in groups:
        for k, v in g.params.items():
            values.setdefault(k, set()).add(v)
    for k in sorted(values, key=lambda k: (k not in params, k)):
        vals = ", ".join(svg.param_text(v) for v in sorted(values[k]))
        note = "" if k in params else " (not a model parameter)"
        report.design.append((f"parameter {k}{note}", vals))
    reps: Counter = Counter()
    for g in groups:
        if not g.ok:
            continue
        reps[tuple(sorted(g.params.items())) + (("ws", g.world_size),)] += 1
    configs = len(reps)
    report.design.append(("configurations", str(configs)))
    if reps:
        lo, hi = min(reps.values()), max(reps.values())
        report.design.append(("repetitions per configuration", str(lo) if lo == hi else f"{lo} to {hi}"))
    sizes = sorted({g.world_size for g in groups})
    report.design.append(("ranks per run", ", ".join(map(str, sizes))))
    n_ok = sum(1 for g in groups if g.ok)
    odd = sum(1 for g in groups if g.status == ODD)
    # runs left out for their parameters did complete (review 31)
    report.design.append(("runs completed", f"{n_ok + odd} of {len(groups)}"))
    if odd:
        report.design.append(("runs left out for their parameters", str(odd)))
    selected = sorted({(len(g.ranks), g.world_size) for g in groups if g.ok and g.left_out_ranks})
    if selected:
        # rank selection (SCALEPROBE_RANKS): the ranks left out wrote no file; the readers' warning says so too
        report.design.append(("ranks recorded (rank selection)", ", ".join(f"{n} of {ws}" for n, ws in selected)))
    report.design.append(("rank files", str(sum(len(g.ranks) for g in groups))))
    for g in groups:
        if not g.ok:
            report.failed.append((g.run_id, g.failure()))
        for r in g.ranks:
            report.problems.extend(r.problems)
    env: dict[str, list[str]] = {}
    for g in groups:
        for r in g.ranks:
            for k, v in r.header.items():
                if k in PER_RUN_KEYS or v is None or isinstance(v, (dict, list)) and len(str(v)) > 200:
                    continue
                text = _env_text(v)
                seen = env.setdefault(str(k), [])
                if text not in seen:
                    seen.append(text)
    experiments = sorted({str(r.header.get("experiment")) for g in groups for r in g.ranks if r.header.get("experiment")})
    if experiments:
        report.design.insert(0, ("experiment", ", ".join(experiments)))
    for k in sorted(env):
        vals = env[k]
        report.environment.append((k, listing(vals, 4)))
