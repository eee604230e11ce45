"""Renderers of a `Ranking`: a terminal table, JSON, Markdown and CSV.

Each renderer is a function `(Ranking) -> str`; `render` picks one by its `--format` name.
"""

from __future__ import annotations

from typing import Callable

from ..errors import InputError
from ..ranking import Ranking
from .csv_format import render_csv
from .json_format import render_json
from .markdown import render_markdown
from .table import render_table

RENDERERS: dict[str, Callable[[Ranking], str]] = {
    "table": render_table,
    "json": render_json,
    "markdown": render_markdown,
    "csv": render_csv,
}
FORMATS = tuple(RENDERERS)


def render(ranking: Ranking, fmt: str = "table", width: int | None = None) -> str:
    """`ranking` in the format `fmt`; the table within `width` terminal columns where given."""
    if fmt == "table":
        return render_table(ranking, width)
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise InputError(f"--format: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    return renderer(ranking)
