"""Small inline-SVG charts for the HTML report: no JavaScript library, no network, one string each.

Every chart returns `markupsafe.Markup` so that jinja2's autoescaping leaves it alone; all text that
reaches the SVG goes through `_esc` first, so region names from user code cannot inject markup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Sequence

from markupsafe import Markup

from ..pointtext import param_text  # noqa: F401  (the report's modules take it from here)

# Colour-blind-safe palette (Okabe-Ito), cycled for series.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

_VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


def _esc(text: object) -> str:
    return escape(str(text), quote=True)


def _fixed(v: float, digits: int) -> str:
    """`v` (1 <= |v|) to at least `digits` significant digits in fixed point, every integer digit kept."""
    whole = len(str(int(abs(v))))
    text = f"{v:.{max(0, digits - whole)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def short_number(v: float, digits: int = 3) -> str:
    """Short text for a plain metric value or an axis tick where space is short: 1.5k, 20, 0.25,
    3e-05, to `digits` significant digits. Not for parameter values in text, which `param_text`
    prints exactly; axis ticks go through `tick_labels`, which adds digits until different values
    read differently."""
    if v == 0:
        return "0"
    if not math.isfinite(v):
        return repr(float(v))
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.{max(1, digits - 1)}g}"
    if a >= 1e4:
        return _no_exponent(v / 1e3, digits) + "k"
    return _no_exponent(v, digits)


def _no_exponent(v: float, digits: int) -> str:
    """`v` to `digits` significant digits, its integer part whole where `g` would write an exponent
    (review 121 LOW-7: 4093 was `4.09e+03` in the report and `4093` in the table; 999.7 `1e+03`)."""
    text = f"{v:.{digits}g}"
    return f"{v:.0f}" if "e" in text else text


def _tick_number(v: float, digits: int) -> str:
    """`short_number` for an axis tick, where an integer part is never cut to an exponent: 1024
    and 1600 (not 1.02e+03 and 1.6e+03), 16.4k, 1000k."""
    a = abs(v)
    if v == 0 or not math.isfinite(v) or a >= 1e6 or a < 1:
        return short_number(v, digits)
    if a >= 1e4:
        return _fixed(v / 1e3, digits) + "k"
    return _fixed(v, digits)


def tick_labels(values: Sequence[float]) -> list[str]:
    """Axis tick labels of `values` (`_tick_number`), with digits added until no two different
    values share a label (review 71 F4: measured 16384 and 16400 were both `16.4k` on one axis,
    1024 and 1025 both `1.02e+03`)."""
    vals = [float(v) for v in values]
    for digits in range(3, 18):
        labels = [_tick_number(v, digits) for v in vals]
        seen: dict[str, float] = {}
        if all(seen.setdefault(t, v) == v for t, v in zip(labels, vals)):
            return labels
    return [param_text(v) for v in vals]


def format_seconds(s: float) -> str:
    """A duration for people: 850 ns, 12.3 µs, 4.56 ms, 1.23 s, 2.5 min, 3.1 h, 1389 h."""
    if s is None or not math.isfinite(s):
        return "n/a"
    if s == 0:
        return "0"
    unit, per = time_unit(abs(s))
    text = f"{s / per:.3g}"
    if "e" in text and unit in _LARGER:  # 999.5 µs rounds to 1e+03 µs: it is 1 ms (review 93 LOW-1)
        unit, per = _LARGER[unit]
        text = f"{s / per:.3g}"
    if "e" in text:  # never an exponent in the integer part (review 86 LOW-5: 1.39e+03 h)
        text = _fixed(s / per, 3)
    return f"{text} {unit}"


#: the unit above each, for a value that rounds to 1000 of its own
_LARGER = {"ns": ("µs", 1e-6), "µs": ("ms", 1e-3), "ms": ("s", 1.0)}


def time_unit(a: float) -> tuple[str, float]:
    """The unit `format_seconds` writes a duration of `a` seconds in, and its length in seconds:
    hours from 2 h, minutes from 2 min, each as the value rounds to 3 digits (7199 s is 2 h, not
    120 min)."""
    # (7170 s rounds to 120 min and 119.5 s to 120 s: those are 2 h and 2 min; review 94 LOW-6)
    if float(f"{a / 3600:.3g}") >= 2 or float(f"{a / 60:.3g}") >= 120:
        return "h", 3600.0
    if float(f"{a / 60:.3g}") >= 2 or float(f"{a:.3g}") >= 120:
        return "min", 60.0
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        # compare after rounding to 3 digits, so 0.9999 ms prints as 1 ms and not as 1e+03 µs
        if float(f"{a / scale:.3g}") >= 1:
            return unit, scale
    return "ns", 1e-9


@dataclass(frozen=True)
class SecondsFormat:
    """Values in a unit of time, `scale` seconds each, written as `format_seconds` writes them; an
    axis of them gets round ticks in one unit (review 86 LOW-5: round numbers of seconds read `694 h,
    1.39e+03 h` on an axis in hours)."""

    scale: float = 1.0

    def __call__(self, v: float) -> str:
        return format_seconds(v * self.scale)

    def axis(self, lo: float, hi: float) -> tuple[list[float], list[str]]:
        """Ticks between `lo` and `hi` (in this format's unit) and their labels, `0 h, 500 h, 1000 h`."""
        unit, per = time_unit(max(abs(lo), abs(hi)) * self.scale)
        k = self.scale / per
        ticks = _linear_ticks(lo * k, hi * k)
        return [t / k for t in ticks], [f"{label} {unit}" if t else "0" for t, label in zip(ticks, tick_labels(ticks))]


@dataclass
class PlotSeries:
    """One series of an x/y chart.

    `style`: "points" (markers, optional `lo`/`hi` error bars), "line" or "dashed".
    """

    name: str
    xs: Sequence[float]
    ys: Sequence[float]
    style: str = "points"
    color: str = PALETTE[0]
    lo: Sequence[float] | None = None
    hi: Sequence[float] | None = None
    tips: Sequence[str] | None = None


@dataclass
class _Scale:
    lo: float
    hi: float
    log: bool
    a: float  # pixel of lo
    b: float  # pixel of hi
    fixed: Sequence[float] | None = None

    def __call__(self, v: float) -> float:
        if self.log:
            lo, hi, v = math.log(self.lo), math.log(self.hi), math.log(max(v, self.lo * 1e-3))
        else:
            lo, hi = self.lo, self.hi
        if hi == lo:
            return (self.a + self.b) / 2
        return self.a + (v - lo) / (hi - lo) * (self.b - self.a)

    def ticks(self) -> list[float]:
        if self.fixed:
            return list(self.fixed)
        if self.log:
            return _log_ticks(self.lo, self.hi)
        return _linear_ticks(self.lo, self.hi)


def _linear_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=10 * mag)
    start = math.ceil(lo / step - 1e-9) * step
    out = []
    v = start
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def _log_ticks(lo: float, hi: float) -> list[float]:
    # Base 2 suits ranks and batch sizes; switch to base 10 for wide ranges to keep labels apart.
    base = 2.0 if hi / lo <= 2**12 else 10.0
    k0, k1 = math.floor(math.log(lo, base) + 1e-9), math.ceil(math.log(hi, base) - 1e-9)
    ticks = [base**k for k in range(k0, k1 + 1) if lo * (1 - 1e-9) <= base**k <= hi * (1 + 1e-9)]
    while len(ticks) > 8:
        ticks = ticks[::2]
    return ticks or [lo, hi]


