"""The scaling ranking and the per-region views: measured points, model curves, heat maps."""

from __future__ import annotations

import math
from collections import Counter
from typing import Mapping, Sequence

import numpy as np
from markupsafe import Markup

from ..pointtext import point_text
from ..dataset import RunShares, Series
from ..derived import Baselines
from ..model import FittedModel
from ..growth import growth_text
from ..ranking import falls_text, nonnegative_keys, rank_models
from . import svg
from .findings import RankingRow, RegionView, scales_badly


def rank_regions(
    series: Sequence[Series], models: Sequence[FittedModel], parameters: Sequence[str],
    target: Mapping[str, float], largest: Mapping[str, float], companions: Sequence[FittedModel] = (),
    baselines: Baselines | None = None, measured: Sequence[Series] = (), min_share: float = 0.0,
    run_shares: RunShares | None = None, combine: str = "mean", repetitions: str | None = None,
) -> tuple[list[RankingRow], list[RankingRow], list[str], list[str]]:
    """Rows worst-scaling first (as `modeler fit` ranks them), the rows of the call paths under
    `min_share` of the run's time (`modeler.share`, with the time series in `measured` and the
    `run_shares` read from runs), the
    warnings most models have, which are taken off the rows to be said once (`fold_warnings`), and
    the ranking's own warnings: the call paths whose time model and parts disagree at the target
    (`modeler.parts`), and, with `baselines`, the speedup, efficiency and cost models far from what
    the per-rank time gives (`modeler.derived`)."""
    by_key = {(m.callpath, m.metric): m for m in models}
    ranked = rank_models([by_key[(s.callpath, s.metric)] for s in series if (s.callpath, s.metric) in by_key],
                         parameters, target, companions=companions, nonnegative=nonnegative_keys(series),
                         baselines=baselines, measured=measured, min_share=min_share,
                         run_shares=run_shares, combine=combine, largest=largest, repetitions=repetitions)
    largest_pt = np.array([[largest.get(p, 0.0) for p in parameters]])
    region_series = {s.callpath: s for s in series}
    ranking = [_row(rm, region_series[rm.fitted.callpath], largest_pt, _anchor(i)) for i, rm in enumerate(ranked.rows)]
    left_out = [_row(rm, region_series[rm.fitted.callpath], largest_pt, "") for rm in ranked.left_out]
    return ranking, left_out, fold_warnings(ranking), list(ranked.warnings)


def _row(rm, s: Series, largest_pt: np.ndarray, anchor: str) -> RankingRow:
    fm = rm.fitted
    base = float(fm.model.evaluate(largest_pt)[0])
    return RankingRow(
        callpath=fm.callpath,
        formula=fm.model.formula(4),
        # worded as `modeler fit` words it, falling models included (review 69 F1: `10 - 2 * log2(n)`
        # was `log2(n)^(1)` here, the label of a model growing as log n)
        growth=growth_text(rm.growth) + ("?" if rm.ranked_level() or rm.ranked_minor() else "") + falls_text(rm)
        + ("" if rm.parts_growth is None else f" (parts: {growth_text(rm.parts_growth)})")
        # run by some ranks only, ranked by the time of those that ran it (review 88 MED-1)
        + (f" (ranks that ran it, {rm.some_ranks}: {growth_text(rm.ranks_growth)})" if rm.by_ranks_that_ran_it() else ""),
        growth_key=rm.rank_growth(),
        smape=float(fm.smape),
        cv_smape=None if fm.cv_smape is None else float(fm.cv_smape),
        ar2=float(fm.ar2),
        points=int(fm.points),
        # the median of the point whose median is largest, as the charts and the heat map show the
        # points (review 80 LOW-4: the single slowest run, an outlier under contention, was shown)
        measured_max=float(np.max(s.values("median"))),
        predicted=rm.prediction,
        low=rm.low,
        high=rm.high,
        factor=rm.prediction / base if base > 0 else math.nan,
        warnings=tuple(fm.warnings),
        anchor=anchor,
        forms=rm.range,
        pass_refits=bool(rm.passes),
        from_time=rm.from_time,
        share=rm.share,
        from_parts=rm.from_parts,
        time_figure=rm.time_figure,
        doubtful=rm.doubtful(),
        unsettled=rm.ranked_level(),
        parts_unsettled=rm.parts_unsettled,
        miss=fm.miss,
        levels=tuple(fm.levels),
        bad=scales_badly(fm.metric, rm.rank_growth()),
    )


def fold_warnings(ranking: Sequence[RankingRow]) -> list[str]:
    """Take a warning that most models carry ("fewer than 5 values of parameter ranks") off their
    rows, to be said once: `every model: <w>`, or `18 of 20 models: <w>` where a few models have
    another (two models with only 2 values of ranks say that instead). A warning of fewer than half
    the models, or of one, stays on its rows."""
    counts = Counter(w for row in ranking for w in row.warnings)
    n = len(ranking)
    folded = {w: k for w, k in counts.items() if k > 1 and 2 * k >= n}
    for row in ranking:
        row.warnings = tuple(w for w in row.warnings if w not in folded)
    return [f"{'every model' if k == n else f'{k} of {n} models'}: {w}"
            for w, k in sorted(folded.items(), key=lambda wk: (-wk[1], wk[0]))]


def _anchor(i: int) -> str:
    return f"region-{i}"


