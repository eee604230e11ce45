"""Turn runs, the fitted dataset and its models into the report's findings (numbers and charts).

Both output formats render the same `Report`, so the HTML page and the markdown text never
disagree. Charts are prepared here as inline SVG; the templates only lay them out.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from markupsafe import Markup

from ..dataset import Dataset, Series
from ..errors import InputError
from ..model import FittedModel, format_exponent
from ..ranking import rank_models
from . import svg
from .runs import PER_RUN_KEYS, RankData, RunGroup, coordinate, rank_axis

NS = 1e-9
STEP_COLORS = {"compute": "#0072B2", "communication": "#D55E00", "data wait": "#E69F00"}


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
    measured_max: float
    predicted: float
    low: float | None
    high: float | None
    factor: float
    warnings: tuple[str, ...]
    anchor: str


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
    title: str
    parameters: tuple[str, ...]
    metric: str
    unit_format: Callable[[float], str]
    design: list[tuple[str, str]]
    environment: list[tuple[str, str]]
    failed: list[tuple[str, str]]
    problems: list[str]
    warnings: list[str]
    target: dict[str, float]
    hold: dict[str, float]
    ranking: list[RankingRow]
    regions: list[RegionView]
    training_charts: list[Markup]
    training_table: list[dict]
    split_charts: list[Markup]
    scaling_axis: str | None
    scaling_held: dict[str, float]
    scaling_table: list[dict]
    scaling_charts: list[Markup]
    imbalance_run: str | None
    imbalance: list[dict]
    imbalance_chart: Markup | None
    slowest_ranks: list[tuple[int, int]]
    tree_run: str | None
    tree_rank: int | None
    tree: list[TreeNode]

    def target_text(self) -> str:
        return ", ".join(f"{k}={svg._fmt(v)}" for k, v in self.target.items())

    def headline(self) -> RankingRow | None:
        """The region to name first: among those with the worst growth the deepest, since its
        callers inherit its growth and say less about where to look."""
        if not self.ranking:
            return None
        top = self.ranking[0].growth_key
        return max((r for r in self.ranking if r.growth_key == top), key=lambda r: r.callpath.count("->"))

    def tree_lines(self) -> list[str]:
        """The call tree as indented text: name, inclusive / exclusive time, visits, share."""
        lines: list[str] = []

        def walk(n: TreeNode, depth: int) -> None:
            lines.append(
                f"{'  ' * depth}{n.name}  {svg.format_seconds(n.incl_s)} / {svg.format_seconds(n.excl_s)}"
                f"  x{n.visits}  ({n.share * 100:.1f}%)"
            )
            for c in n.children:
                walk(c, depth + 1)

        for n in self.tree:
            walk(n, 0)
        return lines

    def hold_text(self) -> str:
        return ", ".join(f"{k}={svg._fmt(v)}" for k, v in self.hold.items())


def value_formatter(metric: str, unit: str) -> Callable[[float], str]:
    """How to print a metric's values: durations as time, everything else as plain numbers."""
    u = unit.lower()
    if u in ("ns", "nanoseconds"):
        return lambda v: svg.format_seconds(v * NS)
    if u in ("us", "µs", "microseconds"):
        return lambda v: svg.format_seconds(v * 1e-6)
    if u in ("ms", "milliseconds"):
        return lambda v: svg.format_seconds(v * 1e-3)
    if u in ("s", "sec", "seconds") or (not u and metric.startswith("time")):
        return svg.format_seconds
    return lambda v: svg._fmt(v) + (f" {unit}" if unit else "")


def parse_assignments(text: str | None, option: str) -> dict[str, float]:
    """`ranks=1024,batch=64` -> {"ranks": 1024.0, "batch": 64.0}; errors name the option."""
    out: dict[str, float] = {}
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, eq, value = part.partition("=")
        try:
            if not eq or not name.strip():
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise InputError(f"{option}: expected NAME=NUMBER[,NAME=NUMBER...], got {part!r}") from None
    return out


def _about_other_metric(warning: str, metric: str, metrics: Sequence[str]) -> bool:
    """Readers warn per metric ("1 'speedup' series ..."); the report shows one metric."""
    from ..aggregate import METRICS

    names = set(metrics) | set(METRICS)
    return any(f"'{m}'" in warning for m in names if m != metric) and f"'{metric}'" not in warning