def _domain(values: list[float], log: bool, pad: float = 0.05, zero: bool = False) -> tuple[float, float]:
    vals = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not vals:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(vals), max(vals)
    if log:
        if lo == hi:
            return lo / 2, hi * 2
        r = math.log(hi / lo) * pad
        return lo / math.exp(r), hi * math.exp(r)
    if lo == hi:
        return (lo - 1, hi + 1) if lo == 0 else (min(0.0, lo), hi * 1.1 if hi > 0 else 0.0)
    if zero and lo >= 0:
        # Durations start at zero: a cropped axis makes a 10% change look like a cliff.
        return 0.0, hi * (1 + pad)
    span = hi - lo
    return lo - span * pad, hi + span * pad


def xy_chart(
    series: Sequence[PlotSeries],
    *,
    x_label: str,
    y_label: str,
    x_log: bool = False,
    y_log: bool = False,
    width: int = 460,
    height: int = 280,
    title: str = "",
    y_format=short_number,
    vline: float | None = None,
    vline_label: str = "",
    x_ticks: Sequence[float] | None = None,
) -> Markup:
    """A scatter/line chart with axes, ticks, a legend row under the title, hover titles on markers.

    `x_ticks`: tick positions (e.g. the measured values); the default picks round numbers.
    """
    n_legend = len({s.name for s in series if s.name})
    ml, mr, mb = 62, 14, 44
    mt = (26 if title else 8) + (16 if n_legend >= 2 else 0)
    xs_all = [float(x) for s in series for x in s.xs]
    ys_all = [float(y) for s in series for y in s.ys]
    for s in series:
        ys_all += [float(v) for v in (s.lo or [])] + [float(v) for v in (s.hi or [])]
    if vline is not None:
        xs_all.append(float(vline))
    x_log = x_log and all(x > 0 for x in xs_all)
    y_log = y_log and all(y > 0 for y in ys_all if math.isfinite(y))
    xd = _domain(xs_all, x_log, 0.04)
    yd = _domain(ys_all, y_log, zero=True)
    ticks = None
    if x_ticks is not None:
        ticks = sorted({float(t) for t in x_ticks if xd[0] <= float(t) <= xd[1]})
        # too many measured values would overlap: thin them out, keeping the ends
        while len(ticks) > 9:
            ticks = ticks[:-1:2] + [ticks[-1]]
    sx = _Scale(xd[0], xd[1], x_log, ml, width - mr, ticks)
    sy = _Scale(yd[0], yd[1], y_log, height - mb, mt)
    out = _chart_start(width, height, ml, title, y_label)
    out.append(_axes(sx, sy, width, height, ml, mr, mt, mb, x_label, y_label, y_format))
    if vline is not None:
        px = sx(vline)
        out.append(
            f'<line class="target" x1="{px:.1f}" x2="{px:.1f}" y1="{mt}" y2="{height - mb}"/>'
            f'<text class="target-label" x="{px - 3:.1f}" y="{mt + 10}" text-anchor="end">{_esc(vline_label)}</text>'
        )
    for s in series:
        out.append(_draw_series(s, sx, sy, y_format))
    out.append(_legend(series, ml, mt - 8))
    out.append("</svg>")
    return Markup("".join(out))


