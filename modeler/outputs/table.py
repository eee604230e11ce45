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


def render_table(ranking: Ranking) -> str:
    rows = [tuple(visible(c) for c in cells(i, r)) for i, r in enumerate(ranking.rows, 1)]
    cp = HEADERS.index("callpath")
    short = {r[cp]: shorten_callpath(r[cp]) for r in rows}
    # two call paths that differ only in the part cut off would look the same: show them whole
    owners: dict[str, set[str]] = {}
    for full, s in short.items():
        owners.setdefault(s, set()).add(full)
    rows = [r[:cp] + ((short[r[cp]] if len(owners[short[r[cp]]]) == 1 else r[cp]),) + r[cp + 1 :] for r in rows]
    widths = [max([len(h)] + [display_width(r[j]) for r in rows]) for j, h in enumerate(HEADERS)]

    def line(cols: tuple[str, ...]) -> str:
        out = []
        for j, (h, c) in enumerate(zip(HEADERS, cols)):
            if j == len(HEADERS) - 1:
                out.append(c)  # no padding after the last column
            else:
                out.append(_pad(c, widths[j], h in _RIGHT))
        return "  ".join(out).rstrip()

    params = ", ".join(ranking.parameters) or "none"
    lines = [
        f"{len(ranking.rows)} model(s) over {params}; sorted by asymptotic growth, then by the value at {target_text(ranking) or 'the measured maximum'}",
        line(HEADERS),
        line(tuple("-" * w for w in widths[:-1]) + ("-" * len(HEADERS[-1]),)),
    ]
    lines.extend(line(r) for r in rows)
    if not rows:
        lines.append("(no models)")
    if legend := doubtful_legend(ranking):
        lines.append(legend)
    if ranking.left_out:
        lines.append(visible(left_out_text(ranking)))
    return "\n".join(lines) + "\n"