def _growth_label(fm: FittedModel) -> str:
    """The fastest-growing term without its coefficient, e.g. `p^(3/2) * log2(p)`; `constant` if none."""
    best, best_key = None, (0.0, 0.0)
    for t in fm.model.terms:
        key = (sum(f.exponent for f in t.factors), float(sum(f.log_exponent for f in t.factors)))
        if best is None or key > best_key:
            best, best_key = t, key
    if best is None or best_key == (0.0, 0.0):
        return "constant"
    return " * ".join(f.formula() for f in best.factors if f.formula())


def _anchor(i: int) -> str:
    return f"region-{i}"


def _check_names(names: Mapping[str, float], parameters: Sequence[str], option: str) -> None:
    unknown = [n for n in names if n not in parameters]
    if unknown:
        raise InputError(
            f"{option}: unknown parameter(s) {', '.join(unknown)}; the runs have {', '.join(parameters) or 'none'}"
        )


def _line(series: Series, axis: int, hold: Mapping[str, float], parameters: Sequence[str]) -> tuple[np.ndarray, dict]:
    """Indices of the points along parameter `axis` with the others at `hold`, else the longest such line."""
    others = [i for i in range(len(parameters)) if i != axis]
    groups: dict[tuple, list[int]] = {}
    for k, pt in enumerate(series.points):
        groups.setdefault(tuple(pt[i] for i in others), []).append(k)
    want = tuple(hold.get(parameters[i], math.nan) for i in others)
    idx = groups.get(want)
    if idx is None or len(idx) < 2:
        key = max(groups, key=lambda g: (len(groups[g]), g))
        idx, want = groups[key], key
    idx = sorted(idx, key=lambda k: series.points[k][axis])
    return np.array(idx, dtype=int), {parameters[i]: want[j] for j, i in enumerate(others)}


def _curve_x(lo: float, hi: float, log: bool, n: int = 40) -> np.ndarray:
    if log and lo > 0:
        return np.geomspace(lo, hi, n)
    return np.linspace(lo, hi, n)


def check_options(groups: Sequence[RunGroup], parameters: Sequence[str], opt: ReportOptions) -> None:
    """Raise `InputError` naming the option for every choice that the runs cannot satisfy."""
    if opt.top < 1:
        raise InputError(f"--top: must be at least 1, got {opt.top}")
    _check_names(opt.target or {}, parameters, "--at")
    _check_names(opt.hold or {}, parameters, "--hold")
    ok = [g for g in groups if g.ok] or list(groups)
    chosen = _choose_run(ok, opt.run_id)
    if opt.rank is not None and chosen is not None and all(r.rank != opt.rank for r in chosen.ranks):
        raise InputError(
            f"--rank: run {chosen.run_id} has no rank {opt.rank}; it has {', '.join(str(r.rank) for r in chosen.ranks)}"
        )


def build_report(
    groups: Sequence[RunGroup],
    dataset: Dataset,
    models: Sequence[FittedModel],
    options: ReportOptions | None = None,
) -> Report:
    """All findings of the report; `models` are fitted on `dataset` (same order as its series)."""
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
    largest_pt = np.array([[measured[p][-1] if measured[p] else 0.0 for p in params]])

    ranked = rank_models([by_key[(s.callpath, s.metric)] for s in series if (s.callpath, s.metric) in by_key],
                         params, target)
    ranking: list[RankingRow] = []
    region_series = {s.callpath: s for s in series}
    for i, rm in enumerate(ranked.rows):
        fm, s = rm.fitted, region_series[rm.fitted.callpath]
        base = float(fm.predict(largest_pt)[0])
        ranking.append(
            RankingRow(
                callpath=fm.callpath,
                formula=fm.model.formula(4),
                growth=_growth_label(fm),
                growth_key=rm.growth,
                smape=float(fm.smape),
                cv_smape=None if fm.cv_smape is None else float(fm.cv_smape),
                ar2=float(fm.ar2),
                points=int(fm.points),
                measured_max=float(max(np.max(r) for r in s.repetitions)),
                predicted=rm.prediction,
                low=rm.low,
                high=rm.high,
                factor=rm.prediction / base if base > 0 else math.nan,
                warnings=tuple(fm.warnings),
                anchor=_anchor(i),
            )
        )

    regions = [
        _region_view(r, region_series[r.callpath], by_key[(r.callpath, metric)], params, hold, target, fmt)
        for r in ranking[: opt.top]
    ]

    report = Report(
        title=opt.title,
        parameters=params,
        metric=metric,
        unit_format=fmt,
        design=[],
        environment=[],
        failed=[],
        problems=[],
        warnings=[w for w in dataset.warnings if not _about_other_metric(w, metric, metrics)],
        target=target,
        hold=hold,
        ranking=ranking,
        regions=regions,
        training_charts=[],
        training_table=[],
        split_charts=[],
        scaling_axis=None,
        scaling_held={},
        scaling_table=[],
        scaling_charts=[],
        imbalance_run=None,
        imbalance=[],
        imbalance_chart=None,
        slowest_ranks=[],
        tree_run=None,
        tree_rank=None,
        tree=[],
    )
    _design(report, groups, params)
    ok_groups = [g for g in groups if g.ok]
    _training(report, ok_groups, params, hold)
    _scaling(report, ok_groups, params, hold)
    chosen = _choose_run(ok_groups or list(groups), opt.run_id)
    if chosen is not None:
        _imbalance(report, chosen)
        _call_tree(report, chosen, opt.rank)
    return report