def _held(series: Series, axes: Sequence[int], hold: Mapping[str, float],
          parameters: Sequence[str]) -> tuple[list[int], dict[str, float]]:
    """Indices of the points over the parameters `axes` with the others at `hold`, and those
    others' values; where fewer than 2 points were measured there, the values of the others with
    the most points measured (the longest measured line, for one axis)."""
    others = [i for i in range(len(parameters)) if i not in axes]
    groups: dict[tuple, list[int]] = {}
    for k, pt in enumerate(series.points):
        groups.setdefault(tuple(float(pt[i]) for i in others), []).append(k)
    want = tuple(float(hold.get(parameters[i], math.nan)) for i in others)
    idx = groups.get(want)
    if idx is None or len(idx) < 2:
        key = max(groups, key=lambda g: (len(groups[g]), g))
        idx, want = groups[key], key
    return idx, {parameters[i]: want[j] for j, i in enumerate(others)}


def _line(series: Series, axis: int, hold: Mapping[str, float], parameters: Sequence[str]) -> tuple[np.ndarray, dict]:
    """Indices of the points along parameter `axis` with the others at `hold`, else the longest such line."""
    idx, held = _held(series, (axis,), hold, parameters)
    idx = sorted(idx, key=lambda k: series.points[k][axis])
    return np.array(idx, dtype=int), held


def _held_text(held: Mapping[str, float]) -> str:
    return point_text(held)


def _curve_x(lo: float, hi: float, log: bool, n: int = 40) -> np.ndarray:
    if log and lo > 0:
        return np.geomspace(lo, hi, n)
    return np.linspace(lo, hi, n)


def region_view(row: RankingRow, s: Series, fm: FittedModel, params, hold, target, fmt) -> RegionView:
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

        def predict(x: np.ndarray, others: Mapping[str, float] = held) -> np.ndarray:
            cols = {q: np.full(len(x), others[q]) for q in others}
            cols[p] = x
            return fm.model.evaluate(cols)

        tips = [
            f"{p}={svg.param_text(float(s.points[k, axis]))}: median {fmt(float(med[k]))}, "
            f"{len(s.repetitions[k])} repetition(s) from {fmt(lo[j])} to {fmt(hi[j])}"
            for j, k in enumerate(idx)
        ]
        series = [
            svg.PlotSeries("measured", xs, med[idx], "points", svg.PALETTE[0], lo, hi, tips),
            svg.PlotSeries("model", inside, predict(inside), "line", svg.PALETTE[3]),
        ]
        if x_end > float(xs.max()):
            series.append(svg.PlotSeries("extrapolation", beyond, predict(beyond), "dashed", svg.PALETTE[3]))
        # the curve held at the measured values does not pass through the prediction at the target
        # where the target moves another parameter too: the model at the target's values of them
        # does (review 80 LOW-5: the target line met a curve of width=16 at a third of the
        # prediction at width=32)
        at_target = {q: float(target.get(q, v)) for q, v in held.items()}
        moved = {q: v for q, v in at_target.items() if v != held[q]}
        if moved and p in target:
            start = min(float(xs.min()), float(target[p]))
            along = np.union1d(_curve_x(start, max(x_end, float(target[p])), log and start > 0, 60), [target[p]])
            series.append(svg.PlotSeries(f"model at {_held_text(moved)}", along, predict(along, at_target), "dashed",
                                         svg.PALETTE[1]))
        held_text = _held_text(held)
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
    """Model values over the first two parameters (measured values plus the target), the others
    held as the line charts hold them (`_held`: at `hold`, or where the most points were measured
    when fewer than 2 were there), and named in the title (review 69 F4: `--hold z=3` drew a map
    of z=3 with no cell measured, and said nothing of z)."""
    p0, p1 = params[0], params[1]
    c0 = sorted({float(v) for v in s.points[:, 0]} | {target[p0]})
    c1 = sorted({float(v) for v in s.points[:, 1]} | {target[p1]})
    idx, held = _held(s, (0, 1), hold, params)
    med = s.values("median")
    measured = {(float(s.points[k, 0]), float(s.points[k, 1])): float(med[k]) for k in idx}
    rows = []
    for y in c1:
        row = []
        for x in c0:
            cols = {q: np.array([v]) for q, v in held.items()}
            cols[p0], cols[p1] = np.array([x]), np.array([y])
            v = float(fm.model.evaluate(cols)[0])
            m = measured.get((x, y))
            if m is not None:
                err = (v - m) / m * 100 if m else math.nan
                tip = f"{p0}={svg.param_text(x)}, {p1}={svg.param_text(y)}: measured {fmt(m)}, model {fmt(v)} ({err:+.1f}%)"
            else:
                tip = f"{p0}={svg.param_text(x)}, {p1}={svg.param_text(y)}: model {fmt(v)} (not measured)"
            row.append(svg.HeatCell(v, fmt(v), tip, outline=m is not None))
        rows.append(row)
    col_labels = [svg.param_text(v) for v in c0]
    return svg.heat_map(
        [svg.param_text(v) for v in c1],
        col_labels,
        rows,
        row_label=p1,
        col_label=p0,
        # wide enough that every column keeps its exact label (review 71 F4)
        cell_w=max(58, int(6.6 * max(len(c) for c in col_labels)) + 10),
        title=f"model over {p0} x {p1}" + (f" ({_held_text(held)})" if held else "") + " (outlined: measured)",
    )
