"""The terminal table: aligned columns, long call paths shortened from the left."""

from __future__ import annotations

import unicodedata

from ..ranking import Ranking
from .columns import HEADERS, cells, doubtful_legend, left_out_text, target_text

MAX_CALLPATH = 60
_RIGHT = {"#", "at target", "SMAPE%", "adj.R2", "CV SMAPE%", "RSS", "points"}


def shorten_callpath(cp: str, width: int = MAX_CALLPATH) -> str:
    """Keep the innermost regions, which name what is measured: `...->train->step`."""
    if len(cp) <= width:
        return cp
    return "..." + cp[len(cp) - width + 3 :]


def visible(text: str) -> str:
    """Control characters (a newline or tab in a region name) as escapes, so a row stays one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def display_width(text: str) -> int:
    """Terminal columns `text` takes: East Asian wide and full-width characters two, combining
    marks none (review 121 LOW-1: a row with `計算` in its call path stood 2 columns right of the others)."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * max(0, width - display_width(text))
    return fill + text if right else text + fill


# what a terminal too narrow for every column loses first: these columns (`metric` only where
# every row has the same one), then call path characters down to MIN_CALLPATH, then the columns of
# LAST_NARROWING; the model, the call path, its growth, the prediction and the 80% range stay
NARROWING = ("RSS", "adj.R2", "points", "CV SMAPE%", "metric")
LAST_NARROWING = ("SMAPE%", "run spread")
MIN_CALLPATH = 24
MIN_MODEL = 30  # the model is the last column and may wrap past this


def render_table(ranking: Ranking, width: int | None = None) -> str:
    """The table; within `width` terminal columns where given (None: every column, as wide as
    its cells), narrowed in the order of `NARROWING` (review 121 LOW-1: 230-character rows on an
    80-column terminal). What was left out is said below the table."""
    rows = [tuple(visible(c) for c in cells(i, r)) for i, r in enumerate(ranking.rows, 1)]
    cp = HEADERS.index("callpath")
    full = [r[cp] for r in rows]
    keep = list(range(len(HEADERS)))
    callpath_width = MAX_CALLPATH
    dropped: list[str] = []
    # each column's width once (the model's counted as at most MIN_MODEL: it is last and may wrap);
    # the call path's for each length it is shortened to, as asked
    column = [min(w, MIN_MODEL) if j == len(HEADERS) - 1 else w
              for j, w in enumerate(max([len(h)] + [display_width(r[j]) for r in rows]) for j, h in enumerate(HEADERS))]
    callpath_columns: dict[int, int] = {}

    def callpath_column(n: int) -> int:
        if n not in callpath_columns:
            callpath_columns[n] = max([len("callpath")] + [display_width(c) for c in _shortened(full, n)])
        return callpath_columns[n]

    def others() -> int:  # the columns but the call path's, and the gaps between all
        return sum(column[j] for j in keep if j != cp) + 2 * (len(keep) - 1)

    def too_wide() -> bool:
        return width is not None and others() + callpath_column(callpath_width) > width

    def drop(names: tuple[str, ...]) -> None:
        one_metric = len({r[HEADERS.index("metric")] for r in rows}) <= 1
        for name in names:
            if not too_wide():
                return
            if name != "metric" or one_metric:
                keep.remove(HEADERS.index(name))
                dropped.append(name)

    drop(NARROWING)
    if too_wide():
        callpath_width = max(MIN_CALLPATH, min(callpath_width, width - others()))
        while callpath_width > MIN_CALLPATH and too_wide():  # call paths kept whole where shortened alike
            callpath_width -= 1
    drop(LAST_NARROWING)
    shown = _shortened(full, callpath_width)
    rows = [r[:cp] + (c,) + r[cp + 1 :] for r, c in zip(rows, shown)]
    headers = tuple(HEADERS[j] for j in keep)
    rows = [tuple(r[j] for j in keep) for r in rows]
    widths = [max([len(h)] + [display_width(r[j]) for r in rows]) for j, h in enumerate(headers)]

    def line(cols: tuple[str, ...]) -> str:
        out = []
        for j, (h, c) in enumerate(zip(headers, cols)):
            if j == len(headers) - 1:
                out.append(c)  # no padding after the last column
            else:
                out.append(_pad(c, widths[j], h in _RIGHT))
        return "  ".join(out).rstrip()

    params = ", ".join(ranking.parameters) or "none"
    lines = [
        f"{len(ranking.rows)} model(s) over {params}; sorted by asymptotic growth, then by the value at {target_text(ranking) or 'the measured maximum'}",
        line(headers),
        line(tuple("-" * w for w in widths[:-1]) + ("-" * len(headers[-1]),)),
    ]
    lines.extend(line(r) for r in rows)
    if not rows:
        lines.append("(no models)")
    if dropped:
        named = [f"metric (every row's: {visible(ranking.rows[0].fitted.metric)})" if d == "metric" else d for d in dropped]
        lines.append(f"columns left out to fit {width} terminal columns: {', '.join(named)}; "
                     "--width 0 shows every column (or --format csv, json)")
    if legend := doubtful_legend(ranking):
        lines.append(legend)
    if ranking.left_out:
        lines.append(visible(left_out_text(ranking)))
    return "\n".join(lines) + "\n"


def _shortened(callpaths: list[str], width: int) -> list[str]:
    """Call paths shortened to `width`, except where two would then read the same: those whole."""
    short = [shorten_callpath(c, width) for c in callpaths]
    owners: dict[str, set[str]] = {}
    for full, s in zip(callpaths, short):
        owners.setdefault(s, set()).add(full)
    return [s if len(owners[s]) == 1 else full for full, s in zip(callpaths, short)]