def _region_view(row: RankingRow, s: Series, fm: FittedModel, params, hold, target, fmt) -> RegionView:
    charts = []
    med = s.values("median")
    for axis, p in enumerate(params):
        idx, held = _line(s, axis, hold, params)
        xs = s.points[idx, axis]
        lo = [float(np.min(s.repetitions[k])) for k in idx]
        hi = [float(np.max(s.repetitions[k])) for k in idx]
        log = bool(np.all(xs > 0)) and xs.max() / max(xs.min(), 1e-300) >= 4
        x_end = max(2 * float(xs.max()), target.get(p, 0.0))
        inside = _curve_x(float(xs.min()), float(xs.max()), log)
        beyond = _curve_x(float(xs.max()), x_end, log, 20)

        def predict(x: np.ndarray) -> np.ndarray:
            cols = {q: np.full(len(x), held[q]) for q in held}
            cols[p] = x
            return fm.predict(cols)

        tips = [
            f"{p}={svg._fmt(float(s.points[k, axis]))}: median {fmt(float(med[k]))}, "
            f"{len(s.repetitions[k])} repetition(s) from {fmt(lo[j])} to {fmt(hi[j])}"
            for j, k in enumerate(idx)
        ]
        series = [
            svg.PlotSeries("measured", xs, med[idx], "points", svg.PALETTE[0], lo, hi, tips),
            svg.PlotSeries("model", inside, predict(inside), "line", svg.PALETTE[3]),
        ]
        if x_end > float(xs.max()):
            series.append(svg.PlotSeries("extrapolation", beyond, predict(beyond), "dashed", svg.PALETTE[3]))
        held_text = ", ".join(f"{q}={svg._fmt(v)}" for q, v in held.items())
        charts.append(
            svg.xy_chart(
                series,
                x_label=p,
                y_label=f"{s.metric}",
                x_log=log,
                x_ticks=[float(v) for v in xs] + [x_end],
                y_log=False,
                title=f"against {p}" + (f" ({held_text})" if held_text else ""),
                y_format=fmt,
                vline=target.get(p) if target.get(p, 0) > float(xs.max()) else None,
                vline_label="target",
            )
        )
    heat = _heat(s, fm, params, hold, target, fmt) if len(params) >= 2 else None
    spread = float(np.max(s.spread())) if s.n_points else 0.0
    return RegionView(row, charts, heat, spread)


def _heat(s: Series, fm: FittedModel, params, hold, target, fmt) -> Markup:
    """Model values over the first two parameters (measured values plus the target), others held."""
    p0, p1 = params[0], params[1]
    c0 = sorted({float(v) for v in s.points[:, 0]} | {target[p0]})
    c1 = sorted({float(v) for v in s.points[:, 1]} | {target[p1]})
    measured: dict[tuple[float, float], float] = {}
    med = s.values("median")
    others_ok = [
        all(abs(pt[i] - hold.get(params[i], pt[i])) < 1e-12 for i in range(2, len(params))) for pt in s.points
    ]
    for k, pt in enumerate(s.points):
        if others_ok[k]:
            measured[(float(pt[0]), float(pt[1]))] = float(med[k])
    rows = []
    for y in c1:
        row = []
        for x in c0:
            cols = {q: np.array([hold[q]]) for q in params[2:]}
            cols[p0], cols[p1] = np.array([x]), np.array([y])
            v = float(fm.predict(cols)[0])
            m = measured.get((x, y))
            if m is not None:
                err = (v - m) / m * 100 if m else math.nan
                tip = f"{p0}={svg._fmt(x)}, {p1}={svg._fmt(y)}: measured {fmt(m)}, model {fmt(v)} ({err:+.1f}%)"
            else:
                tip = f"{p0}={svg._fmt(x)}, {p1}={svg._fmt(y)}: model {fmt(v)} (not measured)"
            row.append(svg.HeatCell(v, fmt(v), tip, outline=m is not None))
        rows.append(row)
    return svg.heat_map(
        [svg._fmt(v) for v in c1],
        [svg._fmt(v) for v in c0],
        rows,
        row_label=p1,
        col_label=p0,
        title=f"model over {p0} and {p1} (outlined: measured)",
    )