def _chart_start(width: int, height: int, ml: float, title: str, y_label: str) -> list[str]:
    """The opening `<svg>` of a chart and its title, as the first parts of its markup."""
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{_esc(title or y_label)}">'
    ]
    if title:
        # a title wider than the chart is cut with an ellipsis, whole in its tooltip (review 95 LOW-3:
        # the held values at its end were lost past the edge); 12 px bold: about 7 px a character
        room = max(8, int((width - ml - 4) / _TITLE_CHAR_PX))
        shown = title if len(title) <= room else title[: room - 1] + "…"
        tip = f"<title>{_esc(title)}</title>" if shown != title else ""
        out.append(f'<text class="title" x="{ml}" y="16">{tip}{_esc(shown)}</text>')
    return out


_TITLE_CHAR_PX = 7.0


def _axes(sx, sy, width, height, ml, mr, mt, mb, x_label, y_label, y_format) -> str:
    """Grid, ticks, axes and labels; `sx` None for charts whose x axis is categories (bars)."""
    parts = ['<g class="axes">']
    x_ticks = sx.ticks() if sx is not None else []
    x_labels = tick_labels(x_ticks)
    shown = _apart([sx(t) for t in x_ticks], x_labels) if sx is not None else []
    for t, label, show in zip(x_ticks, x_labels, shown):
        px = sx(t)
        parts.append(f'<line class="grid" x1="{px:.1f}" x2="{px:.1f}" y1="{mt}" y2="{height - mb}"/>')
        if show:
            parts.append(f'<text x="{px:.1f}" y="{height - mb + 14}" text-anchor="middle">{_esc(label)}</text>')
    if isinstance(y_format, SecondsFormat) and not sy.log:
        y_ticks, y_labels = y_format.axis(sy.lo, sy.hi)
    else:
        y_ticks = sy.ticks()
        y_labels = tick_labels(y_ticks) if y_format is short_number else [y_format(t) for t in y_ticks]
    for t, label in zip(y_ticks, y_labels):
        py = sy(t)
        parts.append(
            f'<line class="grid" x1="{ml}" x2="{width - mr}" y1="{py:.1f}" y2="{py:.1f}"/>'
            f'<text x="{ml - 4}" y="{py + 4:.1f}" text-anchor="end">{_esc(label)}</text>'
        )
    parts.append(f'<line class="axis" x1="{ml}" x2="{width - mr}" y1="{height - mb}" y2="{height - mb}"/>')
    if sx is not None:
        parts.append(f'<line class="axis" x1="{ml}" x2="{ml}" y1="{mt}" y2="{height - mb}"/>')
    parts.append(
        f'<text class="label" x="{(ml + width - mr) / 2:.1f}" y="{height - (8 if sx is not None else 6)}" '
        f'text-anchor="middle">{_esc(x_label)}</text>'
        f'<text class="label" transform="translate(12,{(mt + height - mb) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{_esc(y_label)}</text></g>'
    )
    return "".join(parts)


