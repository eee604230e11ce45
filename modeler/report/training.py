"""The training view: time per step and epoch, the split of a step, scaling with ranks."""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from ..pointtext import point_text
from . import svg
from .findings import NS, Report
from .runs import RunGroup, coordinate, rank_axis

STEP_COLORS = {"compute": "#0072B2", "communication": "#D55E00", "data wait": "#E69F00"}


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


def _logish(xs: Sequence[float]) -> bool:
    return all(x > 0 for x in xs) and max(xs) / min(xs) >= 4


def _loop_names(loops: Sequence[str]) -> dict[str, str]:
    """How a loop is named on the page: its leaf, or its whole call path where two loops share a leaf."""
    leaves = [cp.rsplit("->", 1)[-1] for cp in loops]
    return {cp: leaf if leaves.count(leaf) == 1 else cp for cp, leaf in zip(loops, leaves)}


def training_view(report: Report, groups: Sequence[RunGroup], params: Sequence[str], hold: Mapping[str, float]) -> None:
    """Time per step and epoch, per loop (a train and an eval loop are apart, as `step_time` keeps
    them under their call paths), from the active steps only (`RunGroup.loop_stats`)."""
    axes = list(params)
    if not axes:
        return
    stats = {kind: [(g, g.loop_stats(kind)) for g in groups] for kind in ("steps", "epochs")}
    loops_of = {kind: sorted({cp for _, st in stats[kind] for cp in st}) for kind in stats}
    names_of = {kind: _loop_names(loops) for kind, loops in loops_of.items()}
    for kind, label in (("steps", "step"), ("epochs", "epoch")):
        names = names_of[kind]
        for cp in loops_of[kind]:
            by_group = {id(g): st[cp]["duration"] * NS for g, st in stats[kind] if cp in st}
            data = _points_by_config(groups, axes, lambda g, d=by_group: d.get(id(g)))
            if not data:
                continue
            for axis, p in enumerate(axes):
                keys, held = _along(data, axis, axes, hold)
                if len(keys) < 2:
                    continue
                xs = [k[axis] for k in keys]
                meds = [float(np.median(data[k])) for k in keys]
                color = svg.PALETTE[0 if kind == "steps" else 2]
                series = [
                    svg.PlotSeries(f"time per {label}", xs, meds, "points", color,
                                   [min(data[k]) for k in keys], [max(data[k]) for k in keys]),
                    svg.PlotSeries("", xs, meds, "line", color),
                ]
                held_text = point_text(held)
                report.training_charts.append(
                    svg.xy_chart(
                        series, x_label=p, y_label=f"time per {label}", x_log=_logish(xs), x_ticks=xs,
                        title=f"time per {label} of {names[cp]} against {p}" + (f" ({held_text})" if held_text else ""),
                        y_format=svg.SecondsFormat(),
                    )
                )
    # The split of a step, per loop, one bar per configuration along each parameter.
    names = names_of["steps"]
    per_config: dict[tuple, dict[str, list[dict[str, float]]]] = {}
    for g, st in stats["steps"]:
        coords = tuple(coordinate(g, a) for a in axes)
        for cp, s in st.items():
            if math.isfinite(s["duration"]):
                per_config.setdefault(coords, {}).setdefault(cp, []).append(s)
    for coords, by_loop in sorted(per_config.items(), key=lambda kv: tuple(math.inf if c is None else c for c in kv[0])):
        for cp in sorted(by_loop):
            sts = by_loop[cp]
            keys = ("duration", "mean_duration", "data_wait", "comm", "gpu")
            mean = {k: float(np.mean([s[k] for s in sts])) * NS for k in keys}
            row = {a: c for a, c in zip(axes, coords)}
            # `step` is the median step (as step_time); the split is of the mean step, which the
            # parts (means per step, `RunGroup.loop_stats`) add up to: compute is the rest
            row.update(
                loop=cp, loop_name=names[cp], step=mean["duration"], mean_step=mean["mean_duration"],
                data_wait=mean["data_wait"], comm=mean["comm"], gpu=mean["gpu"],
                compute=max(0.0, mean["mean_duration"] - mean["data_wait"] - mean["comm"]),
                steps=float(np.mean([s["count"] for s in sts])), runs=len(sts),
            )
            report.training_table.append(row)
    if not report.training_table:
        return
    has_gpu = any(r["gpu"] > 0 for r in report.training_table)
    for cp in loops_of["steps"]:
        rows_by = {tuple(r[a] for a in axes): r for r in report.training_table if r["loop"] == cp}
        for axis, p in enumerate(axes):
            keys, held = _along({k: [0.0] for k in rows_by}, axis, axes, hold)
            if len(keys) < 2:
                continue
            bars = [
                svg.BarStack(
                    svg.param_text(k[axis]),  # the bar's height: the mean step
                    [("compute", rows_by[k]["compute"]), ("communication", rows_by[k]["comm"]),
                     ("data wait", rows_by[k]["data_wait"])],
                    rows_by[k]["gpu"] if has_gpu else None,
                    value=k[axis],
                    # the tick is a median, the bar the mean step (review 98 MED-1): the median step beside it
                    marker_note=f" (median step {svg.format_seconds(rows_by[k]['step'])})" if has_gpu else "",
                )
                for k in keys
            ]
            held_text = point_text(held)
            report.split_charts.append(
                svg.stacked_bars(
                    bars, x_label=p, y_label="mean time per step", colors=STEP_COLORS,
                    marker_name="median GPU time per step" if has_gpu else "",
                    title=f"split of a mean step of {names[cp]} against {p}" + (f" ({held_text})" if held_text else ""),
                    y_format=svg.SecondsFormat(),
                )
            )


def scaling_view(report: Report, groups: Sequence[RunGroup], params: Sequence[str], hold: Mapping[str, float]) -> None:
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
    held_text = point_text(held)
    suffix = f" ({held_text})" if held_text else ""
    ideal = [x / p0 for x in xs]
    report.scaling_charts = [
        svg.xy_chart(
            [svg.PlotSeries("measured", xs, [r["speedup"] for r in rows], "points", svg.PALETTE[0]),
             svg.PlotSeries("", xs, [r["speedup"] for r in rows], "line", svg.PALETTE[0]),
             svg.PlotSeries("ideal strong scaling", xs, ideal, "dashed", "#777")],
            x_label=axis_name, y_label=f"speedup over {svg.param_text(p0)} rank(s)", x_log=_logish(xs), x_ticks=xs,
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
            title="cost" + suffix, y_format=svg.SecondsFormat(),
        ),
    ]