def _design(report: Report, groups: Sequence[RunGroup], params: Sequence[str]) -> None:
    values: dict[str, set] = {}
    for g in groups:
        for k, v in g.params.items():
            values.setdefault(k, set()).add(v)
    for k in sorted(values, key=lambda k: (k not in params, k)):
        vals = ", ".join(svg._fmt(v) for v in sorted(values[k]))
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
                if k in PER_RUN_KEYS or isinstance(v, (dict, list)) and len(str(v)) > 200:
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
        text = ", ".join(vals[:4]) + (f" and {len(vals) - 4} more" if len(vals) > 4 else "")
        report.environment.append((k, text))


def _points_by_config(groups: Sequence[RunGroup], axes: Sequence[str], value: Callable[[RunGroup], float | None]):
    """Repetition values per configuration: {coords: [values]} over `axes`."""
    out: dict[tuple, list[float]] = {}
    for g in groups:
        coords = tuple(coordinate(g, a) for a in axes)
        if any(c is None for c in coords):
            continue
        v = value(g)
        if v is not None and math.isfinite(v):
            out.setdefault(coords, []).append(v)
    return out


def _along(data: dict[tuple, list[float]], axis: int, axes: Sequence[str], hold: Mapping[str, float]):
    """Configurations along `axis` with the other axes at `hold` (else the longest line): sorted keys."""
    lines: dict[tuple, list[tuple]] = {}
    for c in data:
        lines.setdefault(tuple(v for i, v in enumerate(c) if i != axis), []).append(c)
    if not lines:
        return [], {}
    want = tuple(hold.get(a, math.nan) for i, a in enumerate(axes) if i != axis)
    keys = lines.get(want)
    if keys is None or len(keys) < 2:
        want = max(lines, key=lambda k: (len(lines[k]), k))
        keys = lines[want]
    others = [a for i, a in enumerate(axes) if i != axis]
    return sorted(keys, key=lambda c: c[axis]), dict(zip(others, want))


def _training(report: Report, groups: Sequence[RunGroup], params: Sequence[str], hold: Mapping[str, float]) -> None:
    axes = list(params)
    if not axes:
        return
    for kind, label in (("steps", "step"), ("epochs", "epoch")):
        data = _points_by_config(groups, axes, lambda g: (g.step_stats(kind) or {}).get("duration", math.nan) * NS)
        if not data:
            continue
        for axis, p in enumerate(axes):
            keys, held = _along(data, axis, axes, hold)
            if len(keys) < 2:
                continue
            xs = [k[axis] for k in keys]
            meds = [float(np.median(data[k])) for k in keys]
            series = [
                svg.PlotSeries(
                    f"time per {label}", xs, meds, "points", svg.PALETTE[0 if kind == "steps" else 2],
                    [min(data[k]) for k in keys], [max(data[k]) for k in keys],
                ),
                svg.PlotSeries("", xs, meds, "line", svg.PALETTE[0 if kind == "steps" else 2]),
            ]
            held_text = ", ".join(f"{q}={svg._fmt(v)}" for q, v in held.items())
            report.training_charts.append(
                svg.xy_chart(
                    series, x_label=p, y_label=f"time per {label}", x_log=_logish(xs), x_ticks=xs,
                    title=f"time per {label} against {p}" + (f" ({held_text})" if held_text else ""),
                    y_format=svg.format_seconds,
                )
            )
    # The split of a step, one bar per configuration along each parameter.
    stats = {}
    for g in groups:
        st = g.step_stats("steps")
        if st is None:
            continue
        coords = tuple(coordinate(g, a) for a in axes)
        stats.setdefault(coords, []).append(st)
    for coords, sts in sorted(stats.items()):
        mean = {k: float(np.mean([s[k] for s in sts])) * NS for k in ("duration", "data_wait", "comm", "gpu")}
        row = {a: c for a, c in zip(axes, coords)}
        row.update(
            step=mean["duration"], data_wait=mean["data_wait"], comm=mean["comm"], gpu=mean["gpu"],
            compute=max(0.0, mean["duration"] - mean["data_wait"] - mean["comm"]),
            steps=float(np.mean([s["count"] for s in sts])), runs=len(sts),
        )
        report.training_table.append(row)
    if not report.training_table:
        return
    has_gpu = any(r["gpu"] > 0 for r in report.training_table)
    rows_by = {tuple(r[a] for a in axes): r for r in report.training_table}
    for axis, p in enumerate(axes):
        keys, held = _along({k: [0.0] for k in rows_by}, axis, axes, hold)
        if len(keys) < 2:
            continue
        bars = [
            svg.BarStack(
                svg._fmt(k[axis]),
                [("compute", rows_by[k]["compute"]), ("communication", rows_by[k]["comm"]),
                 ("data wait", rows_by[k]["data_wait"])],
                rows_by[k]["gpu"] if has_gpu else None,
            )
            for k in keys
        ]
        held_text = ", ".join(f"{q}={svg._fmt(v)}" for q, v in held.items())
        report.split_charts.append(
            svg.stacked_bars(
                bars, x_label=p, y_label="time per step", colors=STEP_COLORS,
                marker_name="GPU time" if has_gpu else "",
                title=f"split of a step against {p}" + (f" ({held_text})" if held_text else ""),
                y_format=svg.format_seconds,
            )
        )


