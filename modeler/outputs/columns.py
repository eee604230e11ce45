"""The cells every tabular format shows for a ranked model, formatted once for all of them."""

from __future__ import annotations

import math

from ..ranking import RankedModel, Ranking

# the model formula goes last: it is the only unbounded cell, so it may run past a terminal's width
HEADERS = ("#", "callpath", "metric", "growth", "at target", "interval", "SMAPE%", "adj.R2", "CV SMAPE%", "RSS", "points", "model")


def number(v: float | None, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def growth_text(g: tuple[float, float]) -> str:
    """`p^1.5 log^1`-style summary of the dominant term; "const" for none, a minus when it falls."""
    e, l = g
    if e == 0 and l == 0:
        return "const"
    sign = "-" if (e < 0 or l < 0) else ""
    e, l = abs(e), abs(l)
    parts = []
    if e:
        parts.append(f"x^{number(e, 3)}")
    if l:
        parts.append(f"log^{number(l, 3)}")
    return sign + " ".join(parts)


def target_text(ranking: Ranking) -> str:
    return ", ".join(f"{p}={number(v, 6)}" for p, v in ranking.at.items())


def cells(i: int, row: RankedModel) -> tuple[str, ...]:
    fm = row.fitted
    interval = "-" if row.low is None else f"[{number(row.low)}, {number(row.high)}]"
    return (
        str(i),
        fm.callpath,
        fm.metric,
        growth_text(row.growth),
        number(row.prediction),
        interval,
        number(fm.smape, 3),
        number(fm.ar2, 4),
        number(fm.cv_smape, 3),
        number(fm.rss, 3),
        str(fm.points),
        fm.model.formula(digits=4),
    )