#: width of a character of an axis label (11 px digits) and the least gap between two labels, in px
_CHAR_PX, _GAP_PX = 6.5, 4.0


def _apart(pxs: Sequence[float], labels: Sequence[str]) -> list[bool]:
    """Which x labels to draw so that none overlaps its neighbour (review 86 LOW-5: 1024 and 1025, 0.1
    px apart, were drawn on top of each other): the last is always drawn, and from the left a label is
    drawn where it touches neither the last one drawn nor the last label. Their grid lines stay, and
    the exact values are in the markers' tooltips."""
    def touch(i: int, j: int) -> bool:
        return abs(pxs[j] - pxs[i]) < (len(labels[i]) + len(labels[j])) * _CHAR_PX / 2 + _GAP_PX

    end = len(pxs) - 1
    shown = [False] * len(pxs)
    last = None
    for i in range(len(pxs)):
        if i == end or ((last is None or not touch(last, i)) and not touch(i, end)):
            shown[i], last = True, i
    return shown


def _draw_series(s: PlotSeries, sx, sy, y_format) -> str:
    pts = [(float(x), float(y)) for x, y in zip(s.xs, s.ys) if math.isfinite(float(y))]
    if not pts:
        return ""
    if s.style in ("line", "dashed"):
        d = " ".join(f"{'M' if i == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for i, (x, y) in enumerate(pts))
        dash = ' stroke-dasharray="5,4"' if s.style == "dashed" else ""
        return f'<path class="curve" d="{d}" stroke="{s.color}"{dash}><title>{_esc(s.name)}</title></path>'
    parts = [f'<g class="points" fill="{s.color}" stroke="{s.color}">']
    for i, (x, y) in enumerate(pts):
        px, py = sx(x), sy(y)
        if s.lo is not None and s.hi is not None:
            lo, hi = float(s.lo[i]), float(s.hi[i])
            if hi > lo:
                parts.append(f'<line class="errbar" x1="{px:.1f}" x2="{px:.1f}" y1="{sy(lo):.1f}" y2="{sy(hi):.1f}"/>')
        tip = s.tips[i] if s.tips is not None else f"{s.name}: x={param_text(x)}, y={y_format(y)}"
        parts.append(f'<circle class="marker" cx="{px:.1f}" cy="{py:.1f}" r="3.5"><title>{_esc(tip)}</title></circle>')
    parts.append("</g>")
    return "".join(parts)


def _legend(series: Sequence[PlotSeries], left: float, y: float) -> str:
    """One row of legend entries above the plot area, where it cannot hide data."""
    names = []
    for s in series:
        if s.name and s.name not in [n for n, _ in names]:
            names.append((s.name, s))
    if len(names) < 2:
        return ""
    parts = ['<g class="legend">']
    x = left
    for name, s in names:
        label = name if len(name) <= 28 else name[:27] + "…"
        if s.style == "points":
            parts.append(f'<circle cx="{x + 6:.1f}" cy="{y - 4:.1f}" r="3.5" fill="{s.color}"/>')
        else:
            dash = ' stroke-dasharray="5,4"' if s.style == "dashed" else ""
            parts.append(f'<line x1="{x:.1f}" x2="{x + 14:.1f}" y1="{y - 4:.1f}" y2="{y - 4:.1f}" stroke="{s.color}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 18:.1f}" y="{y:.1f}">{_esc(label)}</text>')
        x += 30 + 6.0 * len(label)
    parts.append("</g>")
    return "".join(parts)


def viridis(t: float) -> str:
    """Colour for t in [0, 1] on the viridis ramp (perceptually even, readable in grey)."""
    t = min(1.0, max(0.0, t)) * (len(_VIRIDIS) - 1)
    i = min(int(t), len(_VIRIDIS) - 2)
    f = t - i
    c = [round(a + (b - a) * f) for a, b in zip(_VIRIDIS[i], _VIRIDIS[i + 1])]
    return f"rgb({c[0]},{c[1]},{c[2]})"


def diverging(t: float) -> str:
    """Blue (t=-1) through white (0) to red (t=+1): below / above the mean."""
    t = min(1.0, max(-1.0, t))
    if t >= 0:
        c = (255, round(255 - 180 * t), round(255 - 200 * t))
    else:
        c = (round(255 + 200 * t), round(255 + 120 * t), 255)
    return f"rgb({c[0]},{c[1]},{c[2]})"


@dataclass
class HeatCell:
    value: float
    text: str = ""
    tip: str = ""
    outline: bool = False
    color: str | None = None


def heat_map(
    rows: Sequence[str],
    cols: Sequence[str],
    cells: Sequence[Sequence[HeatCell]],
    *,
    row_label: str,
    col_label: str,
    title: str = "",
    log: bool = True,
    cell_w: int = 58,
    cell_h: int = 26,
) -> Markup:
    """A grid of coloured cells; rows drawn bottom-up so that it reads like an x/y plot.

    Cells with `color` keep it; the rest are coloured by `value` on viridis (log scale if `log`).
    """
    ml = max(60, int(7.4 * max((len(r) for r in rows), default=0)) + 12)
    mt, mb = 26 if title else 8, 40
    # wide enough for the title: an SVG clips what falls outside its box
    width = max(ml + cell_w * len(cols) + 10, ml + int(7.6 * len(title)) + 10)
    height = mt + cell_h * len(rows) + mb
    vals = [c.value for r in cells for c in r if c.color is None and math.isfinite(c.value) and (c.value > 0 or not log)]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)

    def norm(v: float) -> float:
        if not math.isfinite(v) or hi == lo:
            return 0.5
        if log and v > 0 and lo > 0:
            return math.log(v / lo) / math.log(hi / lo)
        return (v - lo) / (hi - lo)

    out = [
        f'<svg class="chart heat" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{_esc(title or "heat map")}">'
    ]
    if title:
        out.append(f'<text class="title" x="{ml}" y="16">{_esc(title)}</text>')
    n = len(rows)
    for ri, row in enumerate(cells):
        y = mt + (n - 1 - ri) * cell_h
        out.append(f'<text x="{ml - 4}" y="{y + cell_h / 2 + 4:.1f}" text-anchor="end">{_esc(rows[ri])}</text>')
        for ci, c in enumerate(row):
            x = ml + ci * cell_w
            t = norm(c.value)
            fill = c.color or viridis(t)
            ink = "dark" if (c.color is not None or t > 0.55) else "light"
            stroke = ' stroke="#000" stroke-width="1.5"' if c.outline else ' stroke="#fff"'
            out.append(
                f'<g><rect x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" fill="{fill}"{stroke}/>'
                f'<text x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + 4:.1f}" text-anchor="middle" class="{ink}">'
                f"{_esc(c.text)}</text><title>{_esc(c.tip or c.text)}</title></g>"
            )
    # column labels must not overlap: label every k-th column when the cells are narrow for them
    every = max(1, -(-max(28, int(6.6 * max((len(c) for c in cols), default=0)) + 6) // cell_w))
    for ci, col in enumerate(cols):
        if ci % every:
            continue
        out.append(
            f'<text x="{ml + ci * cell_w + cell_w / 2:.1f}" y="{mt + n * cell_h + 14}" text-anchor="middle">{_esc(col)}</text>'
        )
    out.append(
        f'<text class="label" x="{ml + cell_w * len(cols) / 2:.1f}" y="{height - 6}" text-anchor="middle">{_esc(col_label)}</text>'
        f'<text class="label" x="4" y="{mt + n * cell_h / 2:.1f}">{_esc(row_label)}</text></svg>'
    )
    return Markup("".join(out))


@dataclass
class BarStack:
    label: str
    segments: list[tuple[str, float]] = field(default_factory=list)
    marker: float | None = None  # e.g. GPU time, which overlaps the other segments
    marker_note: str = ""  # added to the marker's tooltip (what to compare it with)
    #: the number that `label` prints (a parameter value), for a shorter axis label where `label`
    #: is too wide for its bar's slot; the bar's tooltips keep `label`
    value: float | None = None


def stacked_bars(
    bars: Sequence[BarStack],
    *,
    x_label: str,
    y_label: str,
    colors: dict[str, str],
    marker_name: str = "",
    width: int = 460,
    height: int = 280,
    title: str = "",
    y_format=short_number,
) -> Markup:
    """Vertical stacked bars, one per configuration; an optional tick per bar for an overlapping value."""
    ml, mr, mt, mb = 62, 120, 26 if title else 12, 44
    tops = [sum(v for _, v in b.segments) for b in bars] + [b.marker or 0.0 for b in bars]
    hi = max(tops) * 1.08 if tops and max(tops) > 0 else 1.0
    sy = _Scale(0.0, hi, False, height - mb, mt)
    n = max(1, len(bars))
    slot = (width - ml - mr) / n
    bw = min(40.0, slot * 0.7)
    out = _chart_start(width, height, ml, title, y_label)
    out.append(_axes(None, sy, width, height, ml, mr, mt, mb, x_label, y_label, y_format))
    labels = [b.label for b in bars]
    if any(6.6 * len(t) > slot for t in labels) and bars and all(b.value is not None for b in bars):
        labels = tick_labels([float(b.value) for b in bars])  # type: ignore[arg-type]
    for i, b in enumerate(bars):
        x = ml + slot * i + (slot - bw) / 2
        base = 0.0
        for name, v in b.segments:
            if v <= 0:
                continue
            y0, y1 = sy(base), sy(base + v)
            out.append(
                f'<rect class="bar" x="{x:.1f}" y="{y1:.1f}" width="{bw:.1f}" height="{y0 - y1:.1f}" '
                f'fill="{colors.get(name, "#888")}"><title>{_esc(f"{b.label}: {name} {y_format(v)}")}</title></rect>'
            )
            base += v
        if b.marker is not None and b.marker > 0:
            py = sy(b.marker)
            out.append(
                f'<line class="bar-marker" x1="{x - 3:.1f}" x2="{x + bw + 3:.1f}" y1="{py:.1f}" y2="{py:.1f}">'
                f'<title>{_esc(f"{b.label}: {marker_name} {y_format(b.marker)}{b.marker_note}")}</title></line>'
            )
        out.append(
            f'<text x="{x + bw / 2:.1f}" y="{height - mb + 14}" text-anchor="middle">{_esc(labels[i])}</text>'
        )
    y = mt + 4
    for name, color in colors.items():
        out.append(
            f'<rect x="{width - mr + 10}" y="{y}" width="10" height="10" fill="{color}"/>'
            f'<text x="{width - mr + 24}" y="{y + 9}">{_esc(name)}</text>'
        )
        y += 15
    if marker_name:
        out.append(
            f'<line class="bar-marker" x1="{width - mr + 8}" x2="{width - mr + 22}" y1="{y + 5}" y2="{y + 5}"/>'
            f'<text x="{width - mr + 24}" y="{y + 9}">{_esc(marker_name)}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))
