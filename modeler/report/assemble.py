"""Turn runs, the fitted dataset and its models into the report's findings (numbers and charts).

Both output formats render the same `Report`, so the HTML page and the markdown text never
disagree. Charts are prepared as inline SVG by the view modules; the templates only lay them out.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import InputError
from ..listing import listing
from ..model import FittedModel
from . import svg
from ..ranking import parse_assignments
from .findings import Report, ReportOptions, value_formatter
from .ranks import call_tree_view, choose_run, imbalance_view
from .regions import rank_regions, region_view
from .runs import PER_RUN_KEYS, RunGroup
from .training import scaling_view, training_view

__all__ = ["Report", "ReportOptions", "build_report", "check_options", "parse_assignments"]


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


def check_options(groups: Sequence[RunGroup], parameters: Sequence[str], opt: ReportOptions) -> None:
    """Raise `InputError` naming the option for every choice that the runs cannot satisfy."""
    if opt.top < 1:
        raise InputError(f"--top: must be at least 1, got {opt.top}")
    _check_names(opt.target or {}, parameters, "--at")
    _check_names(opt.hold or {}, parameters, "--hold")
    ok = [g for g in groups if g.ok] or list(groups)
    chosen = choose_run(ok, opt.run_id)
    if opt.rank is not None and chosen is not None and all(r.rank != opt.rank for r in chosen.ranks):
        raise InputError(
            f"--rank: run {chosen.run_id} has no rank {opt.rank}; it has {', '.join(str(r.rank) for r in chosen.ranks)}"
        )


def build_report(
    groups: Sequence[RunGroup],
    dataset: Dataset,
    models: Sequence[FittedModel],
    options: ReportOptions | None = None,
    companions: Sequence[FittedModel] = (),
) -> Report:
    """All findings of the report; `models` are fitted on `dataset` (same order as its series);
    `companions` are models fitted only to check each time model against its parts (`modeler.parts`)."""
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
    for p in params:
        if p not in target and measured[p]:
            target[p] = measured[p][-1]
        if p not in hold and measured[p]:
            hold[p] = measured[p][-1]
    ranking, common, parts_notes = rank_regions(series, models, params, target,
                                                {p: v[-1] for p, v in measured.items() if v}, companions)
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
        warnings=[w for w in dataset.warnings if not _about_other_metric(w, metric, metrics)]
        + [f"every model: {w}" for w in sorted(common)]
        + parts_notes,
    )
    _design(report, groups, params, measured, len(series))
    ok_groups = [g for g in groups if g.ok]
    training_view(report, ok_groups, params, hold)
    scaling_view(report, ok_groups, params, hold)
    roots = [row.predicted for row in ranking if "->" not in row.callpath]
    if roots and metric == "time" and all(math.isfinite(v) for v in roots):
        report.predicted_total = float(sum(roots))
        if report.scaling_axis in target:
            report.predicted_cost = report.predicted_total * target[report.scaling_axis]
    chosen = choose_run(ok_groups or list(groups), opt.run_id)
    if chosen is not None:
        imbalance_view(report, chosen)
        call_tree_view(report, chosen, opt.rank)
    return report


def _design(report: Report, groups: Sequence[RunGroup], params: Sequence[str],
            measured: Mapping[str, Sequence[float]], n_series: int) -> None:
    if not groups:
        # Extra-P inputs: no runs, only the measured points
        for p in params:
            report.design.append((f"parameter {p}", ", ".join(svg.short_number(v) for v in measured.get(p, ()))))
        report.design.append(("call paths measured", str(n_series)))
        return
    values: dict[str, set] = {}
    for g in groups:
        for k, v in g.params.items():
            values.setdefault(k, set()).add(v)
    for k in sorted(values, key=lambda k: (k not in params, k)):
        vals = ", ".join(svg.short_number(v) for v in sorted(values[k]))
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
    report.design.append(("runs completed", f"{n_ok} of {len(groups)}"))
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
                text = str(v)
                seen = env.setdefault(str(k), [])
                if text not in seen:
                    seen.append(text)
    experiments = sorted({str(r.header.get("experiment")) for g in groups for r in g.ranks if r.header.get("experiment")})
    if experiments:
        report.design.insert(0, ("experiment", ", ".join(experiments)))
    for k in sorted(env):
        vals = env[k]
        report.environment.append((k, listing(vals, 4)))
