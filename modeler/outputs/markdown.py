"""`--format markdown`: a pipe table for pull requests and tickets."""

from __future__ import annotations

from .. import mdtext
from ..ranking import Ranking
from .columns import HEADERS, cells, doubtful_legend, left_out_text, target_text


def render_markdown(ranking: Ranking) -> str:
    params = ", ".join(mdtext.code(p) for p in ranking.parameters) or "none"
    out = [
        f"**{len(ranking.rows)} model(s)** over {params}, worst-scaling first; predictions at "
        f"{mdtext.text(target_text(ranking)) or 'the measured maximum'}.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---:" if h in ("#", "at target", "SMAPE%", "adj.R2", "CV SMAPE%", "RSS", "points") else "---" for h in HEADERS) + "|",
    ]
    model_col = HEADERS.index("model")
    cp_col = HEADERS.index("callpath")
    metric_col = HEADERS.index("metric")
    for i, row in enumerate(ranking.rows, 1):
        c = list(cells(i, row))  # numbers need no escaping; names from the inputs do
        c[model_col] = mdtext.code(c[model_col])
        c[cp_col] = mdtext.code(c[cp_col])
        c[metric_col] = mdtext.text(c[metric_col])
        out.append("| " + " | ".join(c) + " |")
    if legend := doubtful_legend(ranking):
        out += ["", mdtext.text(legend)]
    if ranking.left_out:
        out += ["", mdtext.text(left_out_text(ranking))]
    if ranking.warnings:
        out += ["", "Warnings:", ""] + [f"- {mdtext.text(w)}" for w in ranking.warnings]
    return "\n".join(out) + "\n"