def _logish(xs: Sequence[float]) -> bool:
    return all(x > 0 for x in xs) and max(xs) / min(xs) >= 4


def _scaling(report: Report, groups: Sequence[RunGroup], params: Sequence[str], hold: Mapping[str, float]) -> None:
    axis_name = rank_axis(params, groups)
    report.scaling_axis = axis_name
    if axis_name is None:
        return
    axes = list(params) if axis_name in params else list(params) + [axis_name]
    data = _points_by_config(groups, axes, lambda g: g.time_ns() * NS)
    keys, held = _along(data, axes.index(axis_name), axes, hold)
    if len(keys) < 2:
        return
    i = axes.index(axis_name)
    p0 = keys[0][i]
    t0 = float(np.median(data[keys[0]]))
    rows = []
    for k in keys:
        p, t = k[i], float(np.median(data[k]))
        speedup = t0 / t if t > 0 else math.nan
        rows.append({
            "ranks": p, "time": t, "speedup": speedup,
            "strong_eff": speedup * p0 / p, "weak_eff": speedup, "cost": t * p, "runs": len(data[k]),
        })
    report.scaling_table = rows
    report.scaling_held = held
    xs = [r["ranks"] for r in rows]
    held_text = ", ".join(f"{q}={svg._fmt(v)}" for q, v in held.items())
    suffix = f" ({held_text})" if held_text else ""
    ideal = [x / p0 for x in xs]
    report.scaling_charts = [
        svg.xy_chart(
            [svg.PlotSeries("measured", xs, [r["speedup"] for r in rows], "points", svg.PALETTE[0]),
             svg.PlotSeries("", xs, [r["speedup"] for r in rows], "line", svg.PALETTE[0]),
             svg.PlotSeries("ideal strong scaling", xs, ideal, "dashed", "#777")],
            x_label=axis_name, y_label=f"speedup over {svg._fmt(p0)} rank(s)", x_log=_logish(xs), x_ticks=xs,
            title="speedup" + suffix,
        ),
        svg.xy_chart(
            [svg.PlotSeries("strong scaling", xs, [r["strong_eff"] * 100 for r in rows], "points", svg.PALETTE[0]),
             svg.PlotSeries("", xs, [r["strong_eff"] * 100 for r in rows], "line", svg.PALETTE[0]),
             svg.PlotSeries("weak scaling", xs, [r["weak_eff"] * 100 for r in rows], "points", svg.PALETTE[1]),
             svg.PlotSeries("", xs, [r["weak_eff"] * 100 for r in rows], "line", svg.PALETTE[1])],
            x_label=axis_name, y_label="parallel efficiency (%)", x_log=_logish(xs), x_ticks=xs,
            title="parallel efficiency" + suffix, y_format=lambda v: f"{v:.0f}%",
        ),
        svg.xy_chart(
            [svg.PlotSeries("rank-seconds", xs, [r["cost"] for r in rows], "points", svg.PALETTE[3]),
             svg.PlotSeries("", xs, [r["cost"] for r in rows], "line", svg.PALETTE[3])],
            x_label=axis_name, y_label="cost (ranks x time)", x_log=_logish(xs), x_ticks=xs,
            title="cost" + suffix, y_format=svg.format_seconds,
        ),
    ]


