"""Render a `Report` as one self-contained HTML page or as markdown text."""

from __future__ import annotations

import datetime as _dt
import math

import jinja2

from .. import __version__, mdtext
from . import svg
from .assemble import Report


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("modeler.report", "templates"),
        # Region names come from user code: everything inserted into HTML is escaped.
        autoescape=lambda name: name is not None and name.endswith(".html.j2"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    env.filters.update(
        secs=svg.format_seconds,
        num=svg.short_number,
        param=svg.param_text,  # a parameter value, exactly (review 71 F4)
        leaf=lambda p: visible(str(p).rsplit("->", 1)[-1]),
        parent=lambda p: visible(str(p).rpartition("->")[0]) + "->" if "->" in str(p) else "",
        finite=lambda v: v if v is not None and math.isfinite(v) else -1e300,
        md=mdtext.text,
        code=lambda v, **kw: mdtext.code(visible(v), **kw),
        visible=visible,
    )
    return env


def visible(name: object) -> str:
    """A region name with its line breaks shown as the call tree shows them, `\\n` and `\\r` (review 86
    LOW-7: `line\\nbreak` read as a region named "line break", in the markdown and in the page)."""
    return str(name).replace("\r", "\\r").replace("\n", "\\n")


def _render(name: str, report: Report, **extra) -> str:
    env = _environment()
    env.filters["value"] = lambda v: "n/a" if v is None or not math.isfinite(v) else report.unit_format(v)
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return env.get_template(name).render(r=report, version=__version__, generated=generated, **extra)


def render_html(report: Report) -> str:
    return _render("report.html.j2", report)


def render_markdown(report: Report, top: int = 20) -> str:
    return _render("report.md.j2", report, top=top)
