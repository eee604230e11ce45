"""`--format markdown`: a pipe table for pull requests and tickets."""

from __future__ import annotations

from ..ranking import Ranking
from .columns import HEADERS, cells, target_text


def _escape(cell: str) -> str:
    return cell.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(ranking: Ranking) -> str:
    params = ", ".join(f"`{p}`" for p in ranking.parameters) or "none"
    out = [
        f"**{len(ranking.rows)} model(s)** over {params}, worst-scaling first; predictions at "
        f"{target_text(ranking) or 'the measured maximum'}.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---:" if h in ("#", "at target", "SMAPE%", "adj.R2", "CV SMAPE%", "RSS", "points") else "---" for h in HEADERS) + "|",
    ]
    model_col = HEADERS.index("model")
    cp_col = HEADERS.index("callpath")
    for i, row in enumerate(ranking.rows, 1):
        c = list(cells(i, row))
        c[model_col] = f"`{c[model_col]}`"
        c[cp_col] = f"`{c[cp_col]}`"
        out.append("| " + " | ".join(_escape(x) for x in c) + " |")
    if ranking.warnings:
        out += ["", "Warnings:", ""] + [f"- {_escape(w)}" for w in ranking.warnings]
    return "\n".join(out) + "\n"