def _choose_run(groups: Sequence[RunGroup], run_id: str | None) -> RunGroup | None:
    if run_id is not None:
        for g in groups:
            if g.run_id == run_id:
                return g
        raise InputError(f"--run: no run {run_id!r}; the runs are {', '.join(g.run_id for g in groups[:10])}")
    if not groups:
        return None
    return max(groups, key=lambda g: (g.world_size, sorted(g.params.values()), -g.repetition))


def _imbalance(report: Report, g: RunGroup) -> None:
    report.imbalance_run = g.run_id
    if len(g.ranks) < 2:
        return
    per_rank = {r.rank: r.incl_by_callpath() for r in g.ranks}
    paths = sorted({p for d in per_rank.values() for p in d})
    ranks = sorted(per_rank)
    rows = []
    for path in paths:
        times = np.array([per_rank[r].get(path, 0) for r in ranks], dtype=float) * NS
        mean = float(times.mean())
        if mean <= 0:
            continue
        slow = int(np.argmax(times))
        rows.append({
            "callpath": path, "mean": mean, "max": float(times.max()), "min": float(times.min()),
            # max - mean is never negative; clamp the rounding error so it does not print as -1e-08
            "imbalance": max(0.0, float(times.max()) / mean - 1), "lost": max(0.0, float(times.max()) - mean),
            "slowest": ranks[slow], "times": times,
        })
    rows.sort(key=lambda r: r["lost"], reverse=True)
    report.imbalance = rows
    counts = Counter(r["slowest"] for r in rows if r["imbalance"] > 0.05)
    report.slowest_ranks = counts.most_common(5)
    shown = rows[:15]
    if not shown:
        return
    cols = ranks[:64]
    cells = []
    for r in reversed(shown):
        row = []
        for j, rk in enumerate(cols):
            t = float(r["times"][j])
            rel = t / r["mean"] - 1
            row.append(svg.HeatCell(
                t, f"{rel * 100:+.0f}%",
                f"{r['callpath']} on rank {rk}: {svg.format_seconds(t)} ({rel * 100:+.1f}% vs the mean)",
                color=svg.diverging(rel / 0.25),
            ))
        cells.append(row)
    report.imbalance_chart = svg.heat_map(
        [_short(r["callpath"]) for r in reversed(shown)], [str(c) for c in cols], cells,
        row_label="", col_label="rank", title="time per rank relative to the mean over ranks (red: slower)",
        cell_w=44, log=False,
    )


def _short(callpath: str, n: int = 14) -> str:
    leaf = callpath.rsplit("->", 1)[-1]
    return leaf if len(leaf) <= n else leaf[: n - 1] + "…"


def _call_tree(report: Report, g: RunGroup, rank: int | None) -> None:
    chosen: RankData | None = None
    if rank is not None:
        chosen = next((r for r in g.ranks if r.rank == rank), None)
        if chosen is None:
            raise InputError(f"--rank: run {g.run_id} has no rank {rank}; it has {', '.join(str(r.rank) for r in g.ranks)}")
    else:
        chosen = g.ranks[0] if g.ranks else None
    if chosen is None:
        return
    report.tree_run, report.tree_rank = g.run_id, chosen.rank
    total = chosen.total_ns() * NS or 1.0
    nodes: dict[tuple[int, ...], TreeNode] = {}
    roots: list[TreeNode] = []
    for path in sorted(chosen.profile, key=len):
        st = chosen.profile[path]
        node = TreeNode(
            chosen.names.get(path[-1], f"region{path[-1]}"), int(st.incl_ns) * NS, int(st.excl_ns) * NS,
            int(st.visits), int(st.incl_ns) * NS / total,
        )
        nodes[path] = node
        parent = nodes.get(path[:-1])
        (parent.children if parent is not None else roots).append(node)

    def order(ns: list[TreeNode]) -> None:
        ns.sort(key=lambda n: n.incl_s, reverse=True)
        for n in ns:
            order(n.children)

    order(roots)
    report.tree = roots


def growth_text(key: tuple[float, float]) -> str:
    e, l = key
    parts = []
    if e:
        parts.append(f"x^{format_exponent(e)}")
    if l:
        parts.append(f"log^{int(l)}")
    return " ".join(parts) or "constant"
